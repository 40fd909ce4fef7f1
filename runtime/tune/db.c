/* db.c — the shipped parameter database: what a device runs before (or without) `pagoda tune`.
 *
 * Entries are known devices, device classes and one generic entry, looked up by what the
 * device reports (platform, vendor, device name and version, driver, preferred vector width):
 * the first known device that matches, else the first class, else the generic entry. A value an
 * entry leaves NULL is its parent's (known device -> class -> generic); the generic entry's are
 * the rules in code: GEMM parameters from the device's limits (gemm.c), the attention kernel
 * by device type (attention.c). What `pagoda tune` stores for a device overrides all of it, and
 * `pagoda tune --export` prints the line to add here for a device it has tuned.
 *
 * Measured entries say where and when; the GPU entries are starting guesses (no GPU on the
 * development machines): the tile the limits rule picks on NVIDIA and AMD, 64-item groups on
 * Intel and ARM GPUs. */
#include <ctype.h>
#include <string.h>

#include "tune.h"

#define CPU PGD_DEVICE_CPU
#define GPU PGD_DEVICE_GPU

/* name, kind, parent, type, rasteriser, platform, vendor, device, driver, vector width, gemm,
 * attention, prefetch, note */
const pgd__db_entry pgd__db[] = {
    /* known devices */
    {"pocl-avx512", PGD__DB_DEVICE, "pocl", CPU, 0, "PoCL", NULL, NULL, NULL, 16,
     "cpu:rm=6,vw=16,nv=4,ku=4", "kt:kw=16,rows=6", -1,
     "pagoda tune --export, PoCL 3.1, 2-core Xeon (AVX-512), 2026-12-07, 125 s: the workload "
     "22.7 ms against rm=4,nv=3's 24.9; paired with it, ResNet-50 batch 8 226 against 282 ms"},
    {"pocl-avx2", PGD__DB_DEVICE, "pocl", CPU, 0, "PoCL", NULL, NULL, NULL, 8,
     "cpu:rm=6,vw=8,nv=2,ku=4", "kt:kw=8,rows=4", -1, "the rules' values"},
    {"pocl-neon", PGD__DB_DEVICE, "pocl", CPU, 0, "PoCL", NULL, "aarch64", NULL, 4,
     "cpu:rm=6,vw=4,nv=2,ku=4", "kt:kw=16,rows=4", -1, "the rules' values"},
    {"intel-cpu", PGD__DB_DEVICE, "cpu", CPU, 0, "Intel(R) OpenCL", NULL, NULL, NULL, 0,
     "cpu:rm=6,vw=16,nv=4,ku=4", "kt:kw=16,rows=4", -1,
     "pagoda tune --export, Intel's CPU runtime 2026.22.10, 2-core Xeon, 2026-12-07, 143 s: "
     "the workload 21.4 ms against nv=2's 26.2 (and the rules' vw=4 ~3x slower); paired with "
     "it, ViT-B/16 batch 1 152 against 177 ms"},
    {"llvmpipe", PGD__DB_DEVICE, "software-rasteriser", CPU, 1, NULL, NULL, "llvmpipe", NULL, 0,
     "gpu:tsm=64,tsn=64,tsk=16,wptm=4,wptn=4", "rows", -1,
     "the limits rule's tile; the kernel's own work-group limit steps it down"},
    {"nvidia-gpu", PGD__DB_DEVICE, "gpu", GPU, -1, NULL, "NVIDIA", NULL, NULL, 0,
     "gpu:tsm=64,tsn=64,tsk=16,wptm=4,wptn=4", NULL, -1, "a starting guess"},
    {"amd-gpu", PGD__DB_DEVICE, "gpu", GPU, -1, NULL, "Advanced Micro Devices", NULL, NULL, 0,
     "gpu:tsm=64,tsn=64,tsk=16,wptm=4,wptn=4", NULL, -1, "a starting guess"},
    {"intel-gpu", PGD__DB_DEVICE, "gpu", GPU, -1, NULL, "Intel", NULL, NULL, 0,
     "gpu:tsm=32,tsn=32,tsk=16,wptm=4,wptn=4", NULL, -1, "a starting guess"},
    {"arm-gpu", PGD__DB_DEVICE, "gpu", GPU, -1, NULL, "ARM", NULL, NULL, 0,
     "gpu:tsm=32,tsn=32,tsk=16,wptm=4,wptn=4", NULL, -1, "a starting guess"},
    /* device classes */
    {"pocl", PGD__DB_CLASS, "cpu", CPU, 0, "PoCL", NULL, NULL, NULL, 0, NULL, NULL, 1,
     "PoCL's clang lowers __builtin_prefetch to the CPU's prefetch instructions (gemm.c)"},
    {"software-rasteriser", PGD__DB_CLASS, "generic", CPU, 1, NULL, NULL, NULL, NULL, 0, NULL,
     "rows", -1, "GPU-like limits on a CPU: gemm_gpu tiles, the rows attention kernel"},
    {"cpu", PGD__DB_CLASS, "generic", CPU, 0, NULL, NULL, NULL, NULL, 0, NULL, NULL, -1,
     "gemm_cpu at the device's vector width, the Kt attention kernel"},
    {"gpu", PGD__DB_CLASS, "generic", GPU, -1, NULL, NULL, NULL, NULL, 0, NULL, NULL, -1,
     "the largest gemm_gpu tile the limits allow, the tiled attention kernel"},
    /* the fallback: the rules */
    {"generic", PGD__DB_GENERIC, NULL, 0, -1, NULL, NULL, NULL, NULL, 0, NULL, NULL, 0,
     "the rules in code"},
};
const size_t pgd__db_count = sizeof pgd__db / sizeof pgd__db[0];

static int has_nocase(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = text; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)word[i]))
            i++;
        if (i == n)
            return 1;
    }
    return n == 0;
}

int pgd__db_matches(const pgd__db_entry *e, const pgd_device_info *dev)
{
    if (e->type && !(e->type & (unsigned)dev->type))
        return 0;
    if (e->rasteriser >= 0 && e->rasteriser != (dev->software_rasteriser != 0))
        return 0;
    if (e->platform && !has_nocase(dev->platform, e->platform) &&
        !has_nocase(dev->platform_version, e->platform))
        return 0;
    if (e->vendor && !has_nocase(dev->vendor, e->vendor))
        return 0;
    if (e->device && !has_nocase(dev->name, e->device) && !has_nocase(dev->version, e->device))
        return 0;
    if (e->driver && strncmp(dev->driver_version, e->driver, strlen(e->driver)) != 0)
        return 0;
    return !e->vector_width || e->vector_width == dev->pref_vector_float;
}

const pgd__db_entry *pgd__db_lookup_in(const pgd__db_entry *db, size_t n,
                                       const pgd_device_info *dev)
{
    for (int kind = PGD__DB_DEVICE; kind >= PGD__DB_GENERIC; kind--)
        for (size_t i = 0; i < n; i++)
            if (db[i].kind == kind && pgd__db_matches(&db[i], dev))
                return &db[i];
    return NULL;
}

const pgd__db_entry *pgd__db_find(const pgd__db_entry *db, size_t n, const char *name)
{
    for (size_t i = 0; name && i < n; i++)
        if (!strcmp(db[i].name, name))
            return &db[i];
    return NULL;
}

void pgd__db_resolve(const pgd__db_entry *db, size_t n, const pgd__db_entry *e, const char **gemm,
                     const char **attention, int *prefetch)
{
    *gemm = NULL;
    *attention = NULL;
    *prefetch = -1;
    /* at most n steps: a parent loop in a table cannot hang the lookup */
    for (size_t step = 0; e && step < n; step++, e = pgd__db_find(db, n, e->parent)) {
        if (!*gemm)
            *gemm = e->gemm;
        if (!*attention)
            *attention = e->attention;
        if (*prefetch < 0)
            *prefetch = e->prefetch;
    }
    if (*prefetch < 0)
        *prefetch = 0;
}
