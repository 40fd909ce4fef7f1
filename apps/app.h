/* app.h — shared by the pagoda subcommands. */
#ifndef PAGODA_APP_H
#define PAGODA_APP_H

#include <jansson.h>

#include "pagoda.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* Prints "pagoda: error: <message>" to stderr (with the build log when the error has one) and
 * frees err. Returns EXIT_RUNTIME. */
int app_fail(pgd_error *err);
/* Prints "pagoda: error: <formatted>" and a hint to use --help; returns EXIT_USAGE. */
int app_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The device's capabilities as a JSON object (new reference). */
json_t *app_device_json(const pgd_device_info *d);
/* Writes a JSON value to a file via temp file + rename, or to stdout for "-" or NULL.
 * Returns 0 or prints an error and returns EXIT_RUNTIME. */
int app_write_json(json_t *value, const char *path);

int cmd_devices(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_vit(int argc, char **argv);

#endif
