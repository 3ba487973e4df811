/* Every metric of the report in plain words with its DESIGN §7 definition,
 * for the page's glossary and the tables' tooltips. */
#ifndef AORTA_REPORT_GLOSSARY_H
#define AORTA_REPORT_GLOSSARY_H

#include <stddef.h>

typedef struct ao_glossary_entry {
    const char *plain;      /* "the time a user waits for one training step" */
    const char *definition; /* "|W| = latest op end - earliest op start" */
} ao_glossary_entry;

/* The entry of metric i (ao_metric index); never NULL: a metric without a
 * written entry is a defect the unit test catches (plain is then ""). */
ao_glossary_entry ao_glossary(size_t metric);

/* A term of the decomposition (DESIGN §7) and what a user does about it. */
typedef struct ao_glossary_term {
    const char *name, *plain, *definition, *act;
} ao_glossary_term;
const ao_glossary_term *ao_glossary_terms(size_t *n);

#endif
