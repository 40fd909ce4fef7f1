/* classify_family.h — the command-line side of a model family: what `pagoda classify` (and its
 * aliases `pagoda vit` and `pagoda nonlocal`) need of a family beyond its model_family entry
 * (family.h, which loads, runs and frees the model): its own options, how it opens weights or
 * makes seeded random ones, how it describes itself, its maps and its JSON. One driver
 * (classify_cmd.c) parses the options once, opens the checkpoint once, and runs every family
 * through the same pipeline for one batch, a stream, MPI and eval. A family's file fills one
 * cli_family; adding a family is that file and one line in classify_cmd.c's table. */
#ifndef PAGODA_CLASSIFY_FAMILY_H
#define PAGODA_CLASSIFY_FAMILY_H

#include "classify.h"
#include "family.h"

/* The options a family may own (getopt codes above the shared options' 0x100..0x1ff). */
enum {
    CLI_RANDOM = 0x200, /* --random SIZE */
    CLI_WEIGHTS,        /* --weights FILE */
    CLI_PREPROCESS,     /* --preprocess P */
    CLI_FAMILY,         /* --family F (classify only) */
    CLI_ATTENTION,      /* --attention soft|topk:K|sample:SEED */
    CLI_ATTENTION_MAP,  /* --attention-map OUT.png */
    CLI_HEADS,          /* --heads H */
    CLI_NONLOCAL,       /* --nonlocal SPEC */
    CLI_MODE,           /* --mode M */
    CLI_SUBSAMPLE,      /* --subsample */
    CLI_NO_SUBSAMPLE,   /* --no-subsample */
    CLI_AFFINITY_MAP,   /* --affinity-map OUT.png */
    CLI_QUERY,          /* --query X,Y */
    CLI_SIZE,           /* --size S */
};

typedef struct cli_state cli_state;

typedef struct cli_family {
    const model_family *family;
    const char *names[3]; /* what --family takes ("vit", "deit"), NULL-ended */
    const char *cmd;      /* the prefix of its messages: "vit ", "nonlocal ", "classify " */
    const char *label;    /* "ViT", "MLP-Mixer": in "--x is not an option of the ViT family" */
    /* The weights file looked up (app_weights_or_default) when neither --weights nor --random
     * is given; NULL: the family's seeded random weights then. */
    const char *default_weights;
    const int *options;         /* the CLI_* codes it takes, 0-ended (the shared options always) */
    size_t own_size;            /* the bytes of its own state (s->own, zeroed, then init) */
    void (*init)(cli_state *s); /* defaults; may be NULL */
    int (*option)(cli_state *s, int c, const char *arg); /* its own codes: EXIT_OK/_USAGE */
    /* The options together, once all are read (EXIT_OK or EXIT_USAGE); sets o.map_option,
     * o.map_png and o.map_tags when the family draws maps. May be NULL. */
    int (*check)(cli_state *s);
    /* The configuration into s->cfg from s->src (the driver opened the weights file: --weights
     * or the default one), or seeded random weights made into s->src from s->random. Sets s->preset
     * when it is -1, s->side_h/side_w (the synthetic image's size), s->classes, and s->random_label
     * when the weights are random. Prints the error and returns the exit status on failure. */
    int (*open)(cli_state *s);
    void (*describe)(const cli_state *s); /* the note on stderr before a run (not with --json) */
    /* The results file's model line (stream_model.label): every option that changes results. */
    void (*stream_label)(const cli_state *s, char *buf, size_t size);
    /* The one-batch forward with the family's maps: r->logits, the stage times t[] and the
     * images per pass *split. NULL: the family's forward with no maps. */
    int (*forward)(cli_state *s, void *model, classify_run *r, double *t, int *split,
                   pgd_error **err);
    int (*draw)(cli_state *s, classify_run *r); /* the maps, after the checks; may be NULL */
    json_t *(*json)(const cli_state *s);        /* the model's JSON (a new reference) */
    const classify_stage *stages;               /* the stage times' names */
    int nstages;
    void (*release)(cli_state *s); /* frees what the family allocated in s->own; may be NULL */
} cli_family;

struct cli_state {
    classify_opts o;
    const cli_family *cf;
    const char *weights, *random; /* --weights FILE, --random SIZE */
    int preset;                   /* --preprocess (pgd_preprocess); -1: the family's default */
    classify_attention attention; /* --attention */
    model_source src;             /* the checkpoint (opened once), or the random weights */
    void *cfg;                    /* the family's configuration (family->cfg_size bytes) */
    int side_h, side_w, classes;
    char random_label[48];   /* what the results file records of random weights */
    char default_path[4096]; /* the default weights file's path, when used */
    void *own;               /* the family's own state */
};

extern const cli_family cli_vit, cli_resnet, cli_swin, cli_mixer, cli_onnx;

/* Runs `pagoda classify` (fixed NULL: the family from --family or the checkpoint) or a family's
 * own command (fixed: `pagoda vit`, `pagoda nonlocal`) with the arguments after the command
 * name; `usage` is its --help. Returns the exit status. */
int classify_family_main(const cli_family *fixed, const char *help, int argc, char **argv);

#endif
