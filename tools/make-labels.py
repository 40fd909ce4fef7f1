#!/usr/bin/python3
"""Writes apps/models/imagenet_labels.inc (which labels.c includes): the 1000 ImageNet-1k class
names in index order, one C string literal a line.

The names are the ones torchvision ships with its ImageNet weights
(torchvision.models._meta._IMAGENET_CATEGORIES, Debian's python3-torchvision). Run with
Debian's /usr/bin/python3:
`/usr/bin/python3 tools/make-labels.py > apps/models/imagenet_labels.inc`.
"""
import json
from torchvision.models._meta import _IMAGENET_CATEGORIES as names

assert len(names) == 1000
for n in names:
    print("    " + json.dumps(n, ensure_ascii=True) + ",")
