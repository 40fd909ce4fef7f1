/* classify.h — the path every classification command shares (`pagoda vit`, `pagoda nonlocal`
 * and the commands after them): the common options, the input (images, a preprocessed .npy
 * batch, or a synthetic image), the context, the label check, and the outputs (batch-split
 * note, saved input and logits, heat maps over the images, top-k report, profile). A command
 * adds only what is its model's own: weights, configuration, forward pass, JSON details. */
#ifndef PAGODA_CLASSIFY_H
#define PAGODA_CLASSIFY_H

#include <getopt.h>

#include "app.h"
#include "model.h" /* model_probe */
#include "outset.h"

/* The options every classification command accepts, parsed by classify_option. */
typedef struct classify_opts {
    const char *cmd; /* "vit", for messages */
    const char *device, *input, *save_input, *save_logits, *labels_path;
    int topk, json, profile;
    int allow_nonfinite; /* --allow-nonfinite: NaN/inf inputs and logits pass (printed as nan) */
    int fast_decode;     /* --fast-decode: JPEGs decoded scaled (pgd_image_load_scaled) */
    int exif_rotate;     /* --exif-rotate: images turned upright by their EXIF orientation */
    char **images;       /* the image arguments */
    int nimages;
    /* streaming (stream.h): --output, --list, --resume, --recursive, --jobs, --batch, --strict,
     * --quiet, --device-per-rank; jobs and batch 0 when not given */
    const char *output, *list;
    int resume, recursive, jobs, batch, strict, quiet, device_per_rank;
    int mpi_dynamic; /* --mpi-schedule dynamic */
    /* The command's heat maps, set by it before classify_begin so that their files are checked
     * with the other outputs before any work: the option (e.g. "--attention-map"), its value
     * (NULL: none) and the tags of the maps drawn per image (classify_draw_maps). */
    const char *map_option, *map_png, *map_tags[2];
} classify_opts;

/* The end of every classification command's --help: the shared options' lines and the rule of
 * the output files. */
#define CLASSIFY_HELP_TAIL                                                                         \
    "  --profile           per-kernel timings at the end\n"                                        \
    "  --allow-nonfinite   run inputs and print logits that hold NaN or infinity (else an\n"       \
    "                      error naming the input, or the stage where they first appear)\n"        \
    "  --fast-decode       decode JPEGs at 1/2, 1/4 or 1/8 scale inside libjpeg's IDCT, the\n"     \
    "                      shorter side kept >= the preset's resize target: much faster on\n"      \
    "                      big photos, NOT bit-identical to PIL/torchvision\n"                     \
    "  --exif-rotate       turn each image upright by its EXIF orientation first, as PIL's\n"      \
    "                      ImageOps.exif_transpose (default: ignored, as PIL and "                 \
    "torchvision)\n" APP_WEIGHTS_DTYPE_HELP APP_PRECISION_HELP                                     \
    "  --output F          stream: one line per image, written as the batches finish, to F\n"      \
    "                      (.jsonl: JSON lines; .csv: CSV); without it, JSON lines on stdout\n"    \
    "  --list F            stream the paths listed in F, one per line ('-': stdin)\n"              \
    "  --recursive         a directory stands for its images in sub-directories too\n"             \
    "  --batch B           stream in batches of B images (default 8)\n"                            \
    "  --jobs N            decoding threads (default: the number of cores)\n"                      \
    "  --resume            skip the images already in --output (after a crash or Ctrl-C);\n"       \
    "                      the file's first line must name the same model and options\n"           \
    "  --strict            an unreadable image stops the stream (default: an error line)\n"        \
    "  --quiet             no progress line\n"                                                     \
    "  --device-per-rank   under mpirun: device (local rank mod count) of the --device list\n"     \
    "  --mpi-schedule S    under mpirun: static (batch j on rank j mod R, default) or dynamic\n"   \
    "                      (rank 0 hands out batches as ranks ask: unequal devices)\n"             \
    "  -h, --help          show this help\n"                                                       \
    "\n"                                                                                           \
    "The output files (--save-input, --save-logits, the maps) appear together when the whole\n"    \
    "run has succeeded, or none does. Each must be absent or a regular file: a directory, a\n"     \
    "symbolic link, a FIFO or a device (even /dev/null) is refused; leave an option out to\n"      \
    "discard that output. No two may be one file; all are checked before the run starts.\n"        \
    "\n"                                                                                           \
    "Streaming: a directory (its .jpg, .jpeg, .png, .bmp, .webp files, sorted), a glob pattern\n"  \
    "('imgs/*.jpg', quoted), --list, --output, --batch or several devices (--device all, or\n"     \
    "P:D,P:D) stream the images: decoded on --jobs threads while the device runs the previous\n"   \
    "batch, memory bounded by the batch, whatever the number of images. SIGINT finishes the\n"     \
    "running batch, writes it and exits with 130; --resume continues. --output is locked while\n"  \
    "a run writes it (a second run is refused) and left as it was by a run that fails before\n"    \
    "its first results.\n"

#define CLASSIFY_OPTION_COUNT 23

/* The attention a transformer's blocks use, from --attention: "soft", "topk:K" (K >= 1) or
 * "sample:SEED" (SEED a whole number from 0 to 2^63 - 1). */
typedef struct classify_attention {
    pgd_attention_mode mode;
    int64_t topk;
    uint64_t seed;
} classify_attention;
/* Parses --attention's value into *a; prints a usage error for `cmd` and returns EXIT_USAGE on
 * a bad one. */
int classify_parse_attention(const char *cmd, const char *arg, classify_attention *a);
/* "soft", "topk:K" or "sample:SEED" into buf. */
const char *classify_attention_str(const classify_attention *a, char *buf, size_t size);

/* Defaults: topk 5, nothing else set. */
void classify_opts_init(classify_opts *o, const char *cmd);

/* A command's own option handler: EXIT_OK, or EXIT_USAGE after printing a usage error. */
typedef int (*classify_own_fn)(void *cmd, int c, const char *arg);
/* Parses argv with getopt_long over the command's n_own options `own` (without the zero
 * entry; --help as 'h' prints `usage`) plus the shared ones (--device, --input, --save-input,
 * --save-logits, --labels, --topk, --json, --profile, --allow-nonfinite, --fast-decode,
 * --exif-rotate) into o; every other option goes to parse_own(cmd, c, optarg). -1 when --help
 * printed the usage, else EXIT_OK or EXIT_USAGE. */
int classify_parse(classify_opts *o, int argc, char **argv, const struct option *own, size_t n_own,
                   const char *usage, classify_own_fn parse_own, void *cmd);
/* Takes the operands after the options; with `map_flag` (e.g. "--attention-map") set by the
 * command, maps need images. Prints a usage error and returns EXIT_USAGE when inconsistent. */
int classify_operands(classify_opts *o, int argc, char **argv, const char *map_flag);

/* What a run holds: the input batch, the decoded images, the context, labels and logits. */
typedef struct classify_run {
    float *x;  /* [B, 3, H, W] */
    int x_npy; /* x is pgd_npy_read's (released by pgd_free), not malloc's */
    int64_t shape[4];
    int B, H, W;
    pgd_image **loaded; /* the decoded images (for maps), NULL for --input or synthetic */
    pgd_ctx *ctx;
    app_labels labels;
    float *logits; /* [B, classes] after classify_forward_ready */
    int classes;
    outset outputs; /* claimed by classify_begin, committed by classify_finish */
} classify_run;

/* Claims every output of the run first (--save-input, --save-logits, the maps: outset.h), so
 * that a bad or clashing output fails before any work. Then reads the input: --input F.npy
 * ([B, 3, H, W]), else the images preprocessed with `preset`, else one synthetic image of
 * side_h x side_w. A NaN or infinite value in it is refused (naming the input and the first bad
 * element [b, c, y, x]) unless --allow-nonfinite. Then opens the context (device, options from
 * the environment, profiling) and loads the labels, checked against `classes`; without --labels
 * a model of 1000 classes is taken to be ImageNet-1k's, which a note on stderr says (and
 * classify_emit's JSON under "assumed" "labels"). Returns EXIT_OK
 * or the exit status after printing the error; classify_free releases what was made either way. */
int classify_begin(const classify_opts *o, pgd_preprocess preset, int side_h, int side_w,
                   int classes, classify_run *r);
/* Stages `path`, an output of `option` (claimed by classify_begin, or now), in the run's
 * output set (outset.h), renamed into place by classify_finish. `note` (may be NULL) is printed
 * at commit as "<note> written to <path>" unless --json. The run owns *f: write into it, never
 * commit or abort it. Prints the error and returns EXIT_RUNTIME on failure. */
int classify_output_open(classify_run *r, const char *option, const char *path, const char *note,
                         pgd_outfile **f);
/* Stages --save-input (after the model loaded) and allocates the logits. */
int classify_prepare(const classify_opts *o, classify_run *r);
/* The model's hook for non-finite logits: runs one image [1, 3, H, W] again with every stage
 * checked and names the first stage whose output is not finite in p->stage (vit_find_nonfinite,
 * resnet_find_nonfinite). */
typedef int (*classify_diagnose_fn)(void *model, const float *image, int H, int W, model_probe *p,
                                    pgd_error **err);
/* After the forward pass, before anything is written: logits that hold a NaN or an infinity are
 * an error (EXIT_RUNTIME) naming the image, the class and the stage where non-finite values
 * first appear (found through `diagnose`, only then: the normal path checks the logits alone),
 * unless --allow-nonfinite. */
int classify_check_logits(const classify_opts *o, classify_run *r, classify_diagnose_fn diagnose,
                          void *model);
/* After the forward pass: the batch-split note (`split` images per pass), stages --save-logits. */
int classify_after_forward(const classify_opts *o, classify_run *r, int split);
/* Stages maps[b] (mw x mh, over the crop `preset` shows) drawn onto image b as
 * OUT<tag>[-b].png, each named at commit (unless --json) as "<what> of IMAGE". */
int classify_draw_maps(const classify_opts *o, classify_run *r, const char *png, const char *tag,
                       const float *maps, int mw, int mh, pgd_preprocess preset, const char *what);
/* The top-k report: printed, or with --json returned as the "results" array (new reference). */
json_t *classify_report(const classify_opts *o, classify_run *r);
/* One stage of a model's timing: its JSON key and its words in the printed line. */
typedef struct classify_stage {
    const char *key, *label;
} classify_stage;
/* The report of a run: the top-k of every image, then the line "B image(s) HxW on DEVICE:
 * label t ms, ..." — or with --json one document {weights, device, model, results, times_ms}
 * on stdout. `model` (a new reference, taken; NULL without --json) describes the model. */
int classify_emit(const classify_opts *o, classify_run *r, const char *weights, json_t *model,
                  const classify_stage *stages, const double *t, int n);
/* Prints the kernel profile when --profile asked for it, then commits the output set: the
 * last step of a successful run. */
int classify_finish(const classify_opts *o, classify_run *r);
/* Releases the run; outputs not committed are removed. */
void classify_free(classify_run *r);

#endif
