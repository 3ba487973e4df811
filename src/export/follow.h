/* A run directory followed as it is written (DESIGN §18): every
 * rank_*_metrics.jsonl in it, read from where the last refresh stopped, so a
 * refresh costs only the lines added since. A line counts once its '\n' has
 * landed (a writer's partial last line waits for the next refresh); the
 * latest `train` record of each rank is kept, without its per-op intervals.
 *
 *     ao_follow f;
 *     ao_follow_init(&f, "/abs/artifacts/r", "r");
 *     ao_follow_refresh(&f);   // before each scrape
 *     for (size_t i = 0; i < f.n; i++) ... f.ranks[i].last ...
 *     ao_follow_free(&f);
 */
#ifndef AORTA_EXPORT_FOLLOW_H
#define AORTA_EXPORT_FOLLOW_H

#include <stddef.h>
#include <sys/types.h>

#include "core/jsonl.h"

/* A longer line is not a record: it is skipped (and counted as bad) rather
 * than held in memory. Records with per-op intervals stay far below. */
#define AO_FOLLOW_MAX_LINE (64u << 20)

typedef struct ao_follow_rank {
    char *file;  /* "rank_00_metrics.jsonl" */
    char *label; /* the rank label: "0" for rank_00_..., else the name's middle */
    long order;  /* the rank number, for sorting; LONG_MAX when the name has none */
    dev_t dev;
    ino_t ino;
    off_t offset; /* bytes read */
    char *part;   /* bytes after the last '\n' read */
    size_t plen, pcap;
    int skipping;        /* inside an over-long line: dropped up to its '\n' */
    long long lines;     /* complete lines seen, for file:line in messages */
    long long steps;     /* `train` records */
    long long bad_lines; /* complete lines that are no record */
    int warned;          /* a bad line was reported (once per file) */
    int have_last;
    ao_iter_record last; /* the latest train record; ops never kept */
} ao_follow_rank;

typedef struct ao_follow {
    char *dir; /* the run directory */
    char *run; /* the run label: the directory's name */
    ao_follow_rank *ranks;
    size_t n, cap;
    size_t max_line; /* AO_FOLLOW_MAX_LINE (tests set less) */
} ao_follow;

void ao_follow_init(ao_follow *f, const char *dir, const char *run);
void ao_follow_free(ao_follow *f);

/* Pick up rank files that appeared and the complete lines added to every
 * file since the last call. A file replaced or truncated (a new inode, a
 * shorter size) is read again from its start, its counters from zero. Never
 * fails: unreadable files keep their last state, bad lines are counted and
 * the first of each file is reported with ao_warn. */
void ao_follow_refresh(ao_follow *f);

#endif
