/* outset.c — the output set of a run (see outset.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "outset.h"

static const char *kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISLNK(m)  ? "a symbolic link"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

int outset_check_given(const char *option, const char *given)
{
    struct stat st;
    if (!given || lstat(given, &st) != 0 || S_ISREG(st.st_mode))
        return EXIT_OK;
    char shown[1024];
    fprintf(stderr, "pagoda: error: %s %s: it is %s, and %s writes files named after it: %s\n",
            option, app_term_text(given, shown, sizeof shown), kind(st.st_mode), option,
            S_ISDIR(st.st_mode) ? "give a file name (inside the directory, if you mean it)"
                                : "give a file name, or leave the option out to discard "
                                  "that output");
    return EXIT_RUNTIME;
}

/* The resolved name of path: realpath of its directory, "/", its last component. */
static char *resolved(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    size_t dn = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    if (dn >= sizeof dir)
        return NULL;
    memcpy(dir, slash ? path : ".", dn);
    dir[dn] = 0;
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return NULL;
    const char *base = slash ? slash + 1 : path;
    size_t n = strlen(real) + strlen(base) + 2;
    char *key = malloc(n);
    if (key)
        snprintf(key, n, "%s/%s", real, base);
    return key;
}

/* The claim of `path` by `option` that was not staged yet, or NULL. */
static outset_item *claimed(outset *s, const char *option, const char *path)
{
    for (int i = 0; i < s->n; i++)
        if (!s->items[i].file && !strcmp(s->items[i].path, path) &&
            !strcmp(s->items[i].option, option))
            return &s->items[i];
    return NULL;
}

/* The claim that names the same file as `it`, or NULL. */
static const outset_item *same_file(const outset *s, const outset_item *it)
{
    for (int i = 0; i < s->n; i++) {
        const outset_item *o = &s->items[i];
        if (!strcmp(o->key, it->key) ||
            (o->exists && it->exists && o->dev == it->dev && o->ino == it->ino))
            return o;
    }
    return NULL;
}

/* outset_claim without printing: the error in *err. */
static int claim(outset *s, const char *option, const char *path, pgd_error **err)
{
    char shown[2][1024];
    pgd_error *why = NULL;
    if (pgd_outfile_check(path, &why)) {
        int code = pgd_error_get_code(why);
        snprintf(shown[0], sizeof shown[0], "%s", pgd_error_get_message(why));
        pgd_error_destroy(why);
        return pgd_error_set(err, code, "%s: %s", option, shown[0]);
    }
    outset_item it = {0};
    struct stat st;
    it.exists = stat(path, &st) == 0;
    it.dev = it.exists ? st.st_dev : 0, it.ino = it.exists ? st.st_ino : 0;
    if (!(it.key = resolved(path)))
        return pgd_error_set(err, PGD_ERR_IO, "%s %s: cannot resolve its directory: %s", option,
                             path, strerror(errno));
    const outset_item *dup = same_file(s, &it);
    if (dup) {
        free(it.key);
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "%s %s and %s %s name the same file: one output would replace the "
                             "other; give each its own file",
                             dup->option, dup->path, option, path);
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        outset_item *items = realloc(s->items, (size_t)cap * sizeof *items);
        if (!items)
            return free(it.key), pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s", path);
        s->items = items, s->cap = cap;
    }
    it.path = strdup(path);
    it.option = strdup(option);
    if (!it.path || !it.option) {
        free(it.path), free(it.option), free(it.key);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s", path);
    }
    s->items[s->n++] = it;
    return PGD_OK;
}

int outset_claim(outset *s, const char *option, const char *path)
{
    pgd_error *err = NULL;
    int rc = claim(s, option, path, &err);
    /* Two options naming one file: a command line that cannot work, as a usage error. */
    return !rc                              ? EXIT_OK
           : rc == PGD_ERR_INVALID_ARGUMENT ? (app_fail(err), EXIT_USAGE)
                                            : app_fail(err);
}

int outset_stage(outset *s, const char *option, const char *path, const char *note, pgd_outfile **f,
                 pgd_error **err)
{
    *f = NULL;
    outset_item *it = claimed(s, option, path);
    if (!it) {
        int rc = claim(s, option, path, err);
        if (rc)
            return rc;
        it = &s->items[s->n - 1];
    }
    if (note && !(it->note = strdup(note)))
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s", path);
    int rc = pgd_outfile_open(path, f, err);
    it->file = *f;
    return rc;
}

int outset_open(outset *s, const char *option, const char *path, const char *note, pgd_outfile **f)
{
    pgd_error *err = NULL;
    return outset_stage(s, option, path, note, f, &err) ? app_fail(err) : EXIT_OK;
}

int outset_staged(outset *s, pgd_outfile *f, int write_rc, pgd_error *err)
{
    (void)s;
    if (!write_rc)
        write_rc = pgd_outfile_close(f, &err);
    return write_rc ? app_fail(err) : EXIT_OK;
}

int outset_commit(outset *s, int quiet)
{
    pgd_error *err = NULL;
    for (int i = 0; i < s->n; i++)
        if (s->items[i].file && pgd_outfile_close(s->items[i].file, &err))
            return app_fail(err);
    int rc = EXIT_OK, written = 0;
    for (int i = 0; i < s->n; i++) {
        outset_item *it = &s->items[i];
        pgd_outfile *f = it->file;
        it->file = NULL;
        if (!f)
            continue; /* claimed, never written (a map for an image without detections) */
        if (rc) {
            pgd_outfile_abort(f);
            continue;
        }
        if (pgd_outfile_commit(f, &err)) {
            rc = app_fail(err);
            if (written)
                fprintf(stderr, "pagoda: note: %d output(s) had been written before it\n", written);
        } else if (it->note && !quiet) {
            char shown[2][1024];
            fprintf(stderr, "pagoda: %s written to %s\n",
                    app_term_text(it->note, shown[0], sizeof shown[0]),
                    app_term_text(it->path, shown[1], sizeof shown[1]));
        }
        written += !rc;
    }
    outset_free(s);
    return rc;
}

void outset_free(outset *s)
{
    for (int i = 0; i < s->n; i++) {
        pgd_outfile_abort(s->items[i].file);
        free(s->items[i].path);
        free(s->items[i].option);
        free(s->items[i].key);
        free(s->items[i].note);
    }
    free(s->items);
    memset(s, 0, sizeof *s);
}
