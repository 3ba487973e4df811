/* Test helpers for code that writes files and prints errors: capture what a
 * call prints on stderr, read a file, make and remove a temporary directory.
 * Include after <cmocka.h>. */
#ifndef AORTA_TESTS_TEST_FILES_H
#define AORTA_TESTS_TEST_FILES_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct stderr_capture {
    int saved;
    char path[64];
} stderr_capture;

static inline void capture_begin(stderr_capture *c)
{
    fflush(stderr);
    strcpy(c->path, "/tmp/aorta_stderr_XXXXXX");
    int fd = mkstemp(c->path);
    assert_true(fd >= 0);
    c->saved = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* The whole file as a heap string (NULL when it cannot be read). */
static inline char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

/* Ends the capture; returns what was printed (heap string). */
static inline char *capture_end(stderr_capture *c)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    char *text = slurp(c->path, NULL);
    unlink(c->path);
    assert_non_null(text);
    return text;
}

/* Fails the test unless `text` contains `needle`, printing both. */
#define assert_contains(text, needle)                                                              \
    do {                                                                                           \
        const char *t_ = (text), *n_ = (needle);                                                   \
        if (!strstr(t_, n_)) {                                                                     \
            print_error("expected \"%s\" in:\n%s\n", n_, t_);                                      \
            _fail(__FILE__, __LINE__);                                                             \
        }                                                                                          \
    } while (0)

static inline char *make_temp_dir(void)
{
    char tmpl[] = "/tmp/aorta_test_XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static inline int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* rm -rf dir, then free the string. */
static inline void remove_temp_dir(char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

#endif
