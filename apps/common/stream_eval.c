/* stream_eval.c — pagoda eval over the stream: each image's result counted against its true
 * class, and the report (accuracy, per class, the most frequent confusions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "stream_state.h"

/* Counts one image's result against its true class t. */
void eval_count(stream *s, const float *l, int t)
{
    int rank = 0, pred = 0;
    for (int k = 0; k < s->classes; k++) {
        rank += l[k] > l[t] || (l[k] == l[t] && k < t);
        pred = l[k] > l[pred] ? k : pred;
    }
    s->evaluated++;
    s->cls_n[t]++;
    if (rank == 0)
        s->top1++, s->cls_top1[t]++;
    if (rank < 5)
        s->top5++, s->cls_top5[t]++;
    if (s->conf)
        s->conf[(size_t)t * (size_t)s->classes + (size_t)pred]++;
}

/* ---- the eval report ---- */

/* The name of class c: the folder or list label that stands for it, else the model's label. */
static const char *eval_class_name(const stream *s, int c, char *buf, size_t size)
{
    for (int i = 0; i < s->en.names.n; i++)
        if (s->en.names.truth[i] == c)
            return s->en.names.p[i];
    if (s->labels.names)
        return s->labels.names[c];
    if (s->classes == 1000)
        return pgd_imagenet_labels[c];
    snprintf(buf, size, "class %d", c);
    return buf;
}

typedef struct confusion {
    long count;
    int t, p;
} confusion;

static int by_count(const void *a, const void *b)
{
    const confusion *x = a, *y = b;
    return x->count != y->count ? (x->count < y->count ? 1 : -1)
           : x->t != y->t       ? x->t - y->t
                                : x->p - y->p;
}

/* top-1 and top-5 accuracy, per-class accuracy, the 10 most frequent confusions: printed, or
 * with --json one document on stdout. */
int eval_report(stream *s)
{
    enum { SHOWN = 10 };
    confusion top[SHOWN];
    int ntop = 0;
    for (int t = 0; s->conf && t < s->classes; t++)
        for (int p = 0; p < s->classes; p++) {
            long c = s->conf[(size_t)t * (size_t)s->classes + (size_t)p];
            if (p == t || !c)
                continue;
            confusion x = {c, t, p};
            if (ntop < SHOWN)
                top[ntop++] = x;
            else if (by_count(&x, &top[SHOWN - 1]) < 0)
                top[SHOWN - 1] = x;
            else
                continue;
            qsort(top, (size_t)ntop, sizeof *top, by_count);
        }
    double n = s->evaluated ? (double)s->evaluated : 1;
    char b1[64], b2[64], shown[2][1024];
    if (s->o->json) {
        json_t *per = json_array(), *conf = json_array();
        for (int c = 0; c < s->classes; c++)
            if (s->cls_n[c])
                json_array_append_new(
                    per, json_pack("{s:i, s:o, s:I, s:f, s:f}", "class", c, "name",
                                   app_json_text(eval_class_name(s, c, b1, sizeof b1)), "images",
                                   (json_int_t)s->cls_n[c], "top1",
                                   (double)s->cls_top1[c] / (double)s->cls_n[c], "top5",
                                   (double)s->cls_top5[c] / (double)s->cls_n[c]));
        for (int i = 0; i < ntop; i++)
            json_array_append_new(conf, json_pack("{s:i, s:i, s:I}", "true", top[i].t, "predicted",
                                                  top[i].p, "count", (json_int_t)top[i].count));
        return app_print_json(json_pack(
            "{s:I, s:I, s:f, s:f, s:I, s:I, s:o, s:o}", "images", (json_int_t)s->evaluated,
            "unreadable", (json_int_t)s->errors, "top1", (double)s->top1 / n, "top5",
            (double)s->top5 / n, "top1_correct", (json_int_t)s->top1, "top5_correct",
            (json_int_t)s->top5, "per_class", per, "confusions", conf));
    }
    printf("%ld image(s) evaluated%s", s->evaluated, s->errors ? "" : "\n");
    if (s->errors)
        printf(" (%ld more unreadable or without a result: not counted)\n", s->errors);
    printf("top-1 accuracy %.4f (%ld), top-5 accuracy %.4f (%ld)\n", (double)s->top1 / n, s->top1,
           (double)s->top5 / n, s->top5);
    printf("per class (images, top-1, top-5):\n");
    for (int c = 0; c < s->classes; c++)
        if (s->cls_n[c])
            printf("  %4d %-24s %6ld  %.4f  %.4f\n", c,
                   app_term_text(eval_class_name(s, c, b1, sizeof b1), shown[0], 64), s->cls_n[c],
                   (double)s->cls_top1[c] / (double)s->cls_n[c],
                   (double)s->cls_top5[c] / (double)s->cls_n[c]);
    if (ntop)
        printf("most frequent confusions (true -> predicted: images):\n");
    for (int i = 0; i < ntop; i++)
        printf("  %s -> %s: %ld\n",
               app_term_text(eval_class_name(s, top[i].t, b1, sizeof b1), shown[0], 256),
               app_term_text(eval_class_name(s, top[i].p, b2, sizeof b2), shown[1], 256),
               top[i].count);
    return EXIT_OK;
}
