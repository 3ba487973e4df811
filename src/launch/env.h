/* Starting this binary again as a child (the spawner's ranks, mpirun, a
 * sweep's launches): the path to exec and the child's environment. Public,
 * unlike launch/internal.h, so sweep/ and the spawner share one copy. */
#ifndef AORTA_LAUNCH_ENV_H
#define AORTA_LAUNCH_ENV_H

/* A NULL-terminated envp: every entry of `base` whose name no entry of `set`
 * has, then the entries of `set`. The strings are not copied; free() the
 * array only. */
char **ao_env_merge(char *const *base, char *const *set);

/* The running binary (readlink /proc/self/exe) in a fresh string, or NULL
 * after printing why. */
char *ao_self_exe(void);

#endif
