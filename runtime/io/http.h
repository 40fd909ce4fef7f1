/* http.h — the HTTP client under pgd_hub_file (http.c, libcurl) and its response-header parser;
 * internal to the runtime and the tests, not installed. */
#ifndef PAGODA_HTTP_H
#define PAGODA_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "pagoda.h"
#include "pagoda_util.h"

/* What one response's headers said that the hub protocol needs. A status line starts a new
 * response (after a redirect or a 100 Continue), so the struct describes the last one. */
typedef struct pgd__http_head {
    long status;             /* 0 until a status line was read */
    char commit[72];         /* X-Repo-Commit */
    char etag[136];          /* X-Linked-Etag, else ETag, normalised: no W/, no quotes */
    int linked_etag;         /* 1 when etag came from X-Linked-Etag (it then wins) */
    int64_t size;            /* X-Linked-Size, else Content-Length; -1 unknown */
    int linked_size;         /* 1 when size came from X-Linked-Size */
    int64_t range_start;     /* Content-Range: bytes START-END/TOTAL; -1 without one */
    char location[2048];     /* Location (cut: too_long set) */
    double retry_after;      /* Retry-After in seconds; -1 without one */
    char error_code[48];     /* X-Error-Code: RepoNotFound, RevisionNotFound, GatedRepo ... */
    char error_message[256]; /* X-Error-Message */
    int too_long;            /* a value did not fit its field and was cut */
} pgd__http_head;

void pgd__http_head_reset(pgd__http_head *h);
/* Parses one header line as libcurl hands it over (the bytes up to and including CRLF, not
 * NUL-terminated): a status line ("HTTP/1.1 302 Found", "HTTP/2 200") resets *h and sets
 * status; a known header sets its field; anything else, a malformed line or a blank line is
 * ignored. Never reads beyond n bytes. Returns 0, or -1 for a status line that does not parse
 * (status is then 0). */
int pgd__http_header_line(pgd__http_head *h, const char *line, size_t n);

/* One request. */
typedef struct pgd__http_req {
    const char *url;
    const char *token; /* Bearer token for the URL's host (never sent after a redirect) */
    int head;          /* HEAD; else GET */
    int follow;        /* follow redirects (GET: to a CDN) */
    double timeout_s;  /* connect limit and stall limit (no byte for that long) */
    int fd;            /* GET: the body is written here at offset `from` ... */
    uint64_t from;     /* ... asked for with Range: bytes=FROM- when non-zero */
    const char *name;  /* the file's name for progress */
    uint64_t total;    /* the file's whole size for progress; 0 unknown */
    const pgd_hub_options *o;
} pgd__http_req;

/* The outcome of a request that went through (rc 0): the last response's head, the bytes of
 * body written to fd, and for a 200 answer to a Range request, that the file was started over
 * (the server ignored the range). */
typedef struct pgd__http_res {
    pgd__http_head h;
    uint64_t written;
    int restarted;
    int transient;   /* on failure: worth another try (timeout, dropped connection) */
    int write_errno; /* on failure: the write(2) error that stopped it */
} pgd__http_res;

/* Performs the request. 0 when an HTTP answer arrived (whatever its status: the caller judges
 * it); else PGD_ERR_IO naming the URL and libcurl's reason (res->transient says whether a retry
 * may help), or PGD_ERR_UNSUPPORTED in a build without libcurl. Only a 200 or 206 body is
 * written to fd. */
int pgd__http_request(const pgd__http_req *rq, pgd__http_res *res, pgd_error **err);

/* 1 when this build has libcurl. */
int pgd__http_available(void);

#endif
