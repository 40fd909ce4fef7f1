/* cache.c — the on-disk cache of program binaries.
 *
 * One file per key, <dir>/<key>.bin, where <key> is the 64 hex digits of pgd__cache_key. A file
 * is trusted for nothing but the key written inside it: it starts with a header (all integers
 * little-endian)
 *
 *     0   8  magic "PGDCACHE"
 *     8   4  format version (PGD__CACHE_FORMAT)
 *    12   4  header size (120)
 *    16  64  the key, lowercase hex, the same as the file name
 *    80   8  payload size
 *    88  32  SHA-256 of header bytes 0..87 followed by the payload
 *   120      the driver's binary
 *
 * and every field is checked against the key being looked up. A file copied over another key's
 * file (the same kernel file with other -D options, another program), a file of another format
 * version, a truncated or corrupt one is deleted and reported as damaged, so it never reaches
 * the driver (some drivers crash on garbage binaries, and a good binary of the wrong program
 * runs the wrong code). Writes go to a unique temp file that is renamed into place, so
 * concurrent processes only ever see complete files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "internal.h"

static const char MAGIC[8] = {'P', 'G', 'D', 'C', 'A', 'C', 'H', 'E'};
enum {
    OFF_VERSION = 8,
    OFF_HEADER_SIZE = 12,
    OFF_KEY = 16,
    OFF_SIZE = OFF_KEY + 64,
    OFF_SUM = OFF_SIZE + 8,
    HEADER_SIZE = OFF_SUM + 32
};

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

/* A key is exactly 64 lowercase hex digits, so it can never name a path outside the cache
 * directory. */
static int key_valid(const char *key)
{
    size_t n = 0;
    for (; key[n]; n++)
        if (!((key[n] >= '0' && key[n] <= '9') || (key[n] >= 'a' && key[n] <= 'f')))
            return 0;
    return n == 64;
}

static void entry_path(char *buf, size_t size, const char *dir, const char *key)
{
    snprintf(buf, size, "%s/%s.bin", dir, key);
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* The checksum binds the header (magic, version, key, size) to the payload. */
static void checksum(const unsigned char *header, const unsigned char *payload, size_t size,
                     unsigned char out[32])
{
    pgd__sha256 s;
    pgd__sha256_init(&s);
    pgd__sha256_update(&s, header, OFF_SUM);
    pgd__sha256_update(&s, payload, size);
    pgd__sha256_final(&s, out);
}

/* 1 when `file` (len bytes) is a complete entry of this format written for `key`. */
static int entry_valid(const unsigned char *file, size_t len, const char *key)
{
    if (len < HEADER_SIZE || memcmp(file, MAGIC, 8) != 0 ||
        get_le(file + OFF_VERSION, 4) != (uint64_t)PGD__CACHE_FORMAT ||
        get_le(file + OFF_HEADER_SIZE, 4) != HEADER_SIZE || memcmp(file + OFF_KEY, key, 64) != 0 ||
        get_le(file + OFF_SIZE, 8) != (uint64_t)(len - HEADER_SIZE))
        return 0;
    unsigned char d[32];
    checksum(file, file + HEADER_SIZE, len - HEADER_SIZE, d);
    return !memcmp(d, file + OFF_SUM, 32);
}

int pgd__cache_load(const char *dir, const char *key, unsigned char **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    if (!key_valid(key))
        return 0;
    char path[4200];
    entry_path(path, sizeof path, dir, key);
    unsigned char *file = NULL;
    size_t len = 0;
    if (pgd__file_read(path, NULL, PGD__MAX_CACHE_BYTES, &file, &len, NULL) != PGD_OK)
        return 0;
    if (!entry_valid(file, len, key)) {
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
    if (!key_valid(key))
        return -1;
    char path[4200];
    entry_path(path, sizeof path, dir, key);
    unsigned char header[HEADER_SIZE];
    memcpy(header, MAGIC, 8);
    put_le(header + OFF_VERSION, PGD__CACHE_FORMAT, 4);
    put_le(header + OFF_HEADER_SIZE, HEADER_SIZE, 4);
    memcpy(header + OFF_KEY, key, 64);
    put_le(header + OFF_SIZE, size, 8);
    checksum(header, data, size, header + OFF_SUM);
    /* Through the one atomic writer: a fresh temporary file (O_EXCL, never a planted link, a
     * unique name for every thread and process), renamed into place only when complete. */
    pgd_outfile *f = NULL;
    int rc = pgd_outfile_open(path, &f, NULL);
    if (!rc)
        rc = pgd_outfile_write(f, header, HEADER_SIZE, NULL);
    if (!rc)
        rc = pgd_outfile_write(f, data, size, NULL);
    if (rc) {
        pgd_outfile_abort(f);
        return -1;
    }
    return pgd_outfile_commit(f, NULL) ? -1 : 0;
}

void pgd__cache_remove(const char *dir, const char *key)
{
    if (!key_valid(key))
        return;
    char path[4200];
    entry_path(path, sizeof path, dir, key);
    unlink(path);
}
