/* serve_daemon.c — `pagoda serve` on libmicrohttpd: the sockets, and the limits that need
 * them (serve.h): connections in all and per address, the idle time-out, the time a request
 * may take to arrive (a slow client), the upload size while the body arrives (a declared
 * Content-Length over the limit is refused before a byte of it is read), and the per-address
 * rate of model runs (a token bucket); Ctrl-C and SIGTERM. Everything else is the pure handler's
 * (serve_http.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "app.h"
#include "serve.h"

/* What one request collects while its body arrives. */
typedef struct conn {
    uint8_t *body;
    size_t size, cap;
    size_t discarded; /* bytes past max_upload, dropped */
    double start;     /* when the headers were complete (ms) */
    int late;         /* the body took longer than the time-out */
    int answered;     /* a response is queued (408 before the body's end) */
} conn;

/* The per-address token buckets (the least recently used one is reused). */
enum { BUCKETS = 256 };
typedef struct bucket {
    char addr[64];
    double tokens, last;
} bucket;
static bucket buckets[BUCKETS];
static pthread_mutex_t bucket_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void client_addr(struct MHD_Connection *c, char *buf, size_t size)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(buf, size, "?");
    if (!i || !i->client_addr)
        return;
    const struct sockaddr *sa = i->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf, size);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, buf, size);
}

/* Takes one token of the address's bucket: 0, or the seconds to wait. */
static unsigned rate_take(const serve_limits *l, const char *addr)
{
    double now = now_ms() / 1e3;
    pthread_mutex_lock(&bucket_lock);
    bucket *b = NULL, *oldest = &buckets[0];
    for (int i = 0; i < BUCKETS && !b; i++) {
        if (!strcmp(buckets[i].addr, addr))
            b = &buckets[i];
        else if (buckets[i].last < oldest->last)
            oldest = &buckets[i];
    }
    if (!b) {
        b = oldest;
        snprintf(b->addr, sizeof b->addr, "%s", addr);
        b->tokens = l->burst;
        b->last = now;
    }
    b->tokens = fmin(l->burst, b->tokens + (now - b->last) * l->rate);
    b->last = now;
    unsigned wait = 0;
    if (b->tokens >= 1)
        b->tokens -= 1;
    else
        wait = (unsigned)ceil((1 - b->tokens) / l->rate);
    pthread_mutex_unlock(&bucket_lock);
    return wait;
}

typedef struct args {
    serve_arg a[SERVE_MAX_ARGS];
    int n;
} args;

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    (void)kind;
    args *g = cls;
    if (g->n < SERVE_MAX_ARGS)
        g->a[g->n] = (serve_arg){key ? key : "", value};
    g->n++; /* past SERVE_MAX_ARGS: counted, refused by the handler */
    return MHD_YES;
}

static enum MHD_Result respond(struct MHD_Connection *c, serve_response *res)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        res->size, res->body, res->owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        serve_response_free(res);
        return MHD_NO;
    }
    res->owned = 0; /* the response frees it now */
    if (res->content_type)
        MHD_add_response_header(r, "Content-Type", res->content_type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data: blob:; "
                            "frame-ancestors 'none'");
    if (res->allow)
        MHD_add_response_header(r, "Allow", res->allow);
    if (res->retry_after) {
        char s[16];
        snprintf(s, sizeof s, "%u", res->retry_after);
        MHD_add_response_header(r, "Retry-After", s);
    }
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)res->status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result refuse(struct MHD_Connection *c, int status, unsigned retry, const char *msg)
{
    serve_response res;
    serve_error(&res, 1, status, "%s", msg);
    res.retry_after = retry;
    return respond(c, &res);
}

/* The first call for a request: limits that need no body. */
static enum MHD_Result first_call(serve_app *app, struct MHD_Connection *c, const char *url,
                                  const char *method, void **state)
{
    conn *k = calloc(1, sizeof *k);
    if (!k)
        return MHD_NO;
    k->start = now_ms();
    *state = k;
    if (strcmp(url, "/api/run") || strcmp(method, "POST"))
        return MHD_YES;
    const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (len && strtoull(len, NULL, 10) > app->limits.max_upload) {
        char msg[128];
        snprintf(msg, sizeof msg, "the upload is larger than %zu bytes (--max-upload)",
                 app->limits.max_upload);
        return refuse(c, 413, 0, msg);
    }
    char addr[64];
    client_addr(c, addr, sizeof addr);
    unsigned wait = rate_take(&app->limits, addr);
    if (wait)
        return refuse(c, 429, wait, "too many runs from this address (--rate, --burst)");
    return MHD_YES;
}

/* Appends a piece of the body (bytes past the limit are counted and dropped). */
static int take_body(serve_app *app, conn *k, const char *data, size_t n)
{
    if (now_ms() - k->start > app->limits.timeout_s * 1e3)
        k->late = 1;
    if (k->late || k->size + n > app->limits.max_upload) {
        k->discarded += n;
        return k->discarded <= 4 * app->limits.max_upload; /* then: close the connection */
    }
    if (k->size + n > k->cap) {
        size_t cap = k->cap ? k->cap : 65536;
        while (cap < k->size + n)
            cap *= 2;
        uint8_t *p = realloc(k->body, cap);
        if (!p)
            return 0;
        k->body = p, k->cap = cap;
    }
    memcpy(k->body + k->size, data, n);
    k->size += n;
    return 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **state)
{
    (void)version;
    serve_app *app = cls;
    if (!*state)
        return first_call(app, c, url, method, state);
    conn *k = *state;
    if (*upload_size) {
        int ok = take_body(app, k, upload_data, *upload_size);
        *upload_size = 0;
        if (ok && k->late && !k->answered) { /* answered now; the connection closes after */
            k->answered = 1;
            return refuse(c, 408, 0, "the request took longer than --timeout to arrive");
        }
        return ok ? MHD_YES : MHD_NO;
    }
    if (k->answered)
        return MHD_YES;
    if (k->late)
        return refuse(c, 408, 0, "the request took longer than --timeout to arrive");
    args g = {.n = 0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect, &g);
    serve_request req = {method, url, g.a, g.n, k->body, k->size, k->discarded > 0};
    serve_response res;
    serve_handle(app, &req, &res);
    return respond(c, &res);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode code)
{
    (void)cls, (void)c, (void)code;
    conn *k = *state;
    if (k)
        free(k->body);
    free(k);
    *state = NULL;
}

static int bind_address(const char *text, int port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        return AF_INET;
    }
    if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        return AF_INET6;
    }
    return 0;
}

/* SIGINT and SIGTERM, in whichever thread they land (the device runtime's threads too), write
 * one byte that the main thread waits for: it then stops the server cleanly. */
static int stop_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    (void)sig;
    char b = 1;
    int saved = errno;
    if (write(stop_pipe[1], &b, 1) < 0) {
        /* the pipe is full: a stop is already on its way */
    }
    errno = saved;
}

static int catch_stop(void)
{
    if (pipe(stop_pipe))
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL) ? -1 : 0;
}

int serve_daemon_run(serve_app *app, const char *bind_addr, int port)
{
    struct sockaddr_storage ss;
    int family = bind_address(bind_addr, port, &ss);
    if (!family)
        return app_usage_error("serve ", "--bind wants a numeric IPv4 or IPv6 address, got '%s'",
                               bind_addr);
    if (catch_stop()) {
        perror("pagoda: error: serve: signals");
        return EXIT_RUNTIME;
    }
    const serve_limits *l = &app->limits;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     (family == AF_INET6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, app, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, l->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        l->per_ip, MHD_OPTION_CONNECTION_TIMEOUT, l->timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)64 * 1024, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr,
                "pagoda: error: serve: cannot listen on %s port %d (in use, or not an "
                "address of this machine)\n",
                bind_addr, port);
        return EXIT_RUNTIME;
    }
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int bound = i ? i->port : port;
    printf(family == AF_INET6 ? "pagoda serve: http://[%s]:%d/\n" : "pagoda serve: http://%s:%d/\n",
           bind_addr, bound);
    fflush(stdout);
    if (strncmp(bind_addr, "127.", 4) && strcmp(bind_addr, "::1"))
        fprintf(stderr,
                "pagoda: serve: note: listening on %s, not this machine's loopback: "
                "anyone who reaches it can use the page (there is no login)\n",
                bind_addr);
    fprintf(stderr, "pagoda: serve: on %s%s; Ctrl-C stops it\n", app->device[0],
            app->ndevices > 1 ? " and more" : "");
    int sig = 0;
    while (read(stop_pipe[0], &sig, 1) < 0 && errno == EINTR)
        ;
    fprintf(stderr, "pagoda: serve: stopping\n");
    MHD_stop_daemon(d);
    return EXIT_OK;
}
