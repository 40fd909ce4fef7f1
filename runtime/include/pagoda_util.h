/* pagoda_util.h — libpagoda's helpers that are not compute: strict number parsing, files
 * written completely or not at all, the one reader of input files, image orientation and
 * thumbnails, and the reference draw of sampled attention. The `pagoda` CLI and the models are
 * built on them; a program that only computes needs pagoda.h alone. Same conventions as
 * pagoda.h (statuses, pgd_error, pgd_free). */
#ifndef PAGODA_UTIL_H
#define PAGODA_UTIL_H

#include "pagoda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- strict number parsing ---------------------------------------------------------------- */

/* The parsers behind every PAGODA_* variable and the "P:D" device selector, offered so that a
 * program's own options refuse what the library refuses. The whole string is the number: no
 * leading or trailing space, no trailing characters, not empty, no '+' sign (except in an
 * exponent), no hexadecimal or octal (leading zeros are decimal: "010" is 10). A value out of
 * [min, max] is refused, never clamped, wrapped or truncated. Each returns PGD_OK and sets
 * *out, or PGD_ERR_INVALID_ARGUMENT and leaves *out unchanged. They set no pgd_error: the
 * caller knows what the text was for and names it in its own message. `s` NULL is refused.
 *
 *     int64_t k;
 *     if (pgd_parse_int64(arg, 1, 100000, &k)) fprintf(stderr, "--topk wants 1..100000\n");
 */

/* A decimal integer: an optional '-', then one or more digits; within [min, max]. */
PGD_API pgd_status pgd_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out);
/* Between min_count and max_count pgd_parse_int64 integers separated by the character `sep`
 * (not a digit, '-' or NUL), e.g. "56,56,256" with ','; each within [min, max]. out receives
 * them and *count how many (out has room for max_count). An empty item ("1,,2", ",1", "1,") or
 * one item more than max_count is refused; on error out may be partly written, *count is not. */
PGD_API pgd_status pgd_parse_int64_list(const char *s, char sep, int64_t min, int64_t max,
                                        int64_t *out, int min_count, int max_count, int *count);
/* A finite decimal floating-point number: an optional '-', digits with an optional '.' and
 * fraction (at least one digit in all: "5", "0.5", ".5", "5."), an optional exponent
 * e|E[+|-]digits; within [min, max]. Refuses "inf", "nan", hexadecimal floats and a value
 * whose magnitude overflows a double ("1e999"); one that underflows reads as 0 or a subnormal.
 * The decimal point is '.' as in the "C" locale; under a locale with a decimal comma the input
 * is refused rather than misread. */
PGD_API pgd_status pgd_parse_double(const char *s, double min, double max, double *out);
/* A byte count: digits with an optional binary suffix K, M or G (either case: 2^10, 2^20, 2^30),
 * e.g. "4096", "512M", "2g"; within [min, max] after scaling. A count whose scaled value does
 * not fit in 64 bits is refused. */
PGD_API pgd_status pgd_parse_bytes(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* ---- writing files: complete or not at all ------------------------------------------------- */

/* A file being written: every file Pagoda writes (.npy, the program cache, the GEMM tuning store)
 * and the CLI's outputs (JSON, heat maps, saved tensors) go through it.
 *
 *     pgd_outfile *f = NULL;
 *     int rc = pgd_outfile_open("out.json", &f, &err);        // checks the target, makes a temp
 *     if (!rc && json_dumpf(doc, pgd_outfile_get_stream(f), 0))   // or pgd_outfile_write
 *         rc = pgd_error_set(&err, PGD_ERR_IO, "out.json: cannot write");
 *     if (rc) pgd_outfile_abort(f);                           // the temp goes; NULL is fine
 *     else rc = pgd_outfile_commit(f, &err);                  // the file appears, complete
 *
 * The target may be absent or a regular file. Anything else that exists there — a directory, a
 * symbolic link, a FIFO, a socket, a device node such as /dev/null — is refused with
 * PGD_ERR_IO naming the path and what it is: the file replaces the target by rename(), and a
 * rename over a device node replaces the node (as root, /dev/null itself), so such targets are
 * never written, not even in place. Leave an output option out to discard that output.
 * The data goes to a new temporary file "<path>.tmp-<12 random characters>" in the target's
 * directory, created with O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC and mode 0600 (never an
 * existing file, never through a planted symbolic link; the name is unpredictable and unique
 * among threads and processes). Closing flushes and fsyncs it and gives it its final mode: the
 * replaced file's, else 0666 less the umask. Commit checks the target again and renames the
 * temporary file over it, so a reader, or a concurrent writer of the same path, only ever sees
 * a complete file (the last commit wins). */
typedef struct pgd_outfile pgd_outfile;

/* Checks `path` (see above) and creates its temporary file. On error *out is NULL and nothing
 * is left on disk. The caller keeps `path` (the handle holds a copy). */
PGD_API pgd_status pgd_outfile_open(const char *path, pgd_outfile **out, pgd_error **err);
/* Checks `path` as pgd_outfile_open would, creating nothing: for a command that checks every
 * output before its work starts. The target must be absent or a regular file (else PGD_ERR_IO
 * naming what it is), its name must not be a directory's ("out/", ".", "..") and, when it is
 * absent, its directory must exist. */
PGD_API pgd_status pgd_outfile_check(const char *path, pgd_error **err);
/* The temporary file as a stdio stream, for streaming writers (json_dumpf, an encoder's
 * callback); NULL after pgd_outfile_close. Write errors on it are found by pgd_outfile_close
 * (ferror). Owned by the handle: never fclose it. */
PGD_API FILE *pgd_outfile_get_stream(pgd_outfile *f);
/* The target path the handle was opened for (owned by the handle). */
PGD_API const char *pgd_outfile_get_path(const pgd_outfile *f);
/* Appends size bytes. A failure is remembered: pgd_outfile_close and commit then fail too. */
PGD_API pgd_status pgd_outfile_write(pgd_outfile *f, const void *data, size_t size,
                                     pgd_error **err);
/* Finishes the temporary file without renaming it: flush, fsync, final mode, close its
 * descriptor. For callers that stage many outputs and commit them together at the end of a
 * run without holding a descriptor each. Optional: commit does it when not done. The handle
 * stays valid either way (commit or abort it). */
PGD_API pgd_status pgd_outfile_close(pgd_outfile *f, pgd_error **err);
/* Closes (if not yet), checks the target again and renames the temporary file over it. Frees
 * the handle, also on failure, when the temporary file is removed and the target left as it
 * was. */
PGD_API pgd_status pgd_outfile_commit(pgd_outfile *f, pgd_error **err);
/* Removes the temporary file and frees the handle; the target is left as it was. NULL is a
 * no-op. */
PGD_API void pgd_outfile_abort(pgd_outfile *f);
/* The whole of it for data in memory: open, write, commit (abort on failure). */
PGD_API pgd_status pgd_file_write_atomic(const char *path, const void *data, size_t size,
                                         pgd_error **err);

/* ---- input files ------------------------------------------------------------------------- */

/* Reads the whole regular file at `path` into *data (the caller frees it with pgd_free()),
 * followed by one NUL byte that *size does not count, so text can be used as a C string. This is
 * the reader every Pagoda input goes through: the file is opened without blocking (a FIFO with
 * no writer cannot hang the open) and must be a regular file — a FIFO, a character device such
 * as /dev/zero, a directory or a socket is refused with PGD_ERR_IO naming the file and what it
 * is, before a byte is read. A file larger than max_bytes is PGD_ERR_TOO_LARGE, checked before
 * anything is allocated; a missing file is PGD_ERR_NOT_FOUND. The caller keeps `path`; on error
 * *data is NULL, *size 0 and nothing is allocated. */
PGD_API pgd_status pgd_file_read(const char *path, uint64_t max_bytes, void **data, size_t *size,
                                 pgd_error **err);

/* The SHA-256 of the regular file at `path` (pgd_file_read's rules: a FIFO or a device is
 * refused before a byte is read) as 64 lowercase hex digits and a NUL into hex, read in pieces
 * of 1 MiB whatever its size; *size (may be NULL) gets its length. For recording which weights
 * made a results file. */
PGD_API pgd_status pgd_file_sha256(const char *path, char hex[65], uint64_t *size, pgd_error **err);

/* ---- .npy output staged in a pgd_outfile ------------------------------------------------- */

/* As pgd_npy_write, into an open pgd_outfile that the caller then commits (or aborts): for
 * outputs staged until a whole run has succeeded. The caller keeps f, also on error. */
PGD_API pgd_status pgd_npy_write_to(pgd_outfile *f, const float *data, int ndim,
                                    const int64_t *shape, pgd_error **err);

/* ---- images: orientation, thumbnails, decoders --------------------------------------------- */

/* The EXIF Orientation (1..8) of an encoded JPEG, PNG or WebP in memory, as Pillow's
 * ImageOps.exif_transpose reads it (IFD0 tag 0x0112 of the first APP1 "Exif" segment, the eXIf
 * chunk, the EXIF chunk); 1 when there is none or it is unreadable. Loading never applies it
 * (Pillow and torchvision don't); pgd_image_apply_orientation does (pagoda --exif-rotate). */
PGD_API int pgd_image_exif_orientation(const void *data, size_t size);
/* A new image (*out, for pgd_image_destroy): img turned as Pillow's exif_transpose turns it for
 * `orientation` 1..8 (5..8 swap width and height; 1 copies). */
PGD_API pgd_status pgd_image_apply_orientation(const pgd_image *img, int orientation,
                                               pgd_image **out, pgd_error **err);
/* The decoder this build uses for `format` ("JPEG", "PNG", "BMP", "WebP"), e.g.
 * "libjpeg-turbo 2.1.5 (libjpeg API 62)", "libpng 1.6.39", "libwebp 1.2.4" or "stb_image"; NULL
 * for a format this build does not read. */
PGD_API const char *pgd_image_decoder(const char *format);

/* A copy of img whose longer side is at most max_side pixels (img's size when it is already
 * that small), resampled as Pillow's bilinear resize (antialiased): for keeping something to
 * draw maps over once the full image has been preprocessed and freed. The thumbnail remembers
 * its source's size (pgd_image_get_source_width/height) and pgd_image_preprocess_view answers for
 * the source's geometry; pgd_image_preprocess on a thumbnail preprocesses the thumbnail's
 * pixels, so preprocess the source. On success *out is a new image for pgd_image_destroy. */
PGD_API pgd_status pgd_image_thumbnail(const pgd_image *img, int max_side, pgd_image **out,
                                       pgd_error **err);
/* The size of the decoded image that img is a thumbnail of (img's own size when it is not one). */
PGD_API int pgd_image_get_source_width(const pgd_image *img);
PGD_API int pgd_image_get_source_height(const pgd_image *img);

/* ---- attention sampling reference ---------------------------------------------------------- */

/* The uniform number in [0, 1) that PGD_ATTENTION_SAMPLE draws for row i of head h of batch
 * entry b (24 random bits): key j is picked when it is the first whose cumulative softmax weight
 * exceeds u times the row's total. For references and tests. */
PGD_API float pgd_attention_uniform(uint64_t seed, int64_t b, int64_t h, int64_t i, int64_t heads,
                                    int64_t nq);

/* ---- the Hugging Face hub (pagoda pull) --------------------------------------------------- */

/* How pgd_hub_file reaches the hub and where it keeps files. Zero / NULL means the default in
 * every field; pgd_hub_options_from_env() fills it from huggingface_hub's variables, named per
 * field. The library never keeps the caller's strings beyond the call. */
typedef struct pgd_hub_options {
    const char *endpoint;  /* $HF_ENDPOINT; NULL: https://huggingface.co */
    const char *token;     /* $HF_TOKEN: sent as a Bearer token to the endpoint's host only */
    const char *cache_dir; /* $HF_HUB_CACHE; NULL: <hf_home>/hub */
    const char *hf_home;   /* $HF_HOME; NULL: $XDG_CACHE_HOME/huggingface, ~/.cache/huggingface */
    int offline;           /* $HF_HUB_OFFLINE=1: the cache only, the network is never touched */
    double timeout_s;      /* $HF_HUB_DOWNLOAD_TIMEOUT: connect and stall limit; 0: 10 s */
    int max_tries;         /* tries per request on 429, 5xx, timeouts, dropped connections; 0: 5 */
    /* Called as bytes arrive (total 0 when unknown); NULL: silent. */
    void (*progress)(void *user, const char *file, uint64_t done, uint64_t total);
    void *progress_user;
} pgd_hub_options;

/* Reads HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE, HF_HOME, HF_HUB_OFFLINE (1/0, true/false, yes/no,
 * on/off) and HF_HUB_DOWNLOAD_TIMEOUT (seconds) into *o, overwriting only the fields whose
 * variable is set and non-empty; a value that does not parse is PGD_ERR_INVALID_ARGUMENT naming
 * it, *o unchanged. Strings point into the environment. */
PGD_API pgd_status pgd_hub_options_from_env(pgd_hub_options *o, pgd_error **err);
/* The same from a NULL-terminated list of "NAME=VALUE" strings instead of the process's
 * environment (envp NULL: the environment), as pgd_ctx_options_from_envp. */
PGD_API pgd_status pgd_hub_options_from_envp(pgd_hub_options *o, const char *const *envp,
                                             pgd_error **err);

/* pgd_hub_file's flags. CACHE_FIRST: a file the cache holds for `revision` is returned without
 * asking the hub whether the revision moved (what `--weights hf:` wants on every run). */
#define PGD_HUB_CACHE_FIRST 1u

/* How pgd_hub_file found the file (*how). */
typedef enum pgd_hub_how {
    PGD_HUB_CACHED = 0,      /* the hub was asked; the cache already held that version */
    PGD_HUB_DOWNLOADED = 1,  /* downloaded (or a partial download finished) and verified */
    PGD_HUB_CACHE_ONLY = 2,  /* from the cache without asking (offline or CACHE_FIRST) */
    PGD_HUB_UNREACHABLE = 3, /* the hub could not be reached; the cached copy is returned */
} pgd_hub_how;

/* The file `file` of the model repository `repo` ("ORG/NAME" or "NAME") at `revision` (a
 * branch, tag or commit; NULL: "main"), in the cache layout huggingface_hub uses, so either
 * finds the other's files: models--ORG--NAME/blobs/<etag>, snapshots/<commit>/<file> a
 * relative symbolic link to the blob, refs/<revision> holding the commit. A download goes
 * into blobs/<etag>.incomplete, resumes one left by an earlier run with an HTTP Range
 * request, follows redirects (to a CDN), retries 429, 5xx and dropped connections, is checked
 * against the size and, for LFS files, the SHA-256 the hub names, and is renamed into place
 * only then. *path (the caller frees it with pgd_free) gets the snapshot path; *how (may be
 * NULL) how it was found. Errors name the repository, file and revision: PGD_ERR_NOT_FOUND
 * (404, or not cached offline), PGD_ERR_IO (401/403 with the HF_TOKEN advice, network, disk
 * full), PGD_ERR_FORMAT (checksum or size mismatch: the partial file is removed),
 * PGD_ERR_UNSUPPORTED (a build without libcurl, unless the cache has it). On error *path is
 * NULL. */
PGD_API pgd_status pgd_hub_file(const pgd_hub_options *o, const char *repo, const char *revision,
                                const char *file, unsigned flags, char **path, int *how,
                                pgd_error **err);

#ifdef __cplusplus
}
#endif

#endif /* PAGODA_UTIL_H */
