/* results.c — the results file of a stream (see results.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csv.h"
#include "results.h"

#define RESULTS_KEY "pagoda_results"
/* The largest results file --resume reads into memory (16 GiB). */
#define RESULTS_MAX_BYTES ((uint64_t)1 << 34)

/* The last component of a path, as the file's name is recorded (the directory may differ
 * between a run and its --resume). */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* {"file": name, "bytes": size, "sha256": hex} of a file, or NULL after printing the error. */
static json_t *file_identity(const char *path)
{
    char hex[65];
    uint64_t size = 0;
    pgd_error *err = NULL;
    if (pgd_file_sha256(path, hex, &size, &err)) {
        app_fail(err);
        return NULL;
    }
    return json_pack("{s:o, s:I, s:s}", "file", app_json_text(base_name(path)), "bytes",
                     (json_int_t)size, "sha256", hex);
}

json_t *results_identity(const classify_opts *o, const stream_model *m, pgd_preprocess preset,
                         int classes)
{
    json_t *weights = m->weights ? file_identity(m->weights)
                                 : json_pack("{s:s}", "random", m->random ? m->random : "");
    json_t *labels = !o->labels_path ? json_null() : file_identity(o->labels_path);
    char pre[64]; /* the decoding options change the pixels too */
    snprintf(pre, sizeof pre, "%s%s%s", app_preset_name(preset),
             o->fast_decode ? " fast-decode" : "", o->exif_rotate ? " exif-rotate" : "");
    if (!weights || !labels) {
        json_decref(weights);
        json_decref(labels);
        return NULL;
    }
    json_t *id = json_pack("{s:o, s:o, s:s, s:s, s:s, s:i, s:i, s:o}", "model",
                           app_json_text(m->label[0] ? m->label : o->cmd), "weights", weights,
                           "weights_dtype", app_weights_f16() ? "f16" : "f32", "precision",
                           app_precision(NULL), "preprocess", pre, "topk", o->topk, "classes",
                           classes, "labels", labels);
    if (!id)
        fprintf(stderr, "pagoda: error: out of host memory\n");
    return id;
}

/* The head of a file written anew: the identity line, and the CSV column names. */
static char *make_head(const json_t *identity, int csv, int columns)
{
    json_t *rec = json_pack("{s:O}", RESULTS_KEY, (json_t *)identity);
    char *line =
        rec ? json_dumps(csv ? identity : rec, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_SORT_KEYS)
            : NULL;
    json_decref(rec);
    if (!line)
        return NULL;
    size_t n = strlen(line) + 64 + (size_t)columns * 48;
    char *head = malloc(n);
    if (head && !csv)
        snprintf(head, n, "%s\n", line);
    if (head && csv) {
        int at = snprintf(head, n, "# " RESULTS_KEY " %s\nimage,source,error", line);
        for (int k = 1; k <= columns; k++)
            at += snprintf(head + at, n - (size_t)at, ",class_%d,label_%d,probability_%d", k, k, k);
        snprintf(head + at, n - (size_t)at, "\n");
    }
    free(line);
    return head;
}

/* Creates or opens path for writing, never through a link or into a FIFO, and takes its lock. */
static int open_locked(results_file *rf, const char *path)
{
    char shown[1024];
    pgd_error *err = NULL;
    if (pgd_outfile_check(path, &err))
        return app_fail(err);
    int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
    rf->fd = open(path, flags | O_CREAT | O_EXCL, 0666);
    int made = rf->fd >= 0; /* removable on failure only once locked (rf->created) */
    if (rf->fd < 0 && errno == EEXIST)
        rf->fd = open(path, flags);
    struct stat st;
    if (rf->fd < 0 || fstat(rf->fd, &st) != 0) {
        fprintf(stderr, "pagoda: error: %s: cannot write the output: %s\n",
                app_term_text(path, shown, sizeof shown), strerror(errno));
        return EXIT_RUNTIME;
    }
    if (!S_ISREG(st.st_mode)) { /* it changed since the check */
        fprintf(stderr, "pagoda: error: %s: the output must be absent or a regular file\n",
                app_term_text(path, shown, sizeof shown));
        return EXIT_RUNTIME;
    }
    if (flock(rf->fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS) {
            /* A file system without locks (some network ones): run, but say what is lost. */
            fprintf(stderr,
                    "pagoda: note: %s: the file system cannot lock it (%s): a second run "
                    "writing it at the same time would not be stopped\n",
                    app_term_text(path, shown, sizeof shown), strerror(e));
            return EXIT_OK; /* and never removed: another run may have opened it meanwhile */
        }
        if (e == EWOULDBLOCK)
            fprintf(stderr,
                    "pagoda: error: %s: another pagoda run is writing this output (it "
                    "holds its lock); wait for it to end or give another --output\n",
                    app_term_text(path, shown, sizeof shown));
        else
            fprintf(stderr, "pagoda: error: %s: cannot lock the output: %s\n",
                    app_term_text(path, shown, sizeof shown), strerror(e));
        return EXIT_RUNTIME;
    }
    rf->created = made;
    return EXIT_OK;
}

/* Reads the whole (locked) file through its descriptor into *text (NUL-terminated). */
static int read_all(results_file *rf, char **text, size_t *len)
{
    char shown[1024];
    struct stat st;
    *text = NULL, *len = 0;
    if (fstat(rf->fd, &st) != 0) {
        fprintf(stderr, "pagoda: error: --resume: %s: %s\n",
                app_term_text(rf->path, shown, sizeof shown), strerror(errno));
        return EXIT_RUNTIME;
    }
    if ((uint64_t)st.st_size > RESULTS_MAX_BYTES) {
        fprintf(stderr, "pagoda: error: --resume: %s: larger than the 16 GiB --resume reads\n",
                app_term_text(rf->path, shown, sizeof shown));
        return EXIT_RUNTIME;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = malloc(n + 1);
    if (!buf) {
        fprintf(stderr, "pagoda: error: out of host memory for %s\n", rf->path);
        return EXIT_RUNTIME;
    }
    while (got < n) {
        ssize_t r = pread(rf->fd, buf + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fprintf(stderr, "pagoda: error: --resume: %s: cannot read it: %s\n",
                    app_term_text(rf->path, shown, sizeof shown),
                    r < 0 ? strerror(errno) : "it shrank");
            free(buf);
            return EXIT_RUNTIME;
        }
        got += (size_t)r;
    }
    buf[n] = 0;
    *text = buf, *len = n;
    return EXIT_OK;
}

/* The keys of a and b whose values differ, comma-separated, into buf. */
static void differing_keys(const json_t *a, const json_t *b, char *buf, size_t size)
{
    const char *k;
    json_t *v;
    buf[0] = 0;
    json_object_foreach((json_t *)a, k, v)
    {
        if (!json_equal(v, json_object_get(b, k)))
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? ", " : "", k);
    }
    json_object_foreach((json_t *)b, k, v)
    {
        if (!json_object_get(a, k))
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? ", " : "", k);
    }
}

/* Checks the model record `line` (the JSON after "# pagoda_results " in CSV, the whole first
 * line in JSON lines) against this run's identity. */
static int check_identity(const results_file *rf, const char *line, const json_t *identity)
{
    char shown[1024];
    json_t *j = json_loads(line, 0, NULL);
    json_t *rec = rf->csv ? j : json_object_get(j, RESULTS_KEY);
    if (!json_is_object(rec)) {
        fprintf(stderr,
                "pagoda: error: --resume: %s does not begin with the record of the model "
                "that wrote it (written by an older pagoda, or not a pagoda results "
                "file): its results cannot be checked against this model; run without "
                "--resume to replace it, or give another --output\n",
                app_term_text(rf->path, shown, sizeof shown));
        json_decref(j);
        return EXIT_RUNTIME;
    }
    int rc = EXIT_OK;
    if (!json_equal(rec, (json_t *)identity)) {
        char keys[256];
        differing_keys(rec, identity, keys, sizeof keys);
        char *was = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
        char *now = json_dumps(identity, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
        fprintf(stderr,
                "pagoda: error: --resume: %s holds the results of another model or "
                "other options (they differ in %s): the file's %s, this run's %s; resume "
                "with the same model and options, or give another --output\n",
                app_term_text(rf->path, shown, sizeof shown), keys, was ? was : "?",
                now ? now : "?");
        free(was);
        free(now);
        rc = EXIT_RUNTIME;
    }
    json_decref(j);
    return rc;
}

/* The source as a line records it: the U+FFFD form of app_json_text. */
static char *source_text(const char *path)
{
    json_t *s = app_json_text(path);
    char *out = s ? strdup(json_string_value(s)) : NULL;
    json_decref(s);
    return out;
}

/* Marks result `idx` (the line's index and source) done, after checking it belongs to paths. */
static int mark(const results_file *rf, long idx, const char *src, const char *line, char **paths,
                int n, unsigned char *done, int *ndone)
{
    char shown[1024];
    char *want = idx >= 0 && idx < n ? source_text(paths[idx]) : NULL;
    int ok = want && src && !strcmp(src, want);
    free(want);
    if (!ok) {
        fprintf(stderr,
                "pagoda: error: --resume: %s: line \"%.60s\" is not a result of this "
                "input list (image %ld of %d)\n",
                app_term_text(rf->path, shown, sizeof shown), line, idx, n);
        return EXIT_RUNTIME;
    }
    if (!done[idx]) {
        done[idx] = 1;
        (*ndone)++;
    }
    return EXIT_OK;
}

/* JSON lines: the model record, then one result per line; an unfinished last line is cut. */
static int resume_jsonl(results_file *rf, char *text, size_t len, const json_t *identity,
                        char **paths, int n, unsigned char *done, int *ndone)
{
    size_t end = len;
    while (end && text[end - 1] != '\n')
        end--;
    rf->keep = (off_t)end;
    int rc = EXIT_OK;
    for (size_t pos = 0; pos < end && !rc;) {
        char *nl = memchr(text + pos, '\n', end - pos);
        *nl = 0;
        char *line = text + pos;
        int first = pos == 0;
        pos = (size_t)(nl - text) + 1;
        if (first) {
            rc = check_identity(rf, line, identity);
            continue;
        }
        json_t *j = json_loads(line, 0, NULL);
        json_t *ji = json_object_get(j, "image"), *js = json_object_get(j, "source");
        long idx = json_is_integer(ji) && json_is_string(js) ? (long)json_integer_value(ji) : -1;
        rc = mark(rf, idx, idx >= 0 ? json_string_value(js) : NULL, line, paths, n, done, ndone);
        json_decref(j);
    }
    return rc;
}

/* A CSV record that is not a result line of this run (wrong shape or not CSV). */
static int bad_record(const results_file *rf, size_t at, const char *why)
{
    char shown[1024];
    fprintf(stderr, "pagoda: error: --resume: %s: the record at byte %zu %s\n",
            app_term_text(rf->path, shown, sizeof shown), at, why);
    return EXIT_RUNTIME;
}

/* CSV: "# pagoda_results {...}", the column names, then one record per result (RFC 4180: a
 * quoted source may hold line ends); an unfinished last record is cut. */
static int resume_csv(results_file *rf, char *text, size_t len, const json_t *identity, int columns,
                      char **paths, int n, unsigned char *done, int *ndone)
{
    const char *tag = "# " RESULTS_KEY " ";
    char *nl = memchr(text, '\n', len);
    if (!nl)
        return EXIT_OK; /* not even the first line: nothing to keep */
    *nl = 0;
    if (strncmp(text, tag, strlen(tag)))
        return check_identity(rf, "", identity);
    int rc = check_identity(rf, text + strlen(tag), identity);
    size_t pos = (size_t)(nl - text) + 1;
    /* kept from the column names on: a file cut before them is written anew, head and all */
    for (long rec = 0; !rc; rec++) {
        char **f = NULL;
        int nf = 0;
        size_t at = pos;
        int got = csv_record(text, len, &pos, &f, &nf);
        if (got <= 0) {
            rc = got < 0 ? bad_record(rf, at, "is not CSV (RFC 4180)") : EXIT_OK;
            break;
        }
        rf->keep = (off_t)pos;
        char *end = NULL;
        long idx = nf > 0 ? strtol(f[0], &end, 10) : -1;
        if (nf != 3 + 3 * columns)
            rc = bad_record(rf, at, "has another number of fields than this run writes (--topk?)");
        else if (rec == 0 && strcmp(f[0], "image"))
            rc = bad_record(rf, at, "is not the column names");
        else if (rec > 0 && (end == f[0] || *end))
            rc = bad_record(rf, at, "does not begin with an image number");
        else if (rec > 0)
            rc = mark(rf, idx, f[1], f[1], paths, n, done, ndone);
        csv_record_free(f, nf);
    }
    return rc;
}

int results_open(results_file *rf, const char *path, int csv, int resume, const json_t *identity,
                 int columns, char **paths, int n, unsigned char *done, int *ndone)
{
    memset(rf, 0, sizeof *rf);
    rf->fd = -1;
    rf->path = path;
    rf->csv = csv;
    *ndone = 0;
    int rc = open_locked(rf, path);
    if (!rc && !(rf->head = make_head(identity, csv, columns))) {
        fprintf(stderr, "pagoda: error: out of host memory\n");
        rc = EXIT_RUNTIME;
    }
    char *text = NULL;
    size_t len = 0;
    if (!rc && resume)
        rc = read_all(rf, &text, &len);
    if (!rc && resume)
        rc = csv ? resume_csv(rf, text, len, identity, columns, paths, n, done, ndone)
                 : resume_jsonl(rf, text, len, identity, paths, n, done, ndone);
    free(text);
    if (rc)
        results_close(rf, 0, rc);
    return rc;
}

/* Makes the file this run's: cut to the resumed lines, or emptied and given its head. */
static int start(results_file *rf)
{
    if (rf->started)
        return EXIT_OK;
    int bad = ftruncate(rf->fd, rf->keep) != 0 || lseek(rf->fd, 0, SEEK_END) < 0;
    rf->started = 1;
    if (!bad && rf->keep == 0)
        return results_write(rf, rf->head, strlen(rf->head));
    if (bad) {
        char shown[1024];
        fprintf(stderr, "pagoda: error: %s: cannot write the output: %s\n",
                app_term_text(rf->path, shown, sizeof shown), strerror(errno));
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

int results_write(results_file *rf, const char *text, size_t n)
{
    int rc = start(rf);
    for (size_t done = 0; !rc && done < n;) {
        ssize_t w = write(rf->fd, text + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            char shown[1024];
            fprintf(stderr, "pagoda: error: %s: writing the results: %s\n",
                    app_term_text(rf->path, shown, sizeof shown),
                    w < 0 ? strerror(errno) : "nothing written");
            rc = EXIT_RUNTIME;
        } else {
            done += (size_t)w;
        }
    }
    return rc;
}

int results_close(results_file *rf, int success, int rc)
{
    if (rf->fd >= 0) {
        if (success && !rf->started && start(rf))
            rc = rc ? rc : EXIT_RUNTIME;
        /* Removed while still locked: no other run can have begun writing it meanwhile. */
        if (!rf->started && rf->created)
            unlink(rf->path);
        if (close(rf->fd) != 0 && !rc) {
            char shown[1024];
            fprintf(stderr, "pagoda: error: closing %s: %s\n",
                    app_term_text(rf->path, shown, sizeof shown), strerror(errno));
            rc = EXIT_RUNTIME;
        }
    }
    free(rf->head);
    rf->head = NULL;
    rf->fd = -1;
    return rc;
}
