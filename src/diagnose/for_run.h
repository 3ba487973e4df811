/* What a run's driver (train/) takes from diagnose/: the findings printed at
 * the end of `aorta train` (diagnose.h has the rest). */
#ifndef AORTA_DIAGNOSE_FOR_RUN_H
#define AORTA_DIAGNOSE_FOR_RUN_H

#include <stdio.h>

/* Load run_dir and print its findings (the top three). Returns 0, or
 * AO_EXIT_USAGE when the run cannot be loaded. */
int ao_diagnose_print_run(const char *run_dir, FILE *f);

#endif
