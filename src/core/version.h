#ifndef AORTA_CORE_VERSION_H
#define AORTA_CORE_VERSION_H

#ifndef AORTA_VERSION
#define AORTA_VERSION "0.0.0"
#endif

/* The checkout's commit (12 hex digits, or "unknown"), written at build time
 * by cmake/git_commit.cmake. */
extern const char ao_git_commit[];

#endif
