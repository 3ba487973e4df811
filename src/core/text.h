/* Small string helpers shared by the config loader and the commands. */
#ifndef AORTA_CORE_TEXT_H
#define AORTA_CORE_TEXT_H

#include <stdarg.h>
#include <stddef.h>

/* Levenshtein distance (insertions, deletions, substitutions), for
 * did-you-mean suggestions. Stops counting at `cap`: returns cap when the
 * distance is cap or more, so long hostile inputs stay cheap. */
int ao_edit_distance(const char *a, const char *b, int cap);
/* The distance below which a word of `len` characters counts as a typo of
 * another (the cap to pass ao_edit_distance for did-you-mean). */
int ao_typo_limit(size_t len);

/* The shortest "%.Ng" text of v that reads back as exactly v. */
void ao_format_double(char *buf, size_t n, double v);

/* printf onto the end of the string in buf (n bytes in all), truncating:
 * for messages built piece by piece. */
void ao_appendf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ao_vappendf(char *buf, size_t n, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* True when s begins with prefix. */
int ao_starts_with(const char *s, const char *prefix);

/* The one check of every name aorta turns into a path (run names, sweep
 * names, report labels, the trace file name): 1..max printable ASCII
 * characters, no '/', not "." or "..", not starting with '-' (it would read
 * as a flag). Such a name stays inside the directory it is joined to.
 * Returns 0, or AO_EXIT_USAGE after one error naming `what` (the flag, file
 * or key it came from); `kind` names the thing ("run name", "sweep name"). */
int ao_check_plain_name(const char *name, size_t max, const char *what, const char *kind);
/* The same check, silent: why `name` is no plain name (written into buf), or
 * NULL when it is one. For callers that word the error themselves. */
const char *ao_plain_name_problem(const char *name, size_t max, const char *kind, char *buf,
                                  size_t n);

#endif
