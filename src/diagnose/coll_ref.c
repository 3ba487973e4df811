/* `aorta coll --json`'s rows as the reference for a run's transfers
 * (diagnose.h: ao_coll_ref). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "diagnose/internal.h"

static int row_error(const char *path, size_t i, const char *key, const char *what)
{
    ao_error(path, "row %zu: \"%s\" %s", i, key, what);
    ao_hint("give the file `aorta coll --json FILE` wrote");
    return AO_EXIT_USAGE;
}

int ao_coll_ref_read(const char *path, ao_coll_ref *out)
{
    memset(out, 0, sizeof *out);
    char err[300];
    yajl_val v = ao_json_read_file(path, err, sizeof err);
    if (!v) {
        ao_error("--coll-ref", "%s", err);
        return AO_EXIT_USAGE;
    }
    int rc = 0;
    if (!YAJL_IS_ARRAY(v)) {
        ao_error(path, "not a JSON array of rows (the output of `aorta coll --json FILE`)");
        rc = AO_EXIT_USAGE;
    }
    size_t n = rc ? 0 : v->u.array.len;
    out->rows = ao_calloc(n ? n : 1, sizeof *out->rows);
    for (size_t i = 0; i < n && rc == 0; i++) {
        yajl_val r = v->u.array.values[i];
        yajl_val coll = ao_json_member(r, "coll"), nr = ao_json_member(r, "nranks"),
                 size = ao_json_member(r, "size"), bw = ao_json_member(r, "oop_busbw_gbps");
        if (!YAJL_IS_OBJECT(r))
            rc = row_error(path, i, "row", "is not an object");
        else if (!YAJL_IS_STRING(coll))
            rc = row_error(path, i, "coll", "is not a string");
        else if (!YAJL_IS_INTEGER(nr) || YAJL_GET_INTEGER(nr) < 1)
            rc = row_error(path, i, "nranks", "is not a rank count");
        else if (!YAJL_IS_NUMBER(size) || !(ao_json_number(size) > 0))
            rc = row_error(path, i, "size", "is not a size in bytes");
        else if (!YAJL_IS_NUMBER(bw) || !(ao_json_number(bw) >= 0))
            rc = row_error(path, i, "oop_busbw_gbps", "is not a bandwidth");
        if (rc) break;
        ao_coll_ref_row *row = &out->rows[out->n++];
        snprintf(row->coll, sizeof row->coll, "%s", coll->u.string);
        row->nranks = (int)YAJL_GET_INTEGER(nr);
        row->size = ao_json_number(size);
        row->busbw_gbps = ao_json_number(bw);
    }
    yajl_tree_free(v);
    if (rc)
        ao_coll_ref_free(out);
    else
        out->path = ao_strdup(path);
    return rc;
}

void ao_coll_ref_free(ao_coll_ref *r)
{
    free(r->rows);
    free(r->path);
    memset(r, 0, sizeof *r);
}

double ao_coll_ref_busbw(const ao_coll_ref *r, const char *kind, int nranks, double size)
{
    /* the nearest rows below and above size */
    const ao_coll_ref_row *lo = NULL, *hi = NULL;
    for (size_t i = 0; i < r->n; i++) {
        const ao_coll_ref_row *x = &r->rows[i];
        if (x->nranks != nranks || strcmp(x->coll, kind) != 0) continue;
        if (x->size <= size && (!lo || x->size > lo->size)) lo = x;
        if (x->size >= size && (!hi || x->size < hi->size)) hi = x;
    }
    if (!lo && !hi) return NAN;
    if (!lo) return hi->busbw_gbps;
    if (!hi || hi->size == lo->size) return lo->busbw_gbps;
    double f = log(size / lo->size) / log(hi->size / lo->size);
    return lo->busbw_gbps + f * (hi->busbw_gbps - lo->busbw_gbps);
}
