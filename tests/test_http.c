/* test_http.c — the hub's response headers as runtime/io/http.c parses them (white-box): a
 * redirect's metadata, ETag normalisation, the linked values winning over the plain ones in
 * either order, a new status line starting over, and malformed or oversized lines refused or
 * cut without reading past the line; and pgd_hub_file's argument checks (no network). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "runtime/io/http.h"

/* Feeds each line of `text` (CRLF-separated) as libcurl would: exactly its bytes, in a
 * buffer of that size, so that ASan sees any read past it. */
static void feed(pgd__http_head *h, const char *text)
{
    for (const char *p = text; *p;) {
        const char *e = strstr(p, "\r\n");
        size_t n = e ? (size_t)(e - p) + 2 : strlen(p);
        char *line = malloc(n);
        ck_assert_ptr_nonnull(line);
        memcpy(line, p, n);
        pgd__http_header_line(h, line, n);
        free(line);
        p += n;
    }
}

START_TEST(hub_redirect)
{
    pgd__http_head h;
    pgd__http_head_reset(&h);
    feed(&h, "HTTP/1.1 302 Found\r\n"
             "x-repo-commit: 0123456789abcdef0123456789abcdef01234567\r\n"
             "ETag: W/\"feed\"\r\n"
             "X-Linked-Etag:   \"aa11\"  \r\n"
             "Content-Length: 1234\r\n"
             "X-Linked-Size: 346293852\r\n"
             "Location: https://cdn-lfs.hf.co/repos/x?sig=1\r\n"
             "\r\n");
    ck_assert_int_eq(h.status, 302);
    ck_assert_str_eq(h.commit, "0123456789abcdef0123456789abcdef01234567");
    ck_assert_str_eq(h.etag, "aa11"); /* the linked one wins, read first or second */
    ck_assert_int_eq(h.size, 346293852);
    ck_assert_str_eq(h.location, "https://cdn-lfs.hf.co/repos/x?sig=1");
    pgd__http_head_reset(&h);
    feed(&h, "HTTP/2 200\r\nETag: W/\"abc\"\r\nContent-Length: 77\r\n");
    ck_assert_int_eq(h.status, 200);
    ck_assert_str_eq(h.etag, "abc");
    ck_assert_int_eq(h.size, 77);
    ck_assert_int_eq(h.range_start, -1);
}
END_TEST

START_TEST(new_response_starts_over)
{
    pgd__http_head h;
    pgd__http_head_reset(&h);
    feed(&h, "HTTP/1.1 302 Found\r\nLocation: http://cdn/x\r\nX-Linked-Size: 9\r\n\r\n"
             "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 500-999/1000\r\n"
             "Content-Length: 500\r\nRetry-After: 3\r\nX-Error-Code: GatedRepo\r\n");
    ck_assert_int_eq(h.status, 206);
    ck_assert_str_eq(h.location, "");
    ck_assert_int_eq(h.size, 500);
    ck_assert_int_eq(h.range_start, 500);
    ck_assert(h.retry_after == 3.0);
    ck_assert_str_eq(h.error_code, "GatedRepo");
}
END_TEST

START_TEST(malformed)
{
    pgd__http_head h;
    pgd__http_head_reset(&h);
    ck_assert_int_eq(pgd__http_header_line(&h, "HTTP/1.1 2x0 OK\r\n", 17), -1);
    ck_assert_int_eq(h.status, 0);
    ck_assert_int_eq(pgd__http_header_line(&h, "HTTP/1.1 99", 11), -1);
    ck_assert_int_eq(pgd__http_header_line(&h, "HTTP/1.1 2000 OK", 16), -1);
    ck_assert_int_eq(pgd__http_header_line(&h, "HTTP/1.1 404", 12), 0);
    ck_assert_int_eq(h.status, 404);
    /* numbers: whole, non-negative, at most 18 digits; anything else is unknown (-1) */
    feed(&h, "Content-Length: -5\r\n");
    ck_assert_int_eq(h.size, -1);
    feed(&h, "Content-Length: 99999999999999999999\r\n");
    ck_assert_int_eq(h.size, -1);
    feed(&h, "Content-Range: bytes */1000\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n");
    ck_assert_int_eq(h.range_start, -1);
    ck_assert(h.retry_after < 0);
    /* a line with no colon, a name that only starts like a known one */
    feed(&h, "ETag\r\nETagX: \"1\"\r\nX-Repo-Commit-Extra: no\r\n");
    ck_assert_str_eq(h.etag, "");
    ck_assert_str_eq(h.commit, "");
    /* an oversized value is cut and flagged (the hub client then refuses it) */
    char line[400];
    memset(line, 'a', sizeof line);
    memcpy(line, "ETag: ", 6);
    pgd__http_header_line(&h, line, sizeof line);
    ck_assert_int_eq((int)strlen(h.etag), (int)sizeof h.etag - 1);
    ck_assert_int_eq(h.too_long, 1);
}
END_TEST

START_TEST(hub_file_arguments)
{
    /* Refused before any cache path or request is made: an endpoint that does not exist is
     * never reached. */
    pgd_hub_options o = {.endpoint = "http://127.0.0.1:1", .cache_dir = "/nonexistent"};
    const char *bad[][3] = {{"../x", NULL, "a"},       {"org/a/b", NULL, "a"},
                            {"org/x--y", NULL, "a"},   {"-org/x", NULL, "a"},
                            {"org/x", "../main", "a"}, {"org/x", "a//b", "a"},
                            {"org/x", NULL, "../a"},   {"org/x", NULL, "/etc/passwd"},
                            {"org/x", NULL, "a/./b"},  {"org/x", NULL, "a b"},
                            {"", NULL, "a"},           {"org/x", NULL, ""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *path = (char *)1;
        pgd_error *err = NULL;
        int rc = pgd_hub_file(&o, bad[i][0], bad[i][1], bad[i][2], 0, &path, NULL, &err);
        ck_assert_msg(rc == PGD_ERR_INVALID_ARGUMENT, "case %zu: %d", i, rc);
        ck_assert_ptr_null(path);
        pgd_error_destroy(err);
    }
    /* offline and not cached: PGD_ERR_NOT_FOUND naming the file, no request */
    o.offline = 1;
    char *path = NULL;
    pgd_error *err = NULL;
    ck_assert_int_eq(pgd_hub_file(&o, "org/x", NULL, "model.safetensors", 0, &path, NULL, &err),
                     PGD_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(pgd_error_get_message(err), "model.safetensors"));
    pgd_error_destroy(err);
}
END_TEST

START_TEST(options_from_env)
{
    pgd_hub_options o = {.endpoint = "keep"};
    pgd_error *err = NULL;
    const char *const env[] = {"HF_ENDPOINT=http://mirror.example", "HF_HUB_OFFLINE=TRUE",
                               "HF_HUB_DOWNLOAD_TIMEOUT=2.5", NULL};
    ck_assert_int_eq(pgd_hub_options_from_envp(&o, env, &err), PGD_OK);
    ck_assert_str_eq(o.endpoint, "http://mirror.example");
    ck_assert_int_eq(o.offline, 1);
    ck_assert(o.timeout_s == 2.5);
    ck_assert_ptr_null(o.token);
    /* a bad value is refused by name and changes nothing */
    const char *bad[][2] = {{"HF_HUB_OFFLINE", "HF_HUB_OFFLINE=maybe"},
                            {"HF_HUB_OFFLINE", "HF_HUB_OFFLINE=truetruetrue"},
                            {"HF_HUB_DOWNLOAD_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT=10s"},
                            {"HF_HUB_DOWNLOAD_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT=0"},
                            {"HF_HUB_DOWNLOAD_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT=nan"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pgd_hub_options before = o;
        const char *const one[] = {bad[i][1], NULL};
        ck_assert_int_eq(pgd_hub_options_from_envp(&o, one, &err), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(pgd_error_get_message(err), bad[i][0]));
        ck_assert_mem_eq(&before, &o, sizeof o);
        pgd_error_destroy(err), err = NULL;
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, hub_redirect);
    tcase_add_test(tc, new_response_starts_over);
    tcase_add_test(tc, malformed);
    tcase_add_test(tc, hub_file_arguments);
    tcase_add_test(tc, options_from_env);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
