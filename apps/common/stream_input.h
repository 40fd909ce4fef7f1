/* stream_input.h — shared by stream.c and stream_input.c only: the list of input images (and,
 * for `pagoda eval`, their true classes) that the stream runs over. */
#ifndef PAGODA_STREAM_INPUT_H
#define PAGODA_STREAM_INPUT_H

#include "app.h"
#include "stream.h"

typedef struct path_list {
    char **p;
    int *truth; /* pagoda eval: the class of each image (with_truth set) */
    int n, cap, with_truth, next_truth;
} path_list;

/* Appends a copy of path (with next_truth when with_truth): 0, or -1 out of memory. */
int list_add(path_list *l, const char *path);
void list_free(path_list *l);
/* Prints "out of host memory"; returns EXIT_RUNTIME. */
int oom(void);

/* pagoda eval: set by classify_stream_eval. */
struct stream_eval_mode {
    int on;
    const char *labels_map;
};
extern struct stream_eval_mode eval_mode;

/* The class names of an eval run: names.p[i] with class names.truth[i]. */
typedef struct eval_names {
    path_list map;   /* --labels-map: NAME INDEX lines */
    path_list names; /* the folders (or list labels) seen, with their classes */
} eval_names;

/* The images of the operands and --list (EXIT_* status; an empty result is an error). */
int gather_inputs(const classify_opts *o, path_list *l);
/* pagoda eval: the images of the ImageFolder roots and the labelled --list, with their classes
 * in l->truth and the class names in en (EXIT_* status). */
int gather_eval(const classify_opts *o, path_list *l, eval_names *en, int classes);

#endif
