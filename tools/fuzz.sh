#!/usr/bin/env bash
# tools/fuzz.sh TARGET SECONDS [libFuzzer options…] — build and run one libFuzzer target.
#
#   TARGET: safetensors | image | npy | model_config | resnet_config | labels | bench_spec |
#           options | jpeg | png | webp | gat_graph | memnet_story | detr_config | csv |
#           results | eval_lists | http_header | tokenizer | onnx | serve
#           (tests/fuzz/fuzz_TARGET.c; jpeg, png, webp: one image decoder each, libjpeg-turbo,
#           libpng, libwebp; gat_graph: `pagoda gat`'s graph files; memnet_story: bAbI stories;
#           detr_config: the config.json beside DETR weights; csv: the results CSV reader and
#           writer, in a round trip; results: --resume over a JSON-lines or CSV results file;
#           eval_lists: eval's --labels-map and labelled --list; http_header: the hub client's
#           response-header parser; tokenizer: vocab.txt, vocab.json + merges.txt,
#           tokenizer.json and the tokenizers on any text; onnx: ONNX model files, loaded,
#           reported and their host-evaluated nodes run without a device; serve: `pagoda
#           serve`'s request handler, routing, arguments and image uploads, with a stub runner)
#
# Configures build-fuzz/ with clang, AddressSanitizer + UBSan (every UB report aborts) and
# -fsanitize=fuzzer-no-link on the library (coverage), -Dfuzz=true; builds only the target;
# makes the seed corpus with tools/make-fuzz-corpus.py into build-fuzz/corpus-seed/TARGET and
# runs on build-fuzz/corpus/TARGET (grown by the fuzzer, kept between runs) for SECONDS, with
# tests/fuzz/safetensors.dict for the two safetensors-based targets. Crashes land in
# build-fuzz/artifacts/TARGET/; each one found becomes a regression input under
# tests/data/fuzz-regress/ (run by the fuzz-regress test of the normal suite).
# The last lines of the log are libFuzzer's final stats (stat::number_of_executed_units, …).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-}
seconds=${2:-60}
targets="safetensors|image|npy|model_config|resnet_config|labels|bench_spec|options|jpeg|png|webp"
targets="$targets|gat_graph|memnet_story|detr_config|csv|results|eval_lists|http_header|tokenizer|onnx"
targets="$targets|serve"
case "$target" in
  safetensors|image|npy|model_config|resnet_config|labels|bench_spec|options|jpeg|png|webp|\
  gat_graph|memnet_story|detr_config|csv|results|eval_lists|http_header|tokenizer|onnx|serve) ;;
  *) echo "usage: tools/fuzz.sh $targets SECONDS [libFuzzer options]" >&2; exit 2 ;;
esac
shift 2 || shift $#

if ! command -v clang >/dev/null; then
  echo "fuzz: error: clang not found (apt-get install clang)" >&2; exit 1
fi
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CFLAGS="-fsanitize=fuzzer-no-link" meson setup build-fuzz -Dfuzz=true \
    -Dtests=disabled -Dclblast=disabled -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debugoptimized -Dwerror=false >/dev/null
fi
ninja -C build-fuzz "tests/fuzz/fuzz_$target" >/dev/null

py=python3
if /usr/bin/python3 -c 'import PIL' 2>/dev/null; then py=/usr/bin/python3; fi  # JPEG seeds
"$py" tools/make-fuzz-corpus.py build-fuzz/corpus-seed >/dev/null
if [ "$target" = onnx ]; then
  # the onnx package writes the seed models (tools/setup installs it in .deps/py-venv)
  onnx_py=${PAGODA_ONNX_PYTHON:-.deps/py-venv/bin/python}
  [ -x "$onnx_py" ] || onnx_py=python3
  "$onnx_py" tools/make-onnx-models.py build-fuzz/corpus-seed/onnx
fi
mkdir -p "build-fuzz/corpus/$target" "build-fuzz/artifacts/$target"
dict=()
case "$target" in
  safetensors|model_config|gat_graph) dict=(-dict=tests/fuzz/safetensors.dict) ;;
  detr_config) dict=(-dict=tests/fuzz/detr_config.dict) ;;
  onnx) dict=(-dict=tests/fuzz/onnx.dict) ;;
  serve) dict=(-dict=tests/fuzz/serve.dict) ;;
esac

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
exec "build-fuzz/tests/fuzz/fuzz_$target" "${dict[@]}" -max_total_time="$seconds" \
  -print_final_stats=1 -rss_limit_mb=3072 -max_len=65536 -timeout=20 \
  -artifact_prefix="build-fuzz/artifacts/$target/" "$@" \
  "build-fuzz/corpus/$target" "build-fuzz/corpus-seed/$target"
