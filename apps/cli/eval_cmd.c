/* eval_cmd.c — `pagoda eval`: the accuracy of a classifier over a labelled data set, streamed
 * (stream.c) with every option of `pagoda classify`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "commands.h"
#include "stream.h"

static const char usage[] =
    "usage: pagoda eval [--weights FILE | --family F --random SIZE] [--labels-map FILE]\n"
    "                   [--list FILE] [--json] [classify options] [DIR...]\n"
    "\n"
    "Measures a classifier's accuracy: top-1, top-5, per class, and the most frequent\n"
    "confusions. The model and its options are those of 'pagoda classify' (the family is\n"
    "detected from the checkpoint); the images stream as there (--batch, --jobs, --device all,\n"
    "--output F.jsonl for one line per image with its \"label\", ...).\n"
    "\n"
    "The data set:\n"
    "  DIR                 an ImageFolder layout (torchvision's): one sub-directory per class,\n"
    "                      its images at any depth below; classes numbered in the sorted order\n"
    "                      of the sub-directories, unless --labels-map\n"
    "  --labels-map FILE   'NAME INDEX' lines: the model's class INDEX of each sub-directory\n"
    "                      NAME (e.g. 'n01440764 0' for ImageNet folders); each NAME once, at\n"
    "                      least one line\n"
    "  --list FILE         'PATH LABEL' lines ('-': stdin), LABEL a class index or a NAME of\n"
    "                      the labels map; spaces and tabs at either end of a line are ignored\n"
    "  --json              the report as one JSON document on stdout\n"
    "\n"
    "Images that cannot be read are counted apart, not as errors of the model. A symbolic\n"
    "link back up a folder tree (a loop) is skipped with a warning.\n";

int cmd_eval(int argc, char **argv)
{
    const char *map = NULL;
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) {
        fprintf(stderr, "pagoda: error: out of host memory\n");
        return EXIT_RUNTIME;
    }
    int n = 0, rest = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!rest && !strcmp(a, "--"))
            rest = 1;
        if (!rest && i && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
            free(args);
            fputs(usage, stdout);
            return EXIT_OK;
        }
        if (!rest && !strcmp(a, "--labels-map")) {
            if (i + 1 == argc) {
                free(args);
                return app_usage_error("eval ", "--labels-map needs a file");
            }
            map = argv[++i];
            continue;
        }
        if (!rest && !strncmp(a, "--labels-map=", 13)) {
            map = a + 13;
            continue;
        }
        args[n++] = argv[i];
    }
    classify_stream_eval(map);
    int rc = cmd_classify(n, args);
    free(args);
    return rc;
}
