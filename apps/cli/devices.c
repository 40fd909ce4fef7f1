/* devices.c — `pagoda devices`: every OpenCL device and its capabilities. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "commands.h"

static const char usage[] =
    "usage: pagoda devices [--json]\n"
    "\n"
    "Lists every OpenCL device of every platform with its capabilities. The first column is\n"
    "the P:D selector that --device and PAGODA_DEVICE accept.\n"
    "\n"
    "Device selection (--device SEL or PAGODA_DEVICE=SEL, for every subcommand):\n"
    "  P:D          platform index P, device index D, as listed here\n"
    "  cpu|gpu|accelerator   the best device of that type\n"
    "  TEXT         the first device whose device or platform name contains TEXT\n"
    "               (case-insensitive), e.g. 'pocl', 'llvmpipe', 'nvidia'\n"
    "  (unset)      the default: a GPU if present, else an accelerator, else the CPU device\n"
    "               with the most compute units; software rasterisers such as Mesa llvmpipe\n"
    "               rank below every real device. The default is marked with '*'.\n"
    "\n"
    "Options:\n"
    "  --json       print a JSON array of device objects instead of the table\n"
    "  -h, --help   show this help\n";

static void mib(char *buf, size_t size, uint64_t bytes)
{
    if (bytes >= ((uint64_t)1 << 30))
        snprintf(buf, size, "%.1f GiB", (double)bytes / (double)(1u << 30));
    else if (bytes >= ((uint64_t)1 << 20))
        snprintf(buf, size, "%.1f MiB", (double)bytes / (double)(1u << 20));
    else
        snprintf(buf, size, "%.0f KiB", (double)bytes / 1024.0);
}

int cmd_devices(int argc, char **argv)
{
    int json = 0;
    static const struct option opts[] = {
        {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'j')
            json = 1;
        else if (c == 'h') {
            fputs(usage, stdout);
            return EXIT_OK;
        } else
            return app_usage_error("devices ", "bad option");
    }
    if (optind < argc)
        return app_usage_error("devices ", "unexpected argument '%s'", argv[optind]);
    pgd_error *err = NULL;
    pgd_device_info *list = NULL;
    size_t n = 0;
    if (pgd_devices_list(&list, &n, &err))
        return app_fail(err);
    size_t def = 0;
    pgd_device_select(list, n, NULL, &def, NULL);
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            json_t *o = app_device_json(&list[i]);
            json_object_set_new(o, "default", json_boolean(i == def));
            json_array_append_new(arr, o);
        }
        int rc = app_write_json(arr, NULL);
        json_decref(arr);
        pgd_free(list);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        const pgd_device_info *d = &list[i];
        char g[32], a[32], l[32];
        mib(g, sizeof g, d->global_mem);
        mib(a, sizeof a, d->max_alloc);
        mib(l, sizeof l, d->local_mem);
        printf("%c %d:%d  %s\n", i == def ? '*' : ' ', d->platform_index, d->device_index, d->name);
        printf("      platform        %s (%s)\n", d->platform, d->platform_version);
        printf("      vendor          %s\n", d->vendor);
        printf("      type            %s%s\n", pgd_device_type_name(d->type),
               d->software_rasteriser ? " (software rasteriser: ranks last)" : "");
        printf("      version         %s; %s; driver %s\n", d->version, d->c_version,
               d->driver_version);
        printf("      compute units   %u at %u MHz\n", d->compute_units, d->clock_mhz);
        printf("      memory          global %s, max allocation %s, local %s (%s)\n", g, a, l,
               d->local_mem_dedicated ? "dedicated" : "emulated in global memory");
        printf("      work-group      max %zu, items %zu x %zu x %zu\n", d->max_work_group,
               d->max_work_item[0], d->max_work_item[1], d->max_work_item[2]);
        printf("      features        fp16 %s, fp64 %s, subgroups %s, images %s, unified "
               "memory %s, float vector width %u\n",
               d->fp16 ? "yes" : "no", d->fp64 ? "yes" : "no", d->subgroups ? "yes" : "no",
               d->images ? "yes" : "no", d->unified_memory ? "yes" : "no", d->pref_vector_float);
    }
    pgd_free(list);
    return EXIT_OK;
}
