#!/usr/bin/env bash
# tools/memcheck.sh [BUILD_DIR] — valgrind memcheck over a tiny ViT run and a tiny non-local
# ResNet run on PoCL.
#
# Runs `pagoda vit --weights tests/data/vit-timm.safetensors IMAGE` (tests/data/grad_300x200.png)
# and `pagoda nonlocal --weights tests/data/nl-basic-concatenation-sub.safetensors
# --affinity-map … IMAGE` (convolutions, pools, the concatenation non-local block, the affinity
# row, the PNG writer) under memcheck with full leak checking; leaks and errors inside the OpenCL drivers (PoCL, its
# LLVM, Mesa, the ICD loader) are suppressed by tests/sanitize/valgrind.supp, each entry
# commented. Exit status non-zero on any error or definite/indirect leak left after that.
# BUILD_DIR defaults to build/ (a normal, non-sanitizer build: valgrind and ASan do not mix).
# The binary cache is warmed first, so the run under valgrind loads kernels rather than
# compiling them (compiling under memcheck takes many minutes). The warm-up itself runs under
# valgrind (--tool=none): valgrind's CPU has no AVX-512, so on such a host PoCL names another
# device there (pthread-haswell instead of pthread-skylake-avx512) and a cache warmed natively
# would not match.
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=${1:-build}
pagoda=$bdir/apps/pagoda
if [ ! -x "$pagoda" ]; then
  echo "memcheck: $pagoda not found; build first (tools/setup build)" >&2; exit 1
fi
if ! command -v valgrind >/dev/null; then
  echo "memcheck: valgrind not found (apt-get install valgrind)" >&2; exit 1
fi
export PAGODA_DEVICE=${PAGODA_DEVICE:-cpu} PAGODA_GEMM=pagoda
export PAGODA_CACHE_DIR=${PAGODA_CACHE_DIR:-$bdir/memcheck-cache}
status=0
run() {
  local name=$1; shift
  valgrind --tool=none -q "$pagoda" "$@" >/dev/null 2>"$bdir/memcheck-$name-warm.log" || {
    echo "memcheck: $name: the warm-up run failed; see $bdir/memcheck-$name-warm.log" >&2
    return 1; }
  local log=$bdir/memcheck-$name.log
  # PoCL runs kernels on its own pthreads and dlopens the kernel .so files it compiled.
  set +e
  valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --track-origins=yes --num-callers=40 \
    --suppressions=tests/sanitize/valgrind.supp --gen-suppressions=all --error-exitcode=99 \
    --log-file="$log" "$pagoda" "$@" >/dev/null
  local rc=$?
  set -e
  echo "memcheck: $name:"
  grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|still reachable|suppressed:" "$log" || true
  if [ $rc -ne 0 ]; then
    echo "memcheck: $name FAILED (exit $rc); see $log (it holds suppression stanzas for each report)" >&2
    status=1
  else
    echo "memcheck: $name clean ($log)"
  fi
}
run vit vit --weights tests/data/vit-timm.safetensors tests/data/grad_300x200.png
run nonlocal nonlocal --weights tests/data/nl-basic-concatenation-sub.safetensors \
  --affinity-map "$bdir/memcheck-affinity.png" tests/data/grad_300x200.png
exit $status
