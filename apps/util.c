/* util.c — error printing and JSON helpers shared by the subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"

int app_fail(pgd_error *err)
{
    fprintf(stderr, "pagoda: error: %s\n", err ? pgd_error_message(err) : "unknown failure");
    pgd_error_free(err);
    return EXIT_RUNTIME;
}

int app_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("pagoda: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'pagoda %s--help'.\n", cmd ? cmd : "");
    return EXIT_USAGE;
}

json_t *app_device_json(const pgd_device_info *d)
{
    json_t *items = json_array();
    for (int i = 0; i < 3; i++)
        json_array_append_new(items, json_integer((json_int_t)d->max_work_item[i]));
    char sel[32];
    snprintf(sel, sizeof sel, "%d:%d", d->platform_index, d->device_index);
    return json_pack(
        "{s:s, s:i, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:i, s:i, s:I, s:I, s:I, "
        "s:s, s:I, s:o, s:b, s:b, s:b, s:b, s:b, s:i}",
        "selector", sel, "platform_index", d->platform_index, "device_index", d->device_index,
        "name", d->name, "vendor", d->vendor, "platform", d->platform, "platform_version",
        d->platform_version, "driver_version", d->driver_version, "version", d->version,
        "opencl_c_version", d->c_version, "type", pgd_device_type_name(d->type),
        "software_rasteriser", d->software_rasteriser, "compute_units", (int)d->compute_units,
        "clock_mhz", (int)d->clock_mhz, "global_mem_bytes", (json_int_t)d->global_mem,
        "max_alloc_bytes", (json_int_t)d->max_alloc, "local_mem_bytes", (json_int_t)d->local_mem,
        "local_mem_type", d->local_mem_dedicated ? "local" : "global", "max_work_group_size",
        (json_int_t)d->max_work_group, "max_work_item_sizes", items, "fp16", d->fp16, "fp64",
        d->fp64, "subgroups", d->subgroups, "images", d->images, "unified_memory",
        d->unified_memory, "preferred_vector_width_float", (int)d->pref_vector_float);
}

int app_write_json(json_t *value, const char *path)
{
    if (!path || !strcmp(path, "-")) {
        int rc = json_dumpf(value, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
        return rc == 0 && fflush(stdout) == 0 ? 0 : EXIT_RUNTIME;
    }
    /* Written next to the destination and renamed: an interrupted run leaves no half file. */
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return EXIT_RUNTIME;
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int rc = json_dump_file(value, tmp, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    if (rc != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "pagoda: error: cannot write '%s': %s\n", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return EXIT_RUNTIME;
    }
    free(tmp);
    return 0;
}
