/* bench_compare.c — pagoda bench --compare: saved bench files side by side, one column per run
 * (device or peer), one row per item spec, with each column's ratio to the first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "bench.h"

/* ---- comparing saved files ----------------------------------------------------------------- */

/* A saved bench file is a few kilobytes per run; 64 MiB is far past any real one. */
#define COMPARE_MAX_BYTES ((uint64_t)64 << 20)

static json_t *load_json(const char *path)
{
    void *text = NULL;
    size_t size = 0;
    pgd_error *err = NULL;
    if (pgd_file_read(path, COMPARE_MAX_BYTES, &text, &size, &err) != PGD_OK) {
        fprintf(stderr, "pagoda: error: %s\n", pgd_error_get_message(err));
        pgd_error_destroy(err);
        return NULL;
    }
    json_error_t je;
    json_t *v = json_loadb(text, size, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!v)
        fprintf(stderr, "pagoda: error: %s:%d: %s\n", path, je.line, je.text);
    return v;
}

#define COMPARE_MAX_COLS 16

static const char *result_spec(json_t *res)
{
    const char *s = json_string_value(json_object_get(res, "spec"));
    return s ? s : json_string_value(json_object_get(res, "name"));
}

static double lookup_median(json_t *run, const char *spec)
{
    size_t k;
    json_t *res;
    json_array_foreach(json_object_get(run, "results"), k, res)
    {
        const char *s = result_spec(res);
        if (s && !strcmp(s, spec))
            return json_number_value(json_object_get(res, "median_ms"));
    }
    return 0;
}

/* Loads every file into docs[]; EXIT_RUNTIME, after a message for each, when one is not a
 * bench file. */
static int load_docs(char **files, int nfiles, json_t **docs)
{
    int rc = EXIT_OK;
    for (int i = 0; i < nfiles; i++) {
        docs[i] = load_json(files[i]);
        if (!docs[i] || !json_is_array(json_object_get(docs[i], "runs"))) {
            if (docs[i])
                fprintf(stderr, "pagoda: error: %s: not a pagoda bench file (no \"runs\" array)\n",
                        files[i]);
            rc = EXIT_RUNTIME;
        }
    }
    return rc;
}

/* "[n] file: device (platform); peak …", the legend line of column n. */
static void print_column_legend(int n, const char *file, json_t *run)
{
    json_t *dev = json_object_get(run, "device");
    json_t *pk = json_object_get(run, "peak");
    printf("[%d] %s: %s", n, file,
           json_string_value(json_object_get(dev, "name"))
               ? json_string_value(json_object_get(dev, "name"))
               : "?");
    const char *plat = json_string_value(json_object_get(dev, "platform"));
    if (plat)
        printf(" (%s)", plat);
    if (pk)
        printf("; peak %.1f GFLOP/s, %.1f GB/s", json_number_value(json_object_get(pk, "gflops")),
               json_number_value(json_object_get(pk, "gbs")));
    printf("\n");
}

/* Appends to rows the specs of run's results it does not hold yet. */
static void add_rows(json_t *rows, json_t *run)
{
    size_t k;
    json_t *res;
    json_array_foreach(json_object_get(run, "results"), k, res)
    {
        const char *s = result_spec(res);
        int seen = 0;
        size_t m;
        json_t *row;
        json_array_foreach(rows, m, row) seen |= s && !strcmp(json_string_value(row), s);
        if (s && !seen)
            json_array_append_new(rows, json_string(s));
    }
}

/* Every run of every file becomes a column (at most COMPARE_MAX_COLS), its legend printed and
 * its specs added to rows. Returns the number of columns. */
static int gather_columns(char **files, int nfiles, json_t **docs, json_t **cols, json_t *rows)
{
    int ncols = 0;
    for (int f = 0; f < nfiles; f++) {
        size_t ri;
        json_t *run;
        json_array_foreach(json_object_get(docs[f], "runs"), ri, run)
        {
            if (ncols == COMPARE_MAX_COLS) {
                fprintf(stderr, "pagoda: note: more than %d runs; the rest are left out\n",
                        COMPARE_MAX_COLS);
                break;
            }
            cols[ncols++] = run;
            print_column_legend(ncols, files[f], run);
            add_rows(rows, run);
        }
    }
    return ncols;
}

static void print_compare_table(json_t **cols, int ncols, json_t *rows)
{
    printf("%-30s", "median ms");
    for (int c = 0; c < ncols; c++) {
        char h[16];
        snprintf(h, sizeof h, "[%d]", c + 1);
        if (c == 0)
            printf(" %10s", h);
        else
            printf(" %10s %7s", h, "1/this");
    }
    printf("\n");
    size_t m;
    json_t *row;
    json_array_foreach(rows, m, row)
    {
        const char *spec = json_string_value(row);
        double base = lookup_median(cols[0], spec);
        printf("%-30s", spec);
        for (int c = 0; c < ncols; c++) {
            double v = c == 0 ? base : lookup_median(cols[c], spec);
            v > 0 ? printf(" %10.3f", v) : printf(" %10s", "-");
            if (c > 0)
                base > 0 && v > 0 ? printf(" %6.2fx", base / v) : printf(" %7s", "-");
        }
        printf("\n");
    }
}

/* Every run (device or peer) of every file is one column; rows are the item specs in order of
 * first appearance; ratios are column 1's median over each other column's (above 1: that
 * column is faster). */
int bench_compare(char **files, int nfiles)
{
    json_t **docs = calloc((size_t)nfiles, sizeof *docs);
    if (!docs)
        return EXIT_RUNTIME;
    int rc = load_docs(files, nfiles, docs);
    if (!rc) {
        json_t *cols[COMPARE_MAX_COLS];
        json_t *rows = json_array();
        int ncols = gather_columns(files, nfiles, docs, cols, rows);
        print_compare_table(cols, ncols, rows);
        json_decref(rows);
    }
    for (int i = 0; i < nfiles; i++)
        json_decref(docs[i]);
    free(docs);
    return rc;
}
