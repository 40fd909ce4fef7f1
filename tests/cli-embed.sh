#!/bin/sh
# cli-embed.sh PAGODA DATA — `pagoda embed` over a directory of images with the tiny headless ViT
# (tests/data/dino-tiny.safetensors), then `pagoda similar`: each query in the index finds
# itself first with similarity 1.0000; the features file is [N, D] with the image list beside
# it; a model with a classifier, an index without its list and an index holding a NaN feature
# are refused with exit 1, and a failed embed leaves neither file.
set -u
pagoda=$1 data=$2
tmp=$(mktemp -d "${PAGODA_TEST_TMP:-/tmp}/embed-XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "cli-embed: $*" >&2; exit 1; }
mkdir "$tmp/imgs" || exit 99
cp "$data/grad_300x200.png" "$data/noise_97x143.png" "$data/checker_13x7.png" "$tmp/imgs/" || exit 99
echo "not an image" > "$tmp/imgs/notes.txt"
for pool in cls mean both; do
    maps=""
    [ $pool = cls ] && maps="--attention-heads $tmp/heads.png --attention-mask $tmp/mask.png"
    # shellcheck disable=SC2086
    "$pagoda" embed --weights "$data/dino-tiny.safetensors" --pool $pool --quiet $maps \
        --output "$tmp/f-$pool.npy" "$tmp/imgs" || fail "embed --pool $pool failed"
    [ -f "$tmp/f-$pool.npy" ] && [ -f "$tmp/f-$pool.npy.json" ] || fail "outputs missing"
    grep -q '"images"' "$tmp/f-$pool.npy.json" || fail "no image list"
    grep -q 'notes.txt' "$tmp/f-$pool.npy.json" && fail "a text file was embedded"
    # One query run per pooling: each query's rank-1 line must be itself at similarity 1.
    "$pagoda" similar --index "$tmp/f-$pool.npy" --topk 2 "$tmp/imgs/grad_300x200.png" \
        "$tmp/imgs/noise_97x143.png" "$tmp/imgs/checker_13x7.png" > "$tmp/sim" \
        || fail "similar failed"
    cat "$tmp/sim"
    for q in grad_300x200.png noise_97x143.png checker_13x7.png; do
        first=$(grep -A1 "^$tmp/imgs/$q:\$" "$tmp/sim" | sed -n 2p)
        case $first in
        *" 1  1.0000  $tmp/imgs/$q") ;;
        *) fail "--pool $pool: $q did not find itself first: '$first'" ;;
        esac
    done
done
"$pagoda" similar --index "$tmp/f-cls.npy" --json "$tmp/imgs/grad_300x200.png" \
    | grep -q '"similarity"' || fail "similar --json"
# The per-head pictures: one PNG per image and kind, numbered in image order.
for k in heads mask; do
    for i in 1 2 3; do
        head -c 8 "$tmp/$k-$i.png" | od -An -c | grep -q "P   N   G" || fail "$k-$i.png is no PNG"
    done
    [ -e "$tmp/$k-4.png" ] && fail "a fourth $k picture"
done
# A classifier model is refused, and the failed run leaves no file.
"$pagoda" embed --weights "$data/vit-timm.safetensors" --output "$tmp/g.npy" "$tmp/imgs" \
    2> "$tmp/err" && fail "a model with a classifier was accepted"
grep -q "has a classifier" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"
[ -e "$tmp/g.npy" ] || [ -e "$tmp/g.npy.json" ] && fail "a failed embed left an output"
# An index without its image list.
cp "$tmp/f-cls.npy" "$tmp/lonely.npy"
"$pagoda" similar --index "$tmp/lonely.npy" "$tmp/imgs/grad_300x200.png" 2> "$tmp/err" \
    && fail "an index without its list was accepted"
grep -q "lonely.npy.json" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"
# A NaN in the index's features: refused (as classify refuses non-finite logits), naming the
# index and the row, instead of printing nan similarities; --allow-nonfinite ranks it anyway.
cp "$tmp/f-cls.npy" "$tmp/nan.npy" && cp "$tmp/f-cls.npy.json" "$tmp/nan.npy.json" || exit 99
hl=$(od -An -tu2 -j8 -N2 "$tmp/nan.npy" | tr -d ' ')
printf '\000\000\300\177' | dd of="$tmp/nan.npy" bs=1 seek=$((10 + hl)) conv=notrunc 2>/dev/null
"$pagoda" similar --index "$tmp/nan.npy" "$tmp/imgs/grad_300x200.png" > "$tmp/out" 2> "$tmp/err" \
    && fail "an index with a NaN feature was accepted: $(cat "$tmp/out")"
grep -q "nan.npy: the features of .* (row 0) are not finite" "$tmp/err" \
    || fail "unclear error: $(cat "$tmp/err")"
grep -q nan "$tmp/out" && fail "nan similarities printed"
"$pagoda" similar --index "$tmp/nan.npy" --allow-nonfinite --json "$tmp/imgs/grad_300x200.png" \
    > "$tmp/out" || fail "--allow-nonfinite refused"
exit 0
