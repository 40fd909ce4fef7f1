/* fuzz_file.h — for targets whose reader takes a path (gat_graph_load, memnet_story_load,
 * the DETR config.json reader): the input written to one temporary file per process, rewritten
 * for each input and removed at exit. Through the real open/read path, as the CLI reads them. */
#ifndef PGD_FUZZ_FILE_H
#define PGD_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_file_path[4096];

static void fuzz_file_remove(void)
{
    if (fuzz_file_path[0])
        unlink(fuzz_file_path);
}

/* The path of a file holding data[0..size) (suffix kept: readers may look at the name), or
 * NULL when no temporary file can be written (the input is then skipped). */
static inline const char *fuzz_file_write(const uint8_t *data, size_t size, const char *suffix)
{
    if (!fuzz_file_path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(fuzz_file_path, sizeof fuzz_file_path, "%s/pgd-fuzz-%ld-XXXXXX%s",
                 dir && dir[0] ? dir : "/tmp", (long)getpid(), suffix);
        int fd = mkstemps(fuzz_file_path, (int)strlen(suffix));
        if (fd < 0) {
            fuzz_file_path[0] = '\0';
            return NULL;
        }
        close(fd);
        atexit(fuzz_file_remove);
    }
    FILE *f = fopen(fuzz_file_path, "wb");
    if (!f)
        return NULL;
    size_t put = size ? fwrite(data, 1, size, f) : 0;
    if (fclose(f) != 0 || put != size)
        return NULL;
    return fuzz_file_path;
}

static char fuzz_dir_path[4096], fuzz_dir_file[4200];

static void fuzz_dir_remove(void)
{
    if (fuzz_dir_file[0])
        unlink(fuzz_dir_file);
    if (fuzz_dir_path[0])
        rmdir(fuzz_dir_path);
}

/* For readers that find a side file by its name beside another (config.json beside the
 * weights): data[0..size) written as `name` in one private temporary directory per process.
 * Returns the directory, or NULL (the input is then skipped). One name per process. */
static inline const char *fuzz_dir_write(const char *name, const uint8_t *data, size_t size)
{
    if (!fuzz_dir_path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/pgd-fuzz-XXXXXX",
                 dir && dir[0] ? dir : "/tmp");
        if (!mkdtemp(fuzz_dir_path)) {
            fuzz_dir_path[0] = '\0';
            return NULL;
        }
        snprintf(fuzz_dir_file, sizeof fuzz_dir_file, "%s/%s", fuzz_dir_path, name);
        atexit(fuzz_dir_remove);
    }
    FILE *f = fopen(fuzz_dir_file, "wb");
    if (!f)
        return NULL;
    size_t put = size ? fwrite(data, 1, size, f) : 0;
    if (fclose(f) != 0 || put != size)
        return NULL;
    return fuzz_dir_path;
}

#endif
