/* hub.c — pgd_hub_file: one file of a Hugging Face hub model repository into the cache that
 * huggingface_hub, timm and transformers share.
 *
 * The protocol is the hub's: HEAD <endpoint>/<repo>/resolve/<revision>/<file> without following
 * redirects answers with X-Repo-Commit (the commit the revision names now), X-Linked-Etag (an
 * LFS file's SHA-256) or ETag (a small file's git blob id) and X-Linked-Size; an LFS file's
 * answer is a redirect to a CDN, which the GET then follows. The layout is huggingface_hub's:
 *
 *     <cache>/models--ORG--NAME/blobs/<etag>                  the bytes, once per version
 *     <cache>/models--ORG--NAME/snapshots/<commit>/<file>     -> ../../blobs/<etag> (relative)
 *     <cache>/models--ORG--NAME/refs/<revision>               the commit, no newline
 *
 * A download goes into blobs/<etag>.incomplete under an flock (two pulls of one file wait for
 * each other rather than write one file together), resumes with Range from the bytes already
 * there, is checked (size; SHA-256 when the etag is one) and only then renamed to blobs/<etag>,
 * so a blob is complete or absent. What the server says is checked before it becomes a path:
 * a commit or etag with anything but [A-Za-z0-9._-] is refused, so a hostile endpoint cannot
 * write outside the cache. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "../core/internal.h"
#include "http.h"

#define PATH_CAP 4096

/* ---- names --------------------------------------------------------------------------------- */

static int name_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
}

/* [A-Za-z0-9._-]+, not "." or "..": safe as one path component (a commit, an etag). */
static int safe_component(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || !strcmp(s, ".") || !strcmp(s, ".."))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char((unsigned char)s[i]))
            return 0;
    return 1;
}

/* Components joined by '/', each safe_component (a revision such as refs/pr/1 has slashes). */
static int safe_path(const char *s, size_t max)
{
    char part[256];
    size_t n = strlen(s);
    if (n == 0 || n > max || s[0] == '/' || s[n - 1] == '/')
        return 0;
    for (const char *p = s; *p;) {
        size_t k = strcspn(p, "/");
        if (k == 0 || k >= sizeof part)
            return 0;
        memcpy(part, p, k);
        part[k] = 0;
        if (!safe_component(part, sizeof part))
            return 0;
        p += k + (p[k] == '/');
    }
    return 1;
}

/* A file in a repository: relative, no "." or ".." component, printable ASCII without a
 * backslash (one name on every system). */
static int safe_file(const char *s)
{
    for (const char *p = s; *p; p++)
        if (*p < 0x21 || *p > 0x7e || *p == '\\')
            return 0;
    size_t n = strlen(s);
    if (n == 0 || n > 1024 || s[0] == '/' || s[n - 1] == '/' || strstr(s, "//"))
        return 0;
    for (const char *p = s; *p;) {
        size_t k = strcspn(p, "/");
        if ((k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        p += k + (p[k] == '/');
    }
    return 1;
}

/* ORG/NAME or NAME, as the hub allows: [A-Za-z0-9._-], no "--" or ".." inside, at most 96
 * characters a part, neither starting nor ending with '-' or '.'. */
static int valid_repo(const char *repo)
{
    const char *slash = strchr(repo, '/');
    if (!*repo || (slash && strchr(slash + 1, '/')))
        return 0;
    for (const char *p = repo; p && *p;) {
        size_t k = slash && p == repo ? (size_t)(slash - repo) : strlen(p);
        if (k == 0 || k > 96 || p[0] == '-' || p[0] == '.' || p[k - 1] == '-' || p[k - 1] == '.')
            return 0;
        for (size_t i = 0; i < k; i++)
            if (!name_char((unsigned char)p[i]) ||
                (i && (p[i] == '-' || p[i] == '.') && p[i - 1] == p[i]))
                return 0;
        p = slash && p == repo ? slash + 1 : NULL;
    }
    return 1;
}

static int is_commit(const char *s)
{
    if (strlen(s) != 40)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

static int is_sha256(const char *s)
{
    if (strlen(s) != 64)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

/* Percent-encodes s into out (keeping '/' when keep_slash): revision "refs/pr/1" is one URL
 * segment (refs%2Fpr%2F1), a file in a folder keeps its slashes. */
static int url_encode(const char *s, int keep_slash, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t j = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (j + 4 > size)
            return -1;
        if (name_char(*p) || *p == '~' || (keep_slash && *p == '/'))
            out[j++] = (char)*p;
        else
            out[j++] = '%', out[j++] = hex[*p >> 4], out[j++] = hex[*p & 15];
    }
    out[j] = 0;
    return 0;
}

/* ---- the request ----------------------------------------------------------------------------- */

typedef struct hub_req {
    const pgd_hub_options *o;
    const char *repo, *rev, *file;
    char storage[PATH_CAP]; /* <cache>/models--ORG--NAME */
    char url[PATH_CAP];
    double timeout_s;
    int max_tries;
} hub_req;

static int fmt(char *buf, size_t size, const char *f, ...) PGD__PRINTF(3, 4);
static int fmt(char *buf, size_t size, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, size, f, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

static int setup(hub_req *r, pgd_error **err)
{
    const pgd_hub_options *o = r->o;
    char home[PATH_CAP], cache[PATH_CAP], rev[512], file[3 * 1024 + 1];
    const char *endpoint = o->endpoint ? o->endpoint : "https://huggingface.co";
    int bad = 0;
    if (o->cache_dir)
        bad = fmt(cache, sizeof cache, "%s", o->cache_dir);
    else if (o->hf_home)
        bad = fmt(cache, sizeof cache, "%s/hub", o->hf_home);
    else if (!pgd__hub_default_home(home, sizeof home))
        bad = fmt(cache, sizeof cache, "%s/hub", home);
    else
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "no hub cache: set HF_HUB_CACHE or HF_HOME (HOME is not set)");
    /* models--ORG--NAME: the repository's one slash becomes "--" (valid_repo allows one) */
    const char *slash = strchr(r->repo, '/');
    int org = slash ? (int)(slash - r->repo) : (int)strlen(r->repo);
    if (bad ||
        fmt(r->storage, sizeof r->storage, "%s/models--%.*s%s%s", cache, org, r->repo,
            slash ? "--" : "", slash ? slash + 1 : "") ||
        url_encode(r->rev, 0, rev, sizeof rev) || url_encode(r->file, 1, file, sizeof file) ||
        fmt(r->url, sizeof r->url, "%s%s%s/resolve/%s/%s", endpoint,
            endpoint[0] && endpoint[strlen(endpoint) - 1] == '/' ? "" : "/", r->repo, rev, file))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: the cache path or URL of '%s' "
                              "is too long",
                              r->repo, r->file);
    r->timeout_s = o->timeout_s > 0 ? o->timeout_s : 10;
    r->max_tries = o->max_tries > 0 ? o->max_tries : 5;
    return PGD_OK;
}

/* ---- the cache ----------------------------------------------------------------------------- */

/* mkdir -p of the directory part of path (everything before the last '/'). */
static int make_parents(const char *path, pgd_error **err)
{
    char dir[PATH_CAP];
    fmt(dir, sizeof dir, "%s", path);
    char *last = strrchr(dir, '/');
    if (!last)
        return PGD_OK;
    *last = 0;
    for (char *p = dir + 1;; p++) {
        char c = *p;
        if (c != '/' && c != 0)
            continue;
        *p = 0;
        if (mkdir(dir, 0777) && errno != EEXIST)
            return pgd__error_set(err, PGD_ERR_IO, "cannot make the cache folder %s: %s", dir,
                                  strerror(errno));
        *p = c;
        if (!c)
            return PGD_OK;
    }
}

/* The commit a revision names in the cache: itself when it is one, else refs/<revision>. */
static int cached_commit(const hub_req *r, char commit[72])
{
    if (is_commit(r->rev)) {
        fmt(commit, 72, "%s", r->rev);
        return 0;
    }
    char ref[PATH_CAP];
    if (fmt(ref, sizeof ref, "%s/refs/%s", r->storage, r->rev))
        return -1;
    void *text = NULL; /* through pgd_file_read: a FIFO planted there cannot hang us */
    size_t n = 0;
    if (pgd_file_read(ref, 71, &text, &n, NULL))
        return -1;
    fmt(commit, 72, "%s", (const char *)text);
    free(text);
    commit[strcspn(commit, "\r\n")] = 0;
    return safe_component(commit, 64) ? 0 : -1;
}

/* The snapshot path of the file for `commit`; 0 when it is there (the link resolves). */
static int cached_pointer(const hub_req *r, const char *commit, char *path, size_t size)
{
    struct stat st;
    if (fmt(path, size, "%s/snapshots/%s/%s", r->storage, commit, r->file))
        return -1;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? 0 : -1;
}

static int from_cache(const hub_req *r, char **path)
{
    char commit[72], p[PATH_CAP];
    if (cached_commit(r, commit) || cached_pointer(r, commit, p, sizeof p))
        return -1;
    *path = strdup(p);
    return *path ? 0 : -1;
}

/* snapshots/<commit>/<file> -> ../../blobs/<etag> (one more ../ per folder of the file),
 * replacing an older link atomically. */
static int link_pointer(const hub_req *r, const char *commit, const char *etag, char *path,
                        size_t size, pgd_error **err)
{
    char target[PATH_CAP] = "", tmp[PATH_CAP];
    size_t up = 2;
    for (const char *p = r->file; *p; p++)
        up += *p == '/';
    for (size_t i = 0; i < up; i++)
        strcat(target, "../");
    if (fmt(target + strlen(target), sizeof target - strlen(target), "blobs/%s", etag) ||
        fmt(path, size, "%s/snapshots/%s/%s", r->storage, commit, r->file) ||
        fmt(tmp, sizeof tmp, "%s.%ld.tmp-link", path, (long)getpid()))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "the cache path of %s is too long",
                              r->file);
    int rc = make_parents(path, err);
    if (rc)
        return rc;
    unlink(tmp);
    if (symlink(target, tmp) || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return pgd__error_set(err, PGD_ERR_IO, "cannot link %s to the blob: %s", path, strerror(e));
    }
    return PGD_OK;
}

/* refs/<revision> = commit, unless the revision is that commit. */
static int write_ref(const hub_req *r, const char *commit, pgd_error **err)
{
    char ref[PATH_CAP], have[72];
    if (!strcmp(r->rev, commit) || (!cached_commit(r, have) && !strcmp(have, commit)))
        return PGD_OK;
    if (fmt(ref, sizeof ref, "%s/refs/%s", r->storage, r->rev))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "the ref path of %s is too long",
                              r->rev);
    int rc = make_parents(ref, err);
    return rc ? rc : pgd_file_write_atomic(ref, commit, strlen(commit), err);
}

/* ---- talking to the hub -------------------------------------------------------------------- */

/* Hands an error made for a retry decision to the caller (err may be NULL). */
static void pass_error(pgd_error **err, pgd_error *e)
{
    if (err && !*err)
        *err = e;
    else
        pgd_error_destroy(e);
}

static void pause_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static int retryable(long status)
{
    return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

/* The wait before try `n` (1, 2, ...): Retry-After when the server gave one (at most a
 * minute), else 0.5 s doubling up to 8 s. */
static double backoff(const pgd__http_res *res, int n)
{
    if (res->h.retry_after >= 0)
        return res->h.retry_after < 60 ? res->h.retry_after : 60;
    double s = 0.5;
    for (int i = 1; i < n && s < 8; i++)
        s *= 2;
    return s;
}

/* The message for an HTTP error status, naming what was asked. */
static int http_error(const hub_req *r, const pgd__http_res *res, pgd_error **err)
{
    long st = res->h.status;
    const char *code = res->h.error_code, *rev = r->rev;
    if (st == 401 || st == 403) {
        int gated = !strcmp(code, "GatedRepo") || st == 403;
        return pgd__error_set(
            err, PGD_ERR_IO,
            "%s: HTTP %ld for '%s' at revision '%s': the repository is %s; "
            "set HF_TOKEN to a token (huggingface.co/settings/tokens) of an "
            "account %s%s%s%s",
            r->repo, st, r->file, rev, gated ? "gated or private" : "private, gated or missing",
            gated ? "that accepted its conditions on the model page" : "that may read it",
            r->o->token ? " (the HF_TOKEN given was refused)" : "",
            res->h.error_message[0] ? ". The hub says: " : "", res->h.error_message);
    }
    if (st == 404) {
        if (!strcmp(code, "RepoNotFound"))
            return pgd__error_set(err, PGD_ERR_NOT_FOUND,
                                  "%s: no such model repository on %s (or it is private: set "
                                  "HF_TOKEN)",
                                  r->repo,
                                  r->o->endpoint ? r->o->endpoint : "https://huggingface.co");
        if (!strcmp(code, "RevisionNotFound"))
            return pgd__error_set(err, PGD_ERR_NOT_FOUND,
                                  "%s: no revision '%s' (a branch, tag or commit)", r->repo, rev);
        return pgd__error_set(err, PGD_ERR_NOT_FOUND, "%s: no file '%s' at revision '%s'", r->repo,
                              r->file, rev);
    }
    return pgd__error_set(err, PGD_ERR_IO, "%s: HTTP %ld for '%s' at revision '%s' (%s)%s%s",
                          r->repo, st, r->file, rev, r->url, res->h.error_message[0] ? ": " : "",
                          res->h.error_message);
}

/* HEAD, retried on 429/5xx and (unless `cached`: the cache then answers at once, as
 * huggingface_hub falls back) on timeouts and dropped connections, following relative
 * redirects only (a renamed repository) so that an LFS file's metadata is read from the hub's
 * own answer. */
static int head(hub_req *r, int cached, pgd__http_res *res, pgd_error **err)
{
    char url[PATH_CAP];
    fmt(url, sizeof url, "%s", r->url);
    for (int tries = 1, hops = 0;; tries++) {
        pgd__http_req rq = {url, r->o->token, 1, 0, r->timeout_s, -1, 0, r->file, 0, r->o};
        pgd_error *e = NULL;
        int rc = pgd__http_request(&rq, res, &e);
        int again = rc ? res->transient && !cached : retryable(res->h.status);
        if (again && tries < r->max_tries) {
            pgd_error_destroy(e);
            pause_s(backoff(res, tries));
            continue;
        }
        if (rc) {
            pass_error(err, e);
            return rc;
        }
        long st = res->h.status;
        if (st >= 300 && st < 400 && res->h.location[0] == '/' && res->h.location[1] != '/' &&
            !res->h.commit[0] && hops++ < 5) {
            const char *p = strstr(url, "://");
            p = p ? strchr(p + 3, '/') : NULL;
            char next[PATH_CAP];
            if (!p || fmt(next, sizeof next, "%.*s%s", (int)(p - url), url, res->h.location))
                return pgd__error_set(err, PGD_ERR_IO, "%s: a redirect too long", url);
            fmt(url, sizeof url, "%s", next);
            tries = 0;
            continue;
        }
        return st >= 400 ? http_error(r, res, err) : PGD_OK;
    }
}

/* ---- the download -------------------------------------------------------------------------- */

static int no_space(int e)
{
    return e == ENOSPC || e == EFBIG
#ifdef EDQUOT
           || e == EDQUOT
#endif
        ;
}

/* Refuses a download the file system cannot hold, before a byte is fetched. */
static int check_space(const hub_req *r, const char *dir_of, uint64_t need, pgd_error **err)
{
    char dir[PATH_CAP];
    struct statvfs fs;
    fmt(dir, sizeof dir, "%s", dir_of);
    char *last = strrchr(dir, '/');
    if (last)
        *last = 0;
    if (statvfs(dir, &fs) || (uint64_t)fs.f_bavail * fs.f_frsize >= need)
        return PGD_OK;
    return pgd__error_set(
        err, PGD_ERR_IO, "%s: disk full: '%s' needs %.1f MB more in %s, which has %.1f MB free",
        r->repo, r->file, (double)need / 1e6, dir, (double)fs.f_bavail * (double)fs.f_frsize / 1e6);
}

/* The GETs of one file into fd from the bytes it holds, retried; *have ends as its size. */
static int get_body(hub_req *r, int fd, int64_t size, const char *inc, uint64_t *have,
                    pgd_error **err)
{
    for (int tries = 1;; tries++) {
        if (size >= 0 && *have == (uint64_t)size)
            return PGD_OK;
        pgd__http_req rq = {r->url, r->o->token,  0,
                            1,      r->timeout_s, fd,
                            *have,  r->file,      size > 0 ? (uint64_t)size : 0,
                            r->o};
        pgd__http_res res;
        pgd_error *e = NULL;
        int rc = pgd__http_request(&rq, &res, &e);
        struct stat st;
        *have = fstat(fd, &st) ? 0 : (uint64_t)st.st_size;
        if (rc && no_space(res.write_errno)) {
            pgd_error_destroy(e);
            return pgd__error_set(err, PGD_ERR_IO,
                                  "disk full writing %s (%s): the %" PRIu64 " bytes written are "
                                  "kept; run the pull again to resume once there is space",
                                  inc, strerror(res.write_errno), *have);
        }
        long st_code = res.h.status;
        if (!rc && st_code == 416 && *have > 0)
            return PGD_OK; /* nothing past what we hold: the check below judges it */
        int again = rc ? res.transient : retryable(st_code);
        if (again && tries < r->max_tries) {
            pgd_error_destroy(e);
            pause_s(backoff(&res, tries));
            continue;
        }
        if (rc && res.transient && *have) { /* tries spent: what arrived stays for the next */
            rc = pgd__error_set(err, rc,
                                "%s; the %" PRIu64 " bytes of '%s' received are kept: "
                                "run the pull again to resume",
                                pgd_error_get_message(e), *have, r->file);
            pgd_error_destroy(e);
            return rc;
        }
        if (rc) {
            pass_error(err, e);
            return rc;
        }
        if (st_code >= 400)
            return http_error(r, &res, err);
        if (st_code != 200 && st_code != 206)
            return pgd__error_set(err, PGD_ERR_IO, "%s: HTTP %ld for '%s' (%s): not the file",
                                  r->repo, st_code, r->file, r->url);
        if (size < 0)
            return PGD_OK; /* no length known: one complete answer is the file */
        if (*have < (uint64_t)size && tries >= r->max_tries) /* short answers, each "complete" */
            return pgd__error_set(err, PGD_ERR_IO,
                                  "%s: '%s': %" PRIu64 " of %" PRId64 " bytes after %d tries "
                                  "(%s); run the pull again to resume",
                                  r->repo, r->file, *have, size, tries, r->url);
    }
}

/* Checks the finished download against the hub's size and SHA-256; removes it when wrong. */
static int verify(const hub_req *r, const char *inc, const char *etag, int64_t size, uint64_t have,
                  pgd_error **err)
{
    char hex[65];
    if (size >= 0 && have != (uint64_t)size) {
        unlink(inc);
        return pgd__error_set(err, PGD_ERR_FORMAT,
                              "%s: '%s' arrived with %" PRIu64 " bytes, the hub says %" PRId64
                              "; the download was removed (run the pull again)",
                              r->repo, r->file, have, size);
    }
    if (!is_sha256(etag))
        return PGD_OK; /* a small file's git blob id: the size is the check */
    int rc = pgd_file_sha256(inc, hex, NULL, err);
    if (rc)
        return rc;
    if (strcmp(hex, etag)) {
        unlink(inc);
        return pgd__error_set(err, PGD_ERR_FORMAT,
                              "%s: checksum mismatch for '%s': its SHA-256 is %s, the hub says "
                              "%s; the download was removed (run the pull again; if it repeats, "
                              "a mirror or proxy alters the file)",
                              r->repo, r->file, hex, etag);
    }
    return PGD_OK;
}

/* blobs/<etag> from blobs/<etag>.incomplete: locked, resumed, checked, renamed. */
static int fetch_blob(hub_req *r, const char *blob, const char *etag, int64_t size, pgd_error **err)
{
    char inc[PATH_CAP];
    if (fmt(inc, sizeof inc, "%s.incomplete", blob))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: path too long", blob);
    int rc = make_parents(blob, err);
    if (rc)
        return rc;
    int fd = open(inc, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return pgd__error_set(err, PGD_ERR_IO, "cannot open %s: %s", inc, strerror(errno));
    struct stat st, bs;
    if (flock(fd, LOCK_EX) || fstat(fd, &st)) {
        rc = pgd__error_set(err, PGD_ERR_IO, "cannot lock %s: %s", inc, strerror(errno));
    } else if (stat(blob, &bs) == 0) { /* another pull finished it while we waited */
        if (bs.st_ino != st.st_ino)
            unlink(inc);
    } else {
        uint64_t have = (uint64_t)st.st_size;
        if (size >= 0 && have > (uint64_t)size && !ftruncate(fd, 0))
            have = 0; /* longer than the file: not a prefix of it */
        rc = check_space(r, inc, size > 0 ? (uint64_t)size - have : 0, err);
        if (!rc)
            rc = get_body(r, fd, size, inc, &have, err);
        if (!rc)
            rc = verify(r, inc, etag, size, have, err);
        if (!rc && (fsync(fd) || rename(inc, blob)))
            rc = pgd__error_set(err, PGD_ERR_IO, "cannot move %s into place: %s", inc,
                                strerror(errno));
    }
    close(fd);
    return rc;
}

/* ---- the entry point ----------------------------------------------------------------------- */

static int check_args(const char *repo, const char *rev, const char *file, char **path,
                      pgd_error **err)
{
    if (!path)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_hub_file: path is NULL");
    *path = NULL;
    if (!repo || !valid_repo(repo))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "'%s' is not a hub repository name: ORG/NAME or NAME, of letters, "
                              "digits, '-', '_' and '.' (no '--' or '..', not starting or "
                              "ending with '-' or '.')",
                              repo ? repo : "(null)");
    if (rev && !safe_path(rev, 255))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "'%s' is not a revision: a branch, tag or commit of letters, "
                              "digits, '-', '_', '.' and '/'",
                              rev);
    if (!file || !safe_file(file))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "'%s' is not a file of a repository: a relative path of printable "
                              "characters without '.' or '..' parts",
                              file ? file : "(null)");
    return PGD_OK;
}

/* The hub's answer made into the cache's names, or an error saying what is missing. */
static int answer_names(const hub_req *r, const pgd__http_res *res, pgd_error **err)
{
    const char *endpoint = r->o->endpoint ? r->o->endpoint : "https://huggingface.co";
    if (!res->h.commit[0] || !res->h.etag[0])
        return pgd__error_set(
            err, PGD_ERR_FORMAT, "%s: the answer for '%s' lacks %s: is %s a Hugging Face hub?",
            r->repo, r->file, res->h.commit[0] ? "an ETag" : "X-Repo-Commit", endpoint);
    if (!safe_component(res->h.commit, 64) || !safe_component(res->h.etag, 128) || res->h.too_long)
        return pgd__error_set(err, PGD_ERR_FORMAT,
                              "%s: the hub's commit '%.64s' or etag '%.128s' for '%s' is not a "
                              "plain name; refused as a cache path",
                              r->repo, res->h.commit, res->h.etag, r->file);
    return PGD_OK;
}

pgd_status pgd_hub_file(const pgd_hub_options *o, const char *repo, const char *revision,
                        const char *file, unsigned flags, char **path, int *how, pgd_error **err)
{
    static const pgd_hub_options defaults;
    int rc = check_args(repo, revision, file, path, err);
    if (rc)
        return rc;
    hub_req r = {
        .o = o ? o : &defaults, .repo = repo, .rev = revision ? revision : "main", .file = file};
    if ((rc = setup(&r, err)))
        return rc;
    if (how)
        *how = PGD_HUB_CACHE_ONLY;
    /* A build without libcurl reads the cache as offline mode does. */
    int offline = r.o->offline || !pgd__http_available();
    if ((offline || (flags & PGD_HUB_CACHE_FIRST)) && !from_cache(&r, path))
        return PGD_OK;
    if (!pgd__http_available())
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "%s: '%s' at revision '%s' is not in the cache %s, and this Pagoda "
                              "was built without libcurl, so it cannot download (install "
                              "libcurl4-openssl-dev and rebuild)",
                              repo, file, r.rev, r.storage);
    if (offline)
        return pgd__error_set(err, PGD_ERR_NOT_FOUND,
                              "%s: '%s' at revision '%s' is not in the cache %s, and "
                              "HF_HUB_OFFLINE is set (pull it with the network first)",
                              repo, file, r.rev, r.storage);
    pgd__http_res res;
    pgd_error *e = NULL;
    char *cached = NULL;
    int have_cache = !from_cache(&r, &cached);
    free(cached);
    rc = head(&r, have_cache, &res, &e);
    if (rc && res.h.status == 0 && !from_cache(&r, path)) {
        if (how)
            *how = PGD_HUB_UNREACHABLE;
        pgd_error_destroy(e);
        return PGD_OK;
    }
    if (rc) {
        pass_error(err, e);
        return rc;
    }
    if ((rc = answer_names(&r, &res, err)))
        return rc;
    char blob[PATH_CAP], p[PATH_CAP];
    struct stat st;
    if (fmt(blob, sizeof blob, "%s/blobs/%s", r.storage, res.h.etag))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: path too long", r.storage);
    int have = stat(blob, &st) == 0 && S_ISREG(st.st_mode);
    if (!have && (rc = fetch_blob(&r, blob, res.h.etag, res.h.size, err)))
        return rc;
    if ((rc = link_pointer(&r, res.h.commit, res.h.etag, p, sizeof p, err)) ||
        (rc = write_ref(&r, res.h.commit, err)))
        return rc;
    if (how)
        *how = have ? PGD_HUB_CACHED : PGD_HUB_DOWNLOADED;
    *path = strdup(p);
    return *path ? PGD_OK : pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of memory");
}
