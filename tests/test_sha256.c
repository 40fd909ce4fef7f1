/* test_sha256.c — SHA-256 against the FIPS 180-4 example vectors, and incremental updates. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */

static void digest_hex(const void *data, size_t n, char hex[65])
{
    pgd__sha256 s;
    unsigned char d[32];
    pgd__sha256_init(&s);
    pgd__sha256_update(&s, data, n);
    pgd__sha256_final(&s, d);
    pgd__sha256_hex(d, hex);
}

START_TEST(known_vectors)
{
    char hex[65];
    digest_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    digest_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    digest_hex(m, strlen(m), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *million = malloc(1000000);
    ck_assert_ptr_nonnull(million);
    memset(million, 'a', 1000000);
    digest_hex(million, 1000000, hex);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
}
END_TEST

START_TEST(incremental_equals_oneshot)
{
    pgd_rng r;
    pgd_rng_seed(&r, 7);
    unsigned char buf[1000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)pgd_rng_next(&r);
    for (int trial = 0; trial < 200; trial++) {
        size_t n = (size_t)pgd_rng_int(&r, 0, sizeof buf);
        char want[65], got[65];
        digest_hex(buf, n, want);
        pgd__sha256 s;
        unsigned char d[32];
        pgd__sha256_init(&s);
        size_t off = 0;
        while (off < n) {
            size_t step = (size_t)pgd_rng_int(&r, 0, 130);
            if (step > n - off)
                step = n - off;
            pgd__sha256_update(&s, buf + off, step);
            off += step;
        }
        pgd__sha256_final(&s, d);
        pgd__sha256_hex(d, got);
        ck_assert_str_eq(got, want);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sha256");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, known_vectors);
    tcase_add_test(tc, incremental_equals_oneshot);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
