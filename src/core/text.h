/* Small string helpers shared by the config loader and the commands. */
#ifndef AORTA_CORE_TEXT_H
#define AORTA_CORE_TEXT_H

#include <stddef.h>

/* Levenshtein distance (insertions, deletions, substitutions), for
 * did-you-mean suggestions. Stops counting at `cap`: returns cap when the
 * distance is cap or more, so long hostile inputs stay cheap. */
int ao_edit_distance(const char *a, const char *b, int cap);

/* The shortest "%.Ng" text of v that reads back as exactly v. */
void ao_format_double(char *buf, size_t n, double v);

/* True when s begins with prefix. */
int ao_starts_with(const char *s, const char *prefix);

#endif
