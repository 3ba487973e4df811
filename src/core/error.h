/* One error path for the whole program.
 *
 * Every message a user sees about a failure goes through here, so that they all
 * read "aorta: error: WHAT: WHY" (plus an optional "hint: HOW TO FIX") and the
 * exit codes mean the same thing everywhere. Library code prints and returns an
 * error code; only commands (src/cli) decide to exit. */
#ifndef AORTA_CORE_ERROR_H
#define AORTA_CORE_ERROR_H

#include <stdarg.h>
#include <stddef.h>

enum ao_exit {
    AO_EXIT_OK = 0,    /* success */
    AO_EXIT_FAIL = 1,  /* the run failed (device, collective, a rank died, I/O) */
    AO_EXIT_USAGE = 2, /* bad usage or input: flags, config, sweep file, log dir */
    /* Stopped by Ctrl-C or SIGTERM before its planned end, cleanly: its files
     * are complete and say so ("completed": false). 128 + SIGINT, as shells. */
    AO_EXIT_INTERRUPTED = 130,
};

#if defined(__GNUC__)
#define AO_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AO_PRINTF(f, a)
#endif

/* "aorta: error: WHAT: WHY\n" on stderr. */
void ao_error(const char *what, const char *fmt, ...) AO_PRINTF(2, 3);
/* "hint: HOW\n" on stderr; call right after ao_error. */
void ao_hint(const char *fmt, ...) AO_PRINTF(1, 2);
/* "aorta: warning: WHY\n" on stderr, unless the log level is above warnings. */
void ao_warn(const char *fmt, ...) AO_PRINTF(1, 2);
/* "aorta: debug: ...\n" on stderr, only at the debug level. */
void ao_debug(const char *fmt, ...) AO_PRINTF(1, 2);
/* The least severe lines printed (logging.level): AO_LEVEL_DEBUG, _INFO (the
 * default), _WARNING or _ERROR, the order of config.h's enum ao_log_level.
 * Errors and hints always print. */
enum { AO_LEVEL_DEBUG, AO_LEVEL_INFO, AO_LEVEL_WARNING, AO_LEVEL_ERROR };
void ao_set_log_level(int level);
int ao_log_level(void);

/* ao_error + exit(code). For commands and for "cannot continue" paths in
 * backends (a failed CUDA call inside a stream thread, say). */
_Noreturn void ao_fatal(int code, const char *what, const char *fmt, ...) AO_PRINTF(3, 4);

/* The last error line's text (WHAT: WHY, escaped as printed; "" before the
 * first): what a run's end records when it fails after printing why. */
const char *ao_last_error(void);

/* A process's last words: how it ends when it ends on a path that exits at
 * once (ao_fatal; the collective watchdog before its _exit). A run's driver
 * registers `fn` to record them (train: run.json's "end"); it is called at
 * most once a process, with the kind and the error text. */
typedef enum ao_end_kind { AO_END_FAILED, AO_END_TIMED_OUT, AO_END_NO_SPACE } ao_end_kind;
typedef void (*ao_last_words_fn)(void *ctx, ao_end_kind kind, const char *text);
void ao_set_last_words(ao_last_words_fn fn, void *ctx);
/* Call the registered fn (if any, and only the first time). */
void ao_last_words(ao_end_kind kind, const char *text);

/* Out-of-memory is never recoverable here: these abort with a message. */
void *ao_malloc(size_t n);
void *ao_calloc(size_t n, size_t size);
void *ao_realloc(void *p, size_t n);
char *ao_strdup(const char *s);
/* printf into a fresh heap string. */
char *ao_asprintf(const char *fmt, ...) AO_PRINTF(1, 2);

#endif
