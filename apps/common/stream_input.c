/* stream_input.c — the input side of the stream (stream.c): the list of images from operands
 * (files, directories, --recursive trees, glob patterns) and --list files, and for `pagoda
 * eval` the true class of each image (ImageFolder layouts, labelled lists, --labels-map). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stream_input.h"

/* ---- the input list ---- */

int list_add(path_list *l, const char *path)
{
    if (l->n == INT32_MAX - 1)
        return -1;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        char **p = realloc(l->p, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        l->p = p;
        if (l->with_truth) {
            int *t = realloc(l->truth, (size_t)cap * sizeof *t);
            if (!t)
                return -1;
            l->truth = t;
        }
        l->cap = cap;
    }
    if (l->with_truth)
        l->truth[l->n] = l->next_truth;
    if (!(l->p[l->n] = strdup(path)))
        return -1;
    l->n++;
    return 0;
}

void list_free(path_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->p[i]);
    free(l->p);
    free(l->truth);
    memset(l, 0, sizeof *l);
}

/* An image file by its name: what a directory stands for. */
static int image_name(const char *n)
{
    static const char *const ext[] = {".jpg", ".jpeg", ".png", ".bmp", ".webp"};
    const char *dot = strrchr(n, '.');
    for (size_t i = 0; dot && i < sizeof ext / sizeof *ext; i++)
        if (!strcasecmp(dot, ext[i]))
            return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int oom(void)
{
    fprintf(stderr, "pagoda: error: out of host memory\n");
    return EXIT_RUNTIME;
}

/* The directories from an operand down to the one being listed, by identity: a symbolic link
 * that leads back to one of them is a loop, skipped (with a warning) instead of followed until
 * the path is 64 levels deep. */
typedef struct dir_chain {
    dev_t dev;
    ino_t ino;
    int depth;
    const char *path;
    const struct dir_chain *up;
} dir_chain;

/* The image files of a directory, sorted by name; sub-directories too with --recursive (each
 * at its place in the order of names). Hidden entries (".name") are skipped. `up`: the
 * directories above (NULL for an operand). */
static int add_dir(path_list *l, const char *dir, int recursive, const dir_chain *up)
{
    char shown[1024], again[1024];
    dir_chain here = {0, 0, up ? up->depth + 1 : 0, dir, up};
    struct stat st;
    if (stat(dir, &st) == 0) { /* else opendir says why */
        here.dev = st.st_dev, here.ino = st.st_ino;
        for (const dir_chain *a = up; a; a = a->up)
            if (a->dev == st.st_dev && a->ino == st.st_ino) {
                fprintf(stderr,
                        "pagoda: warning: %s: skipped: a symbolic link loop (the "
                        "directory %s again)\n",
                        app_term_text(dir, shown, sizeof shown),
                        app_term_text(a->path, again, sizeof again));
                return EXIT_OK;
            }
    }
    if (here.depth > 64) {
        fprintf(stderr, "pagoda: error: %s: directories nested more than 64 deep\n",
                app_term_text(dir, shown, sizeof shown));
        return EXIT_RUNTIME;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "pagoda: error: %s: cannot read the directory: %s\n",
                app_term_text(dir, shown, sizeof shown), strerror(errno));
        return EXIT_RUNTIME;
    }
    path_list names = {0};
    int rc = EXIT_OK;
    for (struct dirent *e; !rc && (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && list_add(&names, e->d_name))
            rc = oom();
    closedir(d);
    if (names.n)
        qsort(names.p, (size_t)names.n, sizeof *names.p, cmp_str);
    size_t dl = strlen(dir);
    int slash = dl && dir[dl - 1] == '/';
    for (int i = 0; !rc && i < names.n; i++) {
        size_t len = dl + strlen(names.p[i]) + 2;
        char *full = malloc(len);
        if (!full) {
            rc = oom();
            break;
        }
        snprintf(full, len, "%s%s%s", dir, slash ? "" : "/", names.p[i]);
        if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (recursive)
                rc = add_dir(l, full, recursive, &here);
        } else if (image_name(names.p[i]) && list_add(l, full)) {
            rc = oom();
        }
        free(full);
    }
    list_free(&names);
    return rc;
}

/* One operand: a directory, a glob pattern that names no file itself, or a file (taken as
 * given: whether it is an image is found when it is decoded). */
static int add_operand(path_list *l, const char *arg, int recursive)
{
    struct stat st;
    char shown[1024];
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
        int before = l->n, rc = add_dir(l, arg, recursive, NULL);
        if (!rc && l->n == before) {
            fprintf(stderr,
                    "pagoda: error: %s: a directory with no image files (.jpg, .jpeg, "
                    ".png, .bmp, .webp)%s\n",
                    app_term_text(arg, shown, sizeof shown),
                    recursive ? "" : " (--recursive looks into its sub-directories)");
            return EXIT_RUNTIME;
        }
        return rc;
    }
    if (lstat(arg, &st) != 0 && strpbrk(arg, "*?[")) {
        glob_t g;
        int grc = glob(arg, 0, NULL, &g);
        if (grc == GLOB_NOMATCH) {
            fprintf(stderr, "pagoda: error: %s: the pattern matches no file\n",
                    app_term_text(arg, shown, sizeof shown));
            return EXIT_RUNTIME;
        }
        if (grc) {
            globfree(&g);
            return oom();
        }
        int rc = EXIT_OK;
        for (size_t i = 0; !rc && i < g.gl_pathc; i++) {
            const char *p = g.gl_pathv[i];
            if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
                rc = add_dir(l, p, recursive, NULL);
            else if (list_add(l, p))
                rc = oom();
        }
        globfree(&g);
        return rc;
    }
    return list_add(l, arg) ? oom() : EXIT_OK;
}

/* Opens a text input (a list, a labels map) for reading: a regular file only, checked without
 * blocking (a FIFO with no writer would hang fopen), or stdin for "-". NULL after an error. */
static FILE *open_text(const char *path, const char *what)
{
    char shown[1024];
    if (!strcmp(path, "-"))
        return stdin;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const char *kind = fd < 0                 ? strerror(errno)
                           : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe), not a regular file"
                           : S_ISCHR(st.st_mode)  ? "a character device, not a regular file"
                           : S_ISDIR(st.st_mode)  ? "a directory, not a regular file"
                                                  : "not a regular file";
        fprintf(stderr, "pagoda: error: %s %s: %s\n", what,
                app_term_text(path, shown, sizeof shown), kind);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "r");
    if (!f)
        close(fd);
    return f;
}

/* --list F: one path per line ('-': stdin); a trailing CR and empty lines are dropped. With
 * l->with_truth, l->truth gets each kept line's number (for messages naming it). */
static int add_list_file(path_list *l, const char *path)
{
    char shown[1024];
    FILE *f = open_text(path, "--list");
    if (!f)
        return EXIT_RUNTIME;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = EXIT_OK;
    long lineno = 0;
    while (!rc && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if ((size_t)n != strlen(line)) {
            fprintf(stderr, "pagoda: error: %s: line %ld holds a NUL byte\n",
                    app_term_text(path, shown, sizeof shown), lineno);
            rc = EXIT_RUNTIME;
            break;
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        l->next_truth = lineno < INT_MAX ? (int)lineno : INT_MAX;
        if (n && list_add(l, line))
            rc = oom();
    }
    free(line);
    if (f != stdin)
        fclose(f);
    return rc;
}

/* ---- pagoda eval: the true class of each image, from an ImageFolder layout or a list ---- */

struct stream_eval_mode eval_mode;

void classify_stream_eval(const char *labels_map)
{
    eval_mode.on = 1;
    eval_mode.labels_map = labels_map;
}

/* A whole number from 0 to classes - 1, or -1. */
static int class_number(const char *t, int classes)
{
    int64_t v;
    return pgd_parse_int64(t, 0, classes - 1, &v) ? -1 : (int)v;
}

/* A labels map entry and the line it came from, to find names listed twice. */
typedef struct map_entry {
    const char *name;
    long line;
} map_entry;

static int cmp_entry(const void *a, const void *b)
{
    const map_entry *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* A labels map must name each folder once (a second line for a name would be ignored) and
 * name at least one (an empty map would leave the folders numbered by position, silently).
 * `lines` [map->n]: the line of each entry. */
static int check_labels_map(const char *path, const path_list *map, const long *lines)
{
    char shown[1024], name[1024];
    app_term_text(path, shown, sizeof shown);
    if (!map->n) {
        fprintf(stderr,
                "pagoda: error: %s: no 'NAME INDEX' lines (an empty labels map would "
                "leave the classes numbered by the folders' order)\n",
                shown);
        return EXIT_RUNTIME;
    }
    map_entry *e = malloc((size_t)map->n * sizeof *e);
    if (!e)
        return oom();
    for (int i = 0; i < map->n; i++)
        e[i].name = map->p[i], e[i].line = lines[i];
    qsort(e, (size_t)map->n, sizeof *e, cmp_entry);
    int rc = EXIT_OK;
    for (int i = 1; i < map->n && !rc; i++)
        if (!strcmp(e[i].name, e[i - 1].name)) {
            fprintf(stderr,
                    "pagoda: error: %s:%ld: '%s' is listed already on line %ld (a labels "
                    "map names each folder once)\n",
                    shown, e[i].line, app_term_text(e[i].name, name, sizeof name), e[i - 1].line);
            rc = EXIT_RUNTIME;
        }
    free(e);
    return rc;
}

/* --labels-map: 'NAME INDEX' lines; blank lines skipped, spaces and tabs around the words
 * ignored. */
static int read_labels_map(const char *path, int classes, path_list *map)
{
    char shown[1024];
    FILE *f = open_text(path, "--labels-map");
    if (!f)
        return EXIT_RUNTIME;
    map->with_truth = 1;
    char *line = NULL;
    size_t cap = 0;
    long no = 0, *lines = NULL;
    int rc = EXIT_OK;
    while (!rc && getline(&line, &cap, f) >= 0) {
        no++;
        char *save = NULL, *name = strtok_r(line, " \t\r\n", &save);
        char *num = name ? strtok_r(NULL, " \t\r\n", &save) : NULL;
        if (!name)
            continue;
        int c = num && !strtok_r(NULL, " \t\r\n", &save) ? class_number(num, classes) : -1;
        if (c < 0) {
            fprintf(stderr,
                    "pagoda: error: %s:%ld: want 'NAME INDEX' with INDEX from 0 "
                    "to %d (the model's classes)\n",
                    app_term_text(path, shown, sizeof shown), no, classes - 1);
            rc = EXIT_RUNTIME;
        } else {
            map->next_truth = c;
            long *more = realloc(lines, ((size_t)map->n + 1) * sizeof *lines);
            if (more)
                lines = more, lines[map->n] = no;
            if (!more || list_add(map, name))
                rc = oom();
        }
    }
    free(line);
    if (f != stdin)
        fclose(f);
    if (!rc)
        rc = check_labels_map(path, map, lines);
    free(lines);
    return rc;
}

/* The class of a folder name or list label: the labels map's, else (folders) `position`, else
 * (list) a class number. -1 when there is none (an error naming `where` is printed). */
static int class_of(eval_names *en, const char *name, int position, int classes, const char *where)
{
    char shown[1024];
    if (en->map.n) {
        for (int i = 0; i < en->map.n; i++)
            if (!strcmp(en->map.p[i], name))
                return en->map.truth[i];
        int c = position < 0 ? class_number(name, classes) : -1;
        if (c >= 0)
            return c; /* a list's label may be a class number */
        fprintf(stderr, "pagoda: error: %s: class '%s' is not in the labels map %s\n", where,
                app_term_text(name, shown, sizeof shown), eval_mode.labels_map);
        return -1;
    }
    if (position >= 0 && position >= classes)
        fprintf(stderr,
                "pagoda: error: %s: the folder '%s' is class %d by its place, and the "
                "model has %d classes (a labels map names the classes: --labels-map)\n",
                where, app_term_text(name, shown, sizeof shown), position, classes);
    int c = position >= 0 ? position : class_number(name, classes);
    if (position < 0 && c < 0)
        fprintf(stderr,
                "pagoda: error: %s: the label '%s' is not a class number from 0 to %d "
                "(labels by name need a labels map: --labels-map)\n",
                where, app_term_text(name, shown, sizeof shown), classes - 1);
    return c >= 0 && c < classes ? c : -1;
}

/* One ImageFolder root: each sub-directory (sorted) is a class, its images (at any depth) that
 * class's. */
static int add_image_folder(path_list *l, eval_names *en, const char *root, int classes)
{
    char shown[1024];
    DIR *d = opendir(root);
    if (!d) {
        fprintf(stderr,
                "pagoda: error: %s: not a readable directory (pagoda eval wants an "
                "ImageFolder layout: one sub-directory per class): %s\n",
                app_term_text(root, shown, sizeof shown), strerror(errno));
        return EXIT_RUNTIME;
    }
    /* The root heads the chain of each class's tree: a link in a class folder back to the
     * root would otherwise count the other classes' images as this one's. */
    struct stat rst;
    dir_chain top = {0, 0, 0, root, NULL};
    if (fstat(dirfd(d), &rst) == 0)
        top.dev = rst.st_dev, top.ino = rst.st_ino;
    path_list subs = {0};
    int rc = EXIT_OK;
    for (struct dirent *e; !rc && (e = readdir(d)) != NULL;) {
        char full[4096];
        struct stat st;
        snprintf(full, sizeof full, "%s/%s", root, e->d_name);
        if (e->d_name[0] != '.' && stat(full, &st) == 0 && S_ISDIR(st.st_mode) &&
            list_add(&subs, e->d_name))
            rc = oom();
    }
    closedir(d);
    if (!rc && !subs.n) {
        fprintf(stderr,
                "pagoda: error: %s: no class sub-directories (pagoda eval wants an "
                "ImageFolder layout)\n",
                app_term_text(root, shown, sizeof shown));
        rc = EXIT_RUNTIME;
    }
    if (subs.n)
        qsort(subs.p, (size_t)subs.n, sizeof *subs.p, cmp_str);
    for (int i = 0; !rc && i < subs.n; i++) {
        int c = class_of(en, subs.p[i], i, classes, app_term_text(root, shown, sizeof shown));
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", root, subs.p[i]);
        if (c < 0)
            rc = EXIT_RUNTIME;
        en->names.next_truth = l->next_truth = c;
        if (!rc && list_add(&en->names, subs.p[i]))
            rc = oom();
        if (!rc)
            rc = add_dir(l, full, 1, &top);
    }
    list_free(&subs);
    return rc;
}

/* --list for eval: "PATH LABEL" lines, LABEL the last word (a class number, or a name of the
 * labels map). Spaces and tabs at either end of a line are ignored (a line "PATH LABEL " is
 * "PATH LABEL"); a path may hold spaces inside. */
static int add_labelled_list(path_list *l, eval_names *en, const char *path, int classes)
{
    path_list raw = {.with_truth = 1}; /* truth: the line number (add_list_file) */
    int rc = add_list_file(&raw, path);
    char shown[1024], where[1200];
    for (int i = 0; !rc && i < raw.n; i++) {
        char *line = raw.p[i], *sp = line + strlen(line);
        while (sp > line && (sp[-1] == ' ' || sp[-1] == '\t'))
            *--sp = 0;
        while (*line == ' ' || *line == '\t')
            line++;
        if (!*line)
            continue; /* a blank line, as an empty one */
        while (sp > line && sp[-1] != ' ' && sp[-1] != '\t')
            sp--;
        char *end = sp;
        while (end > line && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        snprintf(where, sizeof where, "%s:%d", app_term_text(path, shown, sizeof shown),
                 raw.truth[i]);
        if (sp == line || end == line) {
            fprintf(stderr,
                    "pagoda: error: %s: '%s' has no label (pagoda eval --list wants "
                    "'PATH LABEL' lines)\n",
                    where, app_term_text(line, shown, sizeof shown));
            rc = EXIT_RUNTIME;
            break;
        }
        *end = 0;
        int c = class_of(en, sp, -1, classes, where);
        if (c < 0) {
            rc = EXIT_RUNTIME;
            break;
        }
        l->next_truth = c;
        if (list_add(l, line))
            rc = oom();
        int known = 0;
        for (int k = 0; k < en->names.n && !known; k++)
            known = en->names.truth[k] == c;
        en->names.next_truth = c;
        if (!rc && !known && list_add(&en->names, sp))
            rc = oom();
    }
    list_free(&raw);
    return rc;
}

int gather_eval(const classify_opts *o, path_list *l, eval_names *en, int classes)
{
    int rc = EXIT_OK;
    l->with_truth = 1;
    en->names.with_truth = 1;
    if (eval_mode.labels_map)
        rc = read_labels_map(eval_mode.labels_map, classes, &en->map);
    for (int i = 0; !rc && i < o->nimages; i++)
        rc = add_image_folder(l, en, o->images[i], classes);
    if (!rc && o->list)
        rc = add_labelled_list(l, en, o->list, classes);
    if (!rc && !l->n) {
        fprintf(stderr, "pagoda: error: no images to evaluate\n");
        rc = EXIT_RUNTIME;
    }
    return rc;
}

int gather_inputs(const classify_opts *o, path_list *l)
{
    int rc = EXIT_OK;
    for (int i = 0; !rc && i < o->nimages; i++)
        rc = add_operand(l, o->images[i], o->recursive);
    if (!rc && o->list)
        rc = add_list_file(l, o->list);
    if (!rc && !l->n) {
        fprintf(stderr, "pagoda: error: %s: no images to classify\n",
                o->list ? o->list : "the operands");
        rc = EXIT_RUNTIME;
    }
    return rc;
}
