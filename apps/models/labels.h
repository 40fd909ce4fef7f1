/* labels.h — built-in class names. */
#ifndef PAGODA_LABELS_H
#define PAGODA_LABELS_H

extern const char *const pgd_imagenet_labels[1000];

#endif
