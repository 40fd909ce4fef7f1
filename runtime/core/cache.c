/* cache.c — the on-disk cache of program binaries.
 *
 * One file per key, <dir>/<sha256>.bin, holding a header (magic, format version, payload size,
 * SHA-256 of the payload) and the driver's binary. A file whose header or checksum does not
 * match is deleted and reported as damaged, so a truncated or corrupt file never reaches the
 * driver (some drivers crash on garbage binaries). Writes go to a unique temp file that is
 * renamed into place, so concurrent processes only ever see complete files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "internal.h"

static const char MAGIC[8] = {'P', 'G', 'D', 'C', 'A', 'C', 'H', 'E'};
enum { HEADER_SIZE = 8 + 4 + 4 + 8 + 32 };

static int mkdir_p(const char *path)
{
    char *tmp = pgd__strdup(path);
    if (!tmp)
        return -1;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
            free(tmp);
            return -1;
        }
        *p = '/';
    }
    int rc = mkdir(tmp, 0755);
    free(tmp);
    if (rc != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return -1;
    return 0;
}

char *pgd__cache_dir_resolve(const char *option)
{
    char buf[4096];
    if (option && *option) {
        if (!strcmp(option, "off") || !strcmp(option, "0") || !strcmp(option, "none"))
            return NULL;
        snprintf(buf, sizeof buf, "%s", option);
    } else if (pgd__default_cache_dir(buf, sizeof buf) != 0) {
        return NULL;
    }
    /* A directory we cannot create or that is not a directory only disables caching. */
    if (mkdir_p(buf) != 0)
        return NULL;
    return pgd__strdup(buf);
}

static void hash_field(pgd__sha256 *s, const char *field)
{
    /* Length-prefixed so that ("ab","c") and ("a","bc") give different keys. */
    uint64_t n = field ? strlen(field) : 0;
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(n >> (8 * i));
    pgd__sha256_update(s, len, 8);
    if (n)
        pgd__sha256_update(s, field, (size_t)n);
}

void pgd__cache_key(const pgd_device_info *dev, const char *source, const char *options,
                    char hex[65])
{
    pgd__sha256 s;
    pgd__sha256_init(&s);
    char fmt[32];
    snprintf(fmt, sizeof fmt, "pagoda-cache-%d", PGD__CACHE_FORMAT);
    hash_field(&s, fmt);
    hash_field(&s, source);
    hash_field(&s, options);
    hash_field(&s, dev->name);
    hash_field(&s, dev->driver_version);
    hash_field(&s, dev->platform);
    hash_field(&s, dev->platform_version);
    unsigned char d[32];
    pgd__sha256_final(&s, d);
    pgd__sha256_hex(d, hex);
}

static void entry_path(char *buf, size_t size, const char *dir, const char *key)
{
    snprintf(buf, size, "%s/%s.bin", dir, key);
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

int pgd__cache_load(const char *dir, const char *key, unsigned char **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    char path[4200];
    entry_path(path, sizeof path, dir, key);
    unsigned char *file = NULL;
    size_t len = 0;
    if (pgd__read_file(path, &file, &len) != 0)
        return 0;
    int ok = len >= HEADER_SIZE && !memcmp(file, MAGIC, 8) &&
             get_u64(file + 8) == (uint64_t)PGD__CACHE_FORMAT &&
             get_u64(file + 16) == (uint64_t)(len - HEADER_SIZE);
    if (ok) {
        unsigned char d[32];
        pgd__sha256 s;
        pgd__sha256_init(&s);
        pgd__sha256_update(&s, file + HEADER_SIZE, len - HEADER_SIZE);
        pgd__sha256_final(&s, d);
        ok = !memcmp(d, file + 24, 32);
    }
    if (!ok) {
        free(file);
        unlink(path);
        return -1;
    }
    unsigned char *payload = malloc(len - HEADER_SIZE + 1);
    if (!payload) {
        free(file);
        return 0;
    }
    memcpy(payload, file + HEADER_SIZE, len - HEADER_SIZE);
    free(file);
    *data = payload;
    *size = len - HEADER_SIZE;
    return 1;
}

int pgd__cache_store(const char *dir, const char *key, const unsigned char *data, size_t size)
{
    static unsigned counter;
    char path[4200], tmp[4300];
    entry_path(path, sizeof path, dir, key);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
    unsigned char header[HEADER_SIZE];
    memcpy(header, MAGIC, 8);
    put_u64(header + 8, PGD__CACHE_FORMAT);
    put_u64(header + 16, size);
    pgd__sha256 s;
    pgd__sha256_init(&s);
    pgd__sha256_update(&s, data, size);
    pgd__sha256_final(&s, header + 24);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return -1;
    int ok = fwrite(header, 1, HEADER_SIZE, f) == HEADER_SIZE && fwrite(data, 1, size, f) == size;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

void pgd__cache_remove(const char *dir, const char *key)
{
    char path[4200];
    entry_path(path, sizeof path, dir, key);
    unlink(path);
}
