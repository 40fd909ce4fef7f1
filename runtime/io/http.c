/* http.c — the one place Pagoda touches the network: HTTP(S) requests for pgd_hub_file
 * (hub.c) through libcurl, and the parser of the response headers the hub protocol reads.
 *
 * libcurl does the transport (TLS with the system's CA store, proxies from the usual
 * variables, redirects); we parse the headers ourselves because the hub's metadata (commit,
 * linked etag and size) rides on the redirect response, before libcurl would follow it. A
 * Bearer token goes through libcurl's own option, which it never sends to another host
 * after a redirect, so a token for the hub does not reach the CDN. Without libcurl the
 * parser stays (the fuzzer and tests use it) and requests fail with PGD_ERR_UNSUPPORTED. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/internal.h"
#include "http.h"

#ifdef PGD_HAVE_CURL
#include <curl/curl.h>
#include <pthread.h>
#endif

/* ---- response headers ---------------------------------------------------------------------- */

void pgd__http_head_reset(pgd__http_head *h)
{
    memset(h, 0, sizeof *h);
    h->size = -1;
    h->range_start = -1;
    h->retry_after = -1;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* 1 when line[0..n) starts with `name` (case-insensitive) followed by ':'. */
static int is_header(const char *line, size_t n, const char *name)
{
    size_t k = strlen(name);
    if (n <= k || line[k] != ':')
        return 0;
    for (size_t i = 0; i < k; i++)
        if (lower((unsigned char)line[i]) != lower((unsigned char)name[i]))
            return 0;
    return 1;
}

/* Copies [v, v+n) into dst[size], NUL-terminated; sets *cut when it did not fit. */
static void copy_value(char *dst, size_t size, const char *v, size_t n, int *cut)
{
    if (n >= size) {
        n = size - 1;
        *cut = 1;
    }
    memcpy(dst, v, n);
    dst[n] = 0;
}

/* A whole non-negative decimal number of at most 18 digits; -1 otherwise. */
static int64_t parse_count(const char *v, size_t n)
{
    if (n == 0 || n > 18)
        return -1;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        x = x * 10 + (v[i] - '0');
    }
    return x;
}

/* "HTTP/1.1 302 Found", "HTTP/2 200": the three-digit code; -1 when it is not a status line. */
static long parse_status(const char *line, size_t n)
{
    size_t i = 5;
    if (n < 5 || memcmp(line, "HTTP/", 5))
        return -1;
    while (i < n && line[i] != ' ')
        i++;
    if (n - i < 4) /* " 200" at least */
        return -1;
    if (i + 4 < n && line[i + 4] != ' ' && line[i + 4] != '\r' && line[i + 4] != '\n')
        return -1;
    int64_t code = parse_count(line + i + 1, 3);
    return code >= 100 && code <= 599 ? (long)code : -1;
}

/* An ETag as huggingface_hub stores it: without a W/ prefix and without the quotes. */
static void set_etag(pgd__http_head *h, const char *v, size_t n, int linked)
{
    if (h->linked_etag && !linked)
        return;
    if (n >= 2 && v[0] == 'W' && v[1] == '/')
        v += 2, n -= 2;
    while (n && *v == '"')
        v++, n--;
    while (n && v[n - 1] == '"')
        n--;
    copy_value(h->etag, sizeof h->etag, v, n, &h->too_long);
    h->linked_etag = linked;
}

/* Content-Range: bytes START-END/TOTAL (or bytes START-END/ *): START. */
static int64_t parse_range_start(const char *v, size_t n)
{
    if (n < 6 || memcmp(v, "bytes ", 6))
        return -1;
    size_t i = 6, j = i;
    while (j < n && v[j] >= '0' && v[j] <= '9')
        j++;
    if (j == i || j == n || v[j] != '-')
        return -1;
    return parse_count(v + i, j - i);
}

static void header_value(pgd__http_head *h, const char *line, size_t n)
{
    const char *colon = memchr(line, ':', n);
    if (!colon)
        return;
    const char *v = colon + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t k = (size_t)(end - v);
    if (is_header(line, n, "X-Repo-Commit"))
        copy_value(h->commit, sizeof h->commit, v, k, &h->too_long);
    else if (is_header(line, n, "X-Linked-Etag"))
        set_etag(h, v, k, 1);
    else if (is_header(line, n, "ETag"))
        set_etag(h, v, k, 0);
    else if (is_header(line, n, "X-Linked-Size")) {
        h->size = parse_count(v, k);
        h->linked_size = h->size >= 0;
    } else if (is_header(line, n, "Content-Length") && !h->linked_size)
        h->size = parse_count(v, k);
    else if (is_header(line, n, "Content-Range"))
        h->range_start = parse_range_start(v, k);
    else if (is_header(line, n, "Location"))
        copy_value(h->location, sizeof h->location, v, k, &h->too_long);
    else if (is_header(line, n, "Retry-After")) {
        int64_t s = parse_count(v, k);
        h->retry_after = s >= 0 ? (double)s : -1; /* an HTTP date: our own back-off */
    } else if (is_header(line, n, "X-Error-Code"))
        copy_value(h->error_code, sizeof h->error_code, v, k, &h->too_long);
    else if (is_header(line, n, "X-Error-Message"))
        copy_value(h->error_message, sizeof h->error_message, v, k, &h->too_long);
}

int pgd__http_header_line(pgd__http_head *h, const char *line, size_t n)
{
    if (n >= 5 && !memcmp(line, "HTTP/", 5)) {
        pgd__http_head_reset(h);
        long code = parse_status(line, n);
        if (code < 0)
            return -1;
        h->status = code;
        return 0;
    }
    header_value(h, line, n);
    return 0;
}

/* ---- requests ------------------------------------------------------------------------------ */

#ifndef PGD_HAVE_CURL

int pgd__http_available(void)
{
    return 0;
}

int pgd__http_request(const pgd__http_req *rq, pgd__http_res *res, pgd_error **err)
{
    memset(res, 0, sizeof *res);
    pgd__http_head_reset(&res->h);
    return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                          "%s: this Pagoda was built without libcurl, so it cannot download "
                          "(install libcurl4-openssl-dev and rebuild)",
                          rq->url);
}

#else

int pgd__http_available(void)
{
    return 1;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct transfer {
    const pgd__http_req *rq;
    pgd__http_res *res;
    uint64_t at; /* where the next body byte goes */
    int started;
} transfer;

static size_t on_header(char *line, size_t size, size_t count, void *user)
{
    transfer *t = user;
    pgd__http_header_line(&t->res->h, line, size * count);
    return size * count;
}

/* The first body byte of a 200/206: a 206 must start where we asked; a 200 to a Range request
 * is the whole file, so the partial one is started over. */
static int body_start(transfer *t)
{
    pgd__http_res *r = t->res;
    t->started = 1;
    if (r->h.status == 206 && r->h.range_start != (int64_t)t->rq->from)
        return -1;
    if (r->h.status == 200 && t->rq->from) {
        if (ftruncate(t->rq->fd, 0)) {
            r->write_errno = errno;
            return -1;
        }
        t->at = 0;
        r->restarted = 1;
    }
    return 0;
}

static size_t on_body(char *data, size_t size, size_t count, void *user)
{
    transfer *t = user;
    pgd__http_res *r = t->res;
    size_t n = size * count;
    if (r->h.status != 200 && r->h.status != 206)
        return n; /* an error page: not the file */
    if (!t->started && body_start(t))
        return 0;
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(t->rq->fd, data + done, n - done, (off_t)t->at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            r->write_errno = w < 0 ? errno : ENOSPC;
            return 0;
        }
        done += (size_t)w, t->at += (uint64_t)w, r->written += (uint64_t)w;
    }
    return n;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    transfer *t = user;
    const pgd_hub_options *o = t->rq->o;
    if (o && o->progress && t->started)
        o->progress(o->progress_user, t->rq->name, t->at, t->rq->total);
    return 0;
}

static void set_options(CURL *c, const pgd__http_req *rq, transfer *t)
{
    long ms = (long)((rq->timeout_s > 0 ? rq->timeout_s : 10) * 1000);
    curl_easy_setopt(c, CURLOPT_URL, rq->url);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "pagoda/" PGD_VERSION_STRING);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms);
    /* The stall limit: less than one byte a second for the timeout (at least a second). */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, ms < 1000 ? 1L : ms / 1000);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, rq->follow ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    if (rq->token && *rq->token) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, rq->token);
    }
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, t);
    if (rq->head) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        return;
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    if (rq->from) {
        char range[32];
        snprintf(range, sizeof range, "%llu-", (unsigned long long)rq->from);
        curl_easy_setopt(c, CURLOPT_RANGE, range); /* libcurl copies the string */
    }
}

/* The libcurl failures that another try may cure. */
static int transient(CURLcode rc)
{
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return 1;
    default: return 0;
    }
}

int pgd__http_request(const pgd__http_req *rq, pgd__http_res *res, pgd_error **err)
{
    memset(res, 0, sizeof *res);
    pgd__http_head_reset(&res->h);
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return pgd__error_set(err, PGD_ERR_IO, "libcurl did not initialise: %s",
                              curl_easy_strerror(curl_init_rc));
    CURL *c = curl_easy_init();
    if (!c)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "libcurl: no handle");
    char why[CURL_ERROR_SIZE] = "";
    transfer t = {rq, res, rq->from, 0};
    set_options(c, rq, &t);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, why);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    if (rc == CURLE_OK)
        return PGD_OK;
    res->transient = transient(rc);
    if (rc == CURLE_WRITE_ERROR && res->write_errno)
        return pgd__error_set(err, PGD_ERR_IO, "writing the download of %s: %s", rq->url,
                              strerror(res->write_errno));
    if (rc == CURLE_WRITE_ERROR && t.started == 1 && res->h.status == 206)
        return pgd__error_set(err, PGD_ERR_IO,
                              "%s: the server answered the range request from byte %llu with "
                              "bytes from %lld",
                              rq->url, (unsigned long long)rq->from, (long long)res->h.range_start);
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return pgd__error_set(err, PGD_ERR_IO, "%s: timed out (no data for %.3g s): %s", rq->url,
                              rq->timeout_s > 0 ? rq->timeout_s : 10.0, why[0] ? why : "");
    return pgd__error_set(err, PGD_ERR_IO, "%s: %s", rq->url,
                          why[0] ? why : curl_easy_strerror(rc));
}

#endif
