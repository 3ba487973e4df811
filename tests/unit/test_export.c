/* export/: the Prometheus exposition of a followed run directory (names,
 * label and help escaping, several ranks, partial and bad lines, files
 * replaced), the HTTP request parser and responses, and the server over real
 * loopback sockets (idle and surplus clients, refusals). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_files.h"

#include "core/error.h"
#include "core/jsonl.h"
#include "core/text.h"
#include "export/export.h"
#include "export/follow.h"
#include "export/http.h"
#include "export/prom.h"

/* ---- records and files ------------------------------------------------------ */

/* A train record whose every number is set; kinds with ops > 0 as `kinds`
 * says (a bit per ao_coll_kind). */
static char *record(int rank, long long step, const char *phase, double step_ms, unsigned kinds)
{
    ao_iter_record r;
    ao_iter_record_init(&r);
    r.rank = rank;
    r.world_size = 16;
    r.step = step;
    r.phase = phase;
    r.wall_time = 1.7e9 + (double)step;
    r.m.window_start_us = 10;
    r.m.window_end_us = 10 + step_ms * 1000;
    r.m.step_ms = step_ms;
    r.m.compute_ms = 6.5;
    r.m.comm_ms = 4;
    r.m.copy_ms = 0.25;
    r.m.overlap_ms = 3;
    r.m.exposed_comm_ms = 1;
    r.m.idle_ms = 0.5;
    r.m.host_wait_ms = 0.125;
    r.m.overlap_ratio = 0.75;
    r.m.compute_covered_ratio = 3 / 6.5;
    r.m.overlap_efficiency = 0.75;
    for (int k = 0; k < AO_NKINDS; k++) {
        if (!(kinds >> k & 1)) {
            r.m.compute_kind_ms[k] = 0;
            r.m.exposed_kind_ms[k] = 0;
            continue;
        }
        r.m.kinds[k] = (ao_kind_stats){.ops = k + 1,
                                       .bytes = 1024u << k,
                                       .busy_ms = 2 + k,
                                       .algbw_gbps = 1.5,
                                       .busbw_gbps = 2.25 + k};
        r.m.compute_kind_ms[k] = 1.5 + k;
        r.m.exposed_kind_ms[k] = 0.5;
    }
    r.loss = 0.625;
    r.loss_local = 0.5;
    r.grad_norm = 0.25;
    r.lr = 1e-3;
    r.tokens_per_s = 12345.5;
    r.data_wait_ms = 0.0625;
    r.mem_peak_mb = 3;
    r.host_gap_ms = 0.03125;
    r.samples = 8;
    char *line = ao_iter_record_format(&r, NULL);
    assert_non_null(line);
    return line;
}

static void append(const char *dir, const char *file, const char *text)
{
    char *p = ao_asprintf("%s/%s", dir, file);
    FILE *f = fopen(p, "ab");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    free(p);
}

static void append_record(const char *dir, const char *file, int rank, long long step,
                          double step_ms)
{
    char *line = record(rank, step, "train", step_ms, 0x3);
    append(dir, file, line);
    free(line);
}

/* ---- the exposition's grammar ----------------------------------------------- */

static int name_ok(const char *s, size_t n, int metric)
{
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alpha =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return 0;
    }
    return 1;
}

/* Checks every line of text against the 0.0.4 format: HELP then TYPE once
 * per family before its samples, valid names, quoted and escaped label
 * values, a float value. Returns the number of samples. */
static int check_exposition(const char *text)
{
    size_t len = strlen(text);
    assert_true(len > 0 && text[len - 1] == '\n');
    char family[128] = "", seen[8192] = " ";
    int samples = 0, typed = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p);
        if (strncmp(p, "# HELP ", 7) == 0) {
            const char *name = p + 7, *sp = memchr(name, ' ', n - 7);
            assert_non_null(sp);
            assert_true(name_ok(name, (size_t)(sp - name), 1));
            snprintf(family, sizeof family, "%.*s", (int)(sp - name), name);
            char key[140];
            snprintf(key, sizeof key, " %s ", family);
            assert_null(strstr(seen, key)); /* one HELP per family */
            strncat(seen, key + 1, sizeof seen - strlen(seen) - 1);
            for (const char *c = sp; c < nl; c++) /* \ only as \\ or \n */
                if (*c == '\\') assert_true(c[1] == '\\' || c[1] == 'n'), c++;
            typed = 0;
        } else if (strncmp(p, "# TYPE ", 7) == 0) {
            char want[200];
            snprintf(want, sizeof want, "# TYPE %s counter", family);
            int counter = n == strlen(want) && strncmp(p, want, n) == 0;
            snprintf(want, sizeof want, "# TYPE %s gauge", family);
            int gauge = n == strlen(want) && strncmp(p, want, n) == 0;
            assert_true(counter || gauge);
            size_t fl = strlen(family);
            int total = fl > 6 && strcmp(family + fl - 6, "_total") == 0;
            assert_int_equal(total, counter); /* counters, and only they, end in _total */
            typed = 1;
        } else {
            assert_true(typed);
            size_t fl = strlen(family);
            assert_true(strncmp(p, family, fl) == 0 && p[fl] == '{');
            const char *c = p + fl + 1;
            for (;;) {
                const char *eq = strchr(c, '=');
                assert_true(eq && eq < nl && name_ok(c, (size_t)(eq - c), 0));
                assert_true(eq[1] == '"');
                c = eq + 2;
                while (*c != '"') {
                    assert_true(c < nl);
                    if (*c == '\\') {
                        assert_true(c[1] == '\\' || c[1] == '"' || c[1] == 'n');
                        c++;
                    }
                    c++;
                }
                c++;
                if (*c == '}') break;
                assert_int_equal(*c, ',');
                c++;
            }
            assert_int_equal(c[1], ' ');
            const char *v = c + 2;
            char *end;
            strtod(v, &end);
            int special = strncmp(v, "+Inf\n", 5) == 0 || strncmp(v, "-Inf\n", 5) == 0;
            assert_true(special || (end == nl && end > v));
            samples++;
        }
        p = nl + 1;
    }
    return samples;
}

/* The value of the sample line that starts with `series` ("name{labels}"),
 * NAN when there is none. */
static double value_of(const char *text, const char *series)
{
    char *key = ao_asprintf("\n%s ", series);
    const char *p = strstr(text, key);
    double v = p ? strtod(p + strlen(key), NULL) : NAN;
    free(key);
    return v;
}

static char *render(ao_follow *f)
{
    ao_follow_refresh(f);
    size_t len;
    char *text = ao_prom_render(f, &len);
    assert_int_equal(strlen(text), len);
    check_exposition(text);
    return text;
}

/* ---- escaping ----------------------------------------------------------------- */

static char *to_string(void (*fn)(FILE *, const char *), const char *s)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    fn(f, s);
    fclose(f);
    return buf;
}

static void test_escaping(void **state)
{
    (void)state;
    char *l = to_string(ao_prom_label_value, "a\\b\"c\nd");
    assert_string_equal(l, "a\\\\b\\\"c\\nd");
    char *h = to_string(ao_prom_help_text, "x\\y\"z\nw");
    assert_string_equal(h, "x\\\\y\"z\\nw"); /* quotes stay in HELP */
    free(l);
    free(h);
}

/* ---- the exposition of a directory ----------------------------------------- */

static void test_several_ranks(void **state)
{
    (void)state;
    char *tmp = make_temp_dir();
    /* a run name that needs escaping in a label */
    char *dir = ao_asprintf("%s/r\"\\x", tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    append_record(dir, "rank_00_metrics.jsonl", 0, 0, 10);
    append_record(dir, "rank_00_metrics.jsonl", 0, 1, 12.5);
    for (long long s = 0; s < 3; s++) append_record(dir, "rank_01_metrics.jsonl", 1, s, 20 + s);
    char *base = record(1, 3, "compute_only", 99, 0); /* not a train step: not counted */
    append(dir, "rank_01_metrics.jsonl", base);
    free(base);
    append(dir, "run.json", "{}\n");
    ao_follow f;
    ao_follow_init(&f, dir, "r\"\\x");
    char *text = render(&f);
    const char *run = "run=\"r\\\"\\\\x\"";
    char key[256];
    snprintf(key, sizeof key, "aorta_steps_total{%s,rank=\"0\"}", run);
    assert_true(value_of(text, key) == 2);
    snprintf(key, sizeof key, "aorta_steps_total{%s,rank=\"1\"}", run);
    assert_true(value_of(text, key) == 3);
    snprintf(key, sizeof key, "aorta_last_step{%s,rank=\"1\"}", run);
    assert_true(value_of(text, key) == 2);
    snprintf(key, sizeof key, "aorta_step_seconds{%s,rank=\"0\"}", run);
    assert_true(value_of(text, key) == 12.5 * 1e-3);
    snprintf(key, sizeof key, "aorta_step_seconds{%s,rank=\"1\"}", run);
    assert_true(value_of(text, key) == 22 * 1e-3);
    snprintf(key, sizeof key, "aorta_export_rank_files{%s}", run);
    assert_true(value_of(text, key) == 2);
    /* per kind: the kinds the step ran, labelled */
    snprintf(key, sizeof key, "aorta_exposed_comm_seconds{%s,rank=\"1\",kind=\"allgather\"}", run);
    assert_true(value_of(text, key) == 0.5 * 1e-3);
    snprintf(key, sizeof key, "aorta_collective_ops{%s,rank=\"1\",kind=\"reducescatter\"}", run);
    assert_true(value_of(text, key) == 2);
    snprintf(key, sizeof key,
             "aorta_collective_busbw_bytes_per_second{%s,rank=\"0\",kind=\"allgather\"}", run);
    assert_true(value_of(text, key) == 2.25e9);
    snprintf(key, sizeof key, "aorta_exposed_comm_seconds{%s,rank=\"1\",kind=\"allreduce\"}", run);
    assert_true(isnan(value_of(text, key))); /* ran none */
    snprintf(key, sizeof key, "aorta_memory_peak_bytes{%s,rank=\"0\"}", run);
    assert_true(value_of(text, key) == 3 * 1048576.0);
    /* rank 0's series come before rank 1's */
    snprintf(key, sizeof key, "aorta_step_seconds{%s,rank=\"0\"}", run);
    const char *r0 = strstr(text, key);
    snprintf(key, sizeof key, "aorta_step_seconds{%s,rank=\"1\"}", run);
    assert_true(r0 && r0 < strstr(text, key));
    free(text);
    ao_follow_free(&f);
    free(dir);
    remove_temp_dir(tmp);
}

/* Every family has a sample when every field is there: each name the table
 * maps reaches a value (a typo in a metric name would leave its family
 * empty). */
static void test_every_family(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char *line = record(0, 7, "train", 5, 0xF);
    append(dir, "rank_00_metrics.jsonl", line);
    append(dir, "rank_00_metrics.jsonl", "not json\n");
    free(line);
    ao_follow f;
    ao_follow_init(&f, dir, "run");
    stderr_capture cap;
    capture_begin(&cap);
    char *text = render(&f);
    free(capture_end(&cap));
    for (size_t i = 0; i < ao_prom_family_count(); i++) {
        const char *name, *type, *help;
        ao_prom_family(i, &name, &type, &help);
        char *want = ao_asprintf("\n%s{run=\"run\"", name);
        assert_contains(text, want);
        free(want);
    }
    free(text);
    ao_follow_free(&f);
    remove_temp_dir(dir);
}

/* A line counts once its '\n' lands; a file grows between refreshes. */
static void test_partial_line(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    append_record(dir, "rank_00_metrics.jsonl", 0, 0, 10);
    char *line = record(0, 1, "train", 11, 0x3);
    size_t n = strlen(line);
    char *head = strndup(line, n / 2);
    append(dir, "rank_00_metrics.jsonl", head);
    ao_follow f;
    ao_follow_init(&f, dir, "r");
    char *text = render(&f);
    assert_true(value_of(text, "aorta_steps_total{run=\"r\",rank=\"0\"}") == 1);
    assert_true(value_of(text, "aorta_last_step{run=\"r\",rank=\"0\"}") == 0);
    free(text);
    /* the rest, without its newline yet: still one */
    char *rest = strndup(line + n / 2, n - n / 2 - 1);
    append(dir, "rank_00_metrics.jsonl", rest);
    text = render(&f);
    assert_true(value_of(text, "aorta_steps_total{run=\"r\",rank=\"0\"}") == 1);
    free(text);
    append(dir, "rank_00_metrics.jsonl", "\n");
    text = render(&f);
    assert_true(value_of(text, "aorta_steps_total{run=\"r\",rank=\"0\"}") == 2);
    assert_true(value_of(text, "aorta_last_step{run=\"r\",rank=\"0\"}") == 1);
    assert_true(value_of(text, "aorta_step_seconds{run=\"r\",rank=\"0\"}") == 11e-3);
    free(text);
    /* a rank file that appears later is followed too */
    append_record(dir, "rank_03_metrics.jsonl", 3, 0, 30);
    text = render(&f);
    assert_true(value_of(text, "aorta_steps_total{run=\"r\",rank=\"3\"}") == 1);
    free(text);
    ao_follow_free(&f);
    free(line);
    free(head);
    free(rest);
    remove_temp_dir(dir);
}

/* Bad lines are skipped and counted (one warning per file); a replaced file
 * starts again from zero. */
static void test_bad_lines_and_replaced(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    append_record(dir, "rank_00_metrics.jsonl", 0, 0, 10);
    append(dir, "rank_00_metrics.jsonl", "\n{\"schema\": 2, \"step\": 1}\nnot json\n[1,2]\n");
    append_record(dir, "rank_00_metrics.jsonl", 0, 5, 15);
    ao_follow f;
    ao_follow_init(&f, dir, "r");
    f.max_line = 4096; /* records are about 1.3 kB */
    stderr_capture cap;
    capture_begin(&cap);
    char *text = render(&f);
    char *err = capture_end(&cap);
    assert_contains(err, "rank_00_metrics.jsonl:3: not a metrics record of schema 1; skipped");
    assert_null(strstr(err, ":4:")); /* once per file */
    free(err);
    assert_true(value_of(text, "aorta_steps_total{run=\"r\",rank=\"0\"}") == 2);
    assert_true(value_of(text, "aorta_export_bad_lines_total{run=\"r\",rank=\"0\"}") == 3);
    assert_true(value_of(text, "aorta_last_step{run=\"r\",rank=\"0\"}") == 5);
    free(text);
    /* an over-long line, arriving in pieces, is dropped up to its newline */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    append(dir, "rank_00_metrics.jsonl", big);
    capture_begin(&cap);
    free(render(&f));
    append(dir, "rank_00_metrics.jsonl", big);
    free(render(&f));
    append(dir, "rank_00_metrics.jsonl", "\n");
    append_record(dir, "rank_00_metrics.jsonl", 0, 6, 16);
    text = render(&f);
    free(capture_end(&cap));
    assert_true(value_of(text, "aorta_steps_total{run=\"r\",rank=\"0\"}") == 3);
    assert_true(value_of(text, "aorta_export_bad_lines_total{run=\"r\",rank=\"0\"}") == 4);
    assert_true(value_of(text, "aorta_last_step{run=\"r\",rank=\"0\"}") == 6);
    free(text);
    /* replaced by a new file (a rerun into the same name): counted afresh */
    char *p = ao_asprintf("%s/rank_00_metrics.jsonl", dir);
    assert_int_equal(unlink(p), 0);
    free(p);
    append_record(dir, "rank_00_metrics.jsonl", 0, 9, 19);
    text = render(&f);
    assert_true(value_of(text, "aorta_steps_total{run=\"r\",rank=\"0\"}") == 1);
    assert_true(value_of(text, "aorta_export_bad_lines_total{run=\"r\",rank=\"0\"}") == 0);
    assert_true(value_of(text, "aorta_last_step{run=\"r\",rank=\"0\"}") == 9);
    free(text);
    ao_follow_free(&f);
    remove_temp_dir(dir);
}

/* Rank labels: rank_NN is rank N; any other name is its own label, after
 * the numbered ranks. */
static void test_rank_labels(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    append_record(dir, "rank_10_metrics.jsonl", 10, 0, 1);
    append_record(dir, "rank_2_pid77_metrics.jsonl", 2, 0, 1);
    append_record(dir, "rank_02_metrics.jsonl", 2, 0, 1);
    append(dir, "rank_metrics.jsonl", "x\n"); /* no middle: not a rank file */
    ao_follow f;
    ao_follow_init(&f, dir, "r");
    ao_follow_refresh(&f);
    assert_int_equal(f.n, 3);
    assert_string_equal(f.ranks[0].label, "2");
    assert_string_equal(f.ranks[1].label, "10");
    assert_string_equal(f.ranks[2].label, "2_pid77");
    ao_follow_free(&f);
    remove_temp_dir(dir);
}

/* ---- HTTP ------------------------------------------------------------------------ */

static ao_http_verdict parse(const char *s)
{
    return ao_http_parse(s, strlen(s));
}

static void test_request_parser(void **state)
{
    (void)state;
    assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n"),
                     AO_HTTP_METRICS);
    assert_int_equal(parse("GET /metrics?x=1 HTTP/1.0\r\n\r\n"), AO_HTTP_METRICS);
    assert_int_equal(parse("GET /metrics HTTP/1.1\n\n"), AO_HTTP_METRICS);
    assert_int_equal(parse(""), AO_HTTP_MORE);
    assert_int_equal(parse("GET /metr"), AO_HTTP_MORE);
    assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: a\r\n"), AO_HTTP_MORE);
    assert_int_equal(parse("GET / HTTP/1.1\r\n\r\n"), AO_HTTP_NOT_FOUND);
    assert_int_equal(parse("GET /metricsx HTTP/1.1\r\n\r\n"), AO_HTTP_NOT_FOUND);
    assert_int_equal(parse("GET /metrics/ HTTP/1.1\r\n\r\n"), AO_HTTP_NOT_FOUND);
    assert_int_equal(parse("GET /x/../metrics HTTP/1.1\r\n\r\n"), AO_HTTP_NOT_FOUND);
    assert_int_equal(parse("POST /metrics HTTP/1.1\r\n\r\n"), AO_HTTP_BAD_METHOD);
    assert_int_equal(parse("HEAD /metrics HTTP/1.1\r\n\r\n"), AO_HTTP_BAD_METHOD);
    /* a bad request line is refused at once, headers or not */
    assert_int_equal(parse("garbage\r\n"), AO_HTTP_BAD_REQUEST);
    assert_int_equal(parse("get /metrics HTTP/1.1\r\n"), AO_HTTP_BAD_REQUEST);
    assert_int_equal(parse("GET  /metrics HTTP/1.1\r\n"), AO_HTTP_BAD_REQUEST);
    assert_int_equal(parse("GET metrics HTTP/1.1\r\n"), AO_HTTP_BAD_REQUEST);
    assert_int_equal(parse("GET /metrics HTTP/2.0\r\n"), AO_HTTP_BAD_REQUEST);
    assert_int_equal(parse("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), AO_HTTP_BAD_REQUEST);
    assert_int_equal(parse("GET /met\x01rics HTTP/1.1\r\n"), AO_HTTP_BAD_REQUEST);
    assert_int_equal(parse("GET /metrics HTTP/1.1 x\r\n"), AO_HTTP_BAD_REQUEST);
    assert_int_equal(parse("\r\n"), AO_HTTP_BAD_REQUEST);
    /* bounded: no line end, or no end of headers, within the limit */
    char *big = malloc(AO_HTTP_MAX_REQUEST + 1);
    memset(big, 'A', AO_HTTP_MAX_REQUEST);
    big[AO_HTTP_MAX_REQUEST] = '\0';
    assert_int_equal(ao_http_parse(big, AO_HTTP_MAX_REQUEST), AO_HTTP_TOO_LARGE);
    assert_int_equal(ao_http_parse(big, AO_HTTP_MAX_REQUEST - 1), AO_HTTP_MORE);
    const char *line = "GET /metrics HTTP/1.1\r\nX: ";
    memcpy(big, line, strlen(line));
    assert_int_equal(ao_http_parse(big, AO_HTTP_MAX_REQUEST), AO_HTTP_TOO_LARGE);
    free(big);
    /* fed a byte at a time: more, more, ..., then the answer */
    const char *req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    for (size_t n = 0; n < strlen(req); n++) assert_int_equal(ao_http_parse(req, n), AO_HTTP_MORE);
    assert_int_equal(ao_http_parse(req, strlen(req)), AO_HTTP_METRICS);
}

static void test_responses(void **state)
{
    (void)state;
    size_t n;
    char *r = ao_http_response(AO_HTTP_METRICS, AO_PROM_CONTENT_TYPE, "a 1\n", 4, &n);
    assert_int_equal(strlen(r), n);
    assert_string_equal(r, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; "
                           "charset=utf-8\r\nContent-Length: 4\r\nConnection: close\r\n\r\na 1\n");
    free(r);
    r = ao_http_response(AO_HTTP_NOT_FOUND, AO_PROM_CONTENT_TYPE, NULL, 0, &n);
    assert_true(strncmp(r, "HTTP/1.1 404 Not Found\r\n", 24) == 0);
    assert_contains(r, "\r\n\r\nnot found: aorta serves /metrics only\n");
    free(r);
    r = ao_http_response(AO_HTTP_BAD_METHOD, AO_PROM_CONTENT_TYPE, NULL, 0, &n);
    assert_contains(r, "405 Method Not Allowed\r\n");
    assert_contains(r, "\r\nAllow: GET\r\n");
    free(r);
    r = ao_http_response(AO_HTTP_TOO_LARGE, AO_PROM_CONTENT_TYPE, NULL, 0, &n);
    assert_contains(r, "HTTP/1.1 431 ");
    free(r);
    r = ao_http_response(AO_HTTP_BAD_REQUEST, AO_PROM_CONTENT_TYPE, NULL, 0, &n);
    assert_contains(r, "HTTP/1.1 400 Bad Request\r\n");
    free(r);
}

static void test_ports_and_addresses(void **state)
{
    (void)state;
    int port = -1;
    assert_int_equal(ao_export_parse_port("--prometheus", "0", 0, &port), 0);
    assert_int_equal(port, 0);
    assert_int_equal(ao_export_parse_port("--prometheus", "65535", 1, &port), 0);
    assert_int_equal(port, 65535);
    const char *bad[] = {"65536", "-1", "", "12x", "0x10", " 1"};
    stderr_capture cap;
    capture_begin(&cap);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(ao_export_parse_port("--prometheus", bad[i], 0, &port), AO_EXIT_USAGE);
    assert_int_equal(ao_export_parse_port("key", "0", 1, &port), AO_EXIT_USAGE);
    assert_null(ao_export_open("localhost", 0, "--listen", "--prometheus"));
    assert_null(ao_export_open("1.2.3", 0, "--listen", "--prometheus"));
    char *err = capture_end(&cap);
    assert_contains(err, "aorta: error: --prometheus: '65536' is not a port");
    assert_contains(err, "aorta: error: key: '0' is not a port: give an integer from 1 to 65535");
    assert_contains(err, "aorta: error: --listen: 'localhost' is not a numeric IPv4 or IPv6");
    free(err);
    /* a port that is taken */
    ao_exporter *a = ao_export_open("127.0.0.1", 0, "--listen", "--prometheus");
    assert_non_null(a);
    const char *url = ao_export_url(a);
    assert_true(strncmp(url, "http://127.0.0.1:", 17) == 0);
    int taken = atoi(url + 17);
    assert_true(taken > 0);
    capture_begin(&cap);
    assert_null(ao_export_open("127.0.0.1", taken, "--listen", "key.port"));
    err = capture_end(&cap);
    assert_contains(err, "aorta: error: key.port: cannot listen on 127.0.0.1 port");
    free(err);
    ao_export_close(a);
}

/* ---- the server, over loopback ---------------------------------------------- */

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {60, 0}; /* a guard against a hang, not a timing */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Send req on fd and read the whole answer (the server closes after it). */
static char *exchange(int fd, const char *req, size_t len)
{
    assert_int_equal(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    ssize_t got;
    while ((got = recv(fd, buf + n, cap - n - 1, 0)) > 0) {
        n += (size_t)got;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    assert_int_equal(got, 0); /* closed by the server, not timed out */
    buf[n] = '\0';
    close(fd);
    return buf;
}

static char *get(int port, const char *req)
{
    return exchange(connect_to(port), req, strlen(req));
}

static void test_server(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    append_record(dir, "rank_00_metrics.jsonl", 0, 0, 10);
    ao_exporter *ex = ao_export_open(NULL, 0, "--listen", "--prometheus");
    assert_non_null(ex);
    int port = atoi(ao_export_url(ex) + 17);
    stderr_capture cap;
    capture_begin(&cap);
    assert_int_equal(ao_export_start(ex, dir), 0);
    char *err = capture_end(&cap);
    assert_contains(err, "aorta: export: serving run ");
    assert_contains(err, ao_export_url(ex));
    free(err);

    /* an idle client and a half-sent request hold no one up */
    int idle = connect_to(port);
    int half = connect_to(port);
    assert_int_equal(send(half, "GET /metr", 9, 0), 9);
    const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    char *r = get(port, req);
    assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_contains(r, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n");
    const char *body = strstr(r, "\r\n\r\n") + 4;
    char *cl = ao_asprintf("Content-Length: %zu\r\n", strlen(body));
    assert_contains(r, cl);
    free(cl);
    check_exposition(body);
    assert_contains(body, "\naorta_steps_total{run=\"");
    free(r);

    /* lines added since are in the next answer */
    append_record(dir, "rank_00_metrics.jsonl", 0, 1, 10);
    append_record(dir, "rank_01_metrics.jsonl", 1, 0, 10);
    r = get(port, req);
    assert_contains(r, ",rank=\"0\"} 2\n");
    assert_contains(r, ",rank=\"1\"} 1\n");
    free(r);

    /* refusals */
    r = get(port, "GET /other HTTP/1.1\r\n\r\n");
    assert_true(strncmp(r, "HTTP/1.1 404 ", 13) == 0);
    free(r);
    r = get(port, "DELETE /metrics HTTP/1.1\r\n\r\n");
    assert_true(strncmp(r, "HTTP/1.1 405 ", 13) == 0);
    free(r);
    r = get(port, "\x16\x03\x01\x02\x10\x01\x02\xfc\x03\x03\r\n"); /* a TLS hello */
    assert_true(strncmp(r, "HTTP/1.1 400 ", 13) == 0);
    free(r);
    char *big = malloc(AO_HTTP_MAX_REQUEST + 100);
    size_t hl = strlen("GET /metrics HTTP/1.1\r\nX: ");
    memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", hl);
    memset(big + hl, 'a', AO_HTTP_MAX_REQUEST + 100 - hl);
    r = exchange(connect_to(port), big, AO_HTTP_MAX_REQUEST);
    assert_true(strncmp(r, "HTTP/1.1 431 ", 13) == 0);
    free(r);
    free(big);
    /* a client that goes away mid-request */
    close(connect_to(port));

    /* more clients than slots: the oldest give way, a scrape still gets in */
    int many[AO_EXPORT_MAX_CLIENTS + 8];
    for (int i = 0; i < AO_EXPORT_MAX_CLIENTS + 8; i++) many[i] = connect_to(port);
    r = get(port, req);
    assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
    free(r);
    for (int i = 0; i < AO_EXPORT_MAX_CLIENTS + 8; i++) close(many[i]);
    close(idle);
    close(half);

    ao_export_close(ex); /* stops and joins the thread */
    remove_temp_dir(dir);
}

static void test_not_a_dir(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    append(dir, "file", "x\n");
    char *file = ao_asprintf("%s/file", dir);
    ao_exporter *ex = ao_export_open(NULL, 0, "--listen", "--prometheus");
    assert_non_null(ex);
    stderr_capture cap;
    capture_begin(&cap);
    assert_int_equal(ao_export_start(ex, "/nonexistent/run"), AO_EXIT_USAGE);
    assert_int_equal(ao_export_start(ex, file), AO_EXIT_USAGE);
    char *err = capture_end(&cap);
    assert_contains(err, "aorta: error: /nonexistent/run: not a run directory: No such file");
    assert_contains(err, "/file: not a run directory: not a directory");
    free(err);
    ao_export_close(ex);
    free(file);
    remove_temp_dir(dir);
}

/* docs/prometheus.md has a row for every family, with its type. */
static void test_docs_list_every_family(void **state)
{
    (void)state;
    const char *src = getenv("AORTA_SOURCE_DIR");
    if (!src) skip();
    char *path = ao_asprintf("%s/docs/prometheus.md", src);
    char *doc = slurp(path, NULL);
    assert_non_null(doc);
    for (size_t i = 0; i < ao_prom_family_count(); i++) {
        const char *name, *type, *help;
        ao_prom_family(i, &name, &type, &help);
        char *row = ao_asprintf("| `%s` | %s |", name, type);
        assert_contains(doc, row);
        free(row);
    }
    free(doc);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_several_ranks),
        cmocka_unit_test(test_every_family),
        cmocka_unit_test(test_partial_line),
        cmocka_unit_test(test_bad_lines_and_replaced),
        cmocka_unit_test(test_rank_labels),
        cmocka_unit_test(test_request_parser),
        cmocka_unit_test(test_responses),
        cmocka_unit_test(test_ports_and_addresses),
        cmocka_unit_test(test_server),
        cmocka_unit_test(test_not_a_dir),
        cmocka_unit_test(test_docs_list_every_family),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
