#!/bin/sh
# oclgrind.sh PROGRAM ARGS... — runs PROGRAM under Oclgrind (an OpenCL device simulator that
# takes the place of every other OpenCL platform) with its checks of data races and API use (its
# out-of-bounds, barrier-divergence and invalid-access checks are always on), and fails when
# PROGRAM fails or Oclgrind reports anything at all. Skips (77) where Oclgrind is not installed
# (tools/setup installs it for CI: Debian's package `oclgrind`).
#
# Kernels are built with -cl-opt-disable: unoptimised code keeps every access the source makes,
# and Oclgrind 21.10 mis-executes some optimised code of newer LLVMs (wino_output's epilogue with
# a residual and ReLU gave x + r unclipped; PoCL and Oclgrind at -O0 give the right value).
# Not --uninitialized: in 21.10 it stops at LLVM's `freeze` instruction in optimised code,
# reports clEnqueueFillBuffer'd and kernel-written buffers as uninitialised (elementwise_add of
# two fully written tensors), and crashes (SIGSEGV in Uninitialized::instructionExecuted).
set -u
if ! command -v oclgrind >/dev/null 2>&1; then
    echo "SKIP: oclgrind is not installed (apt-get install oclgrind)"
    exit 77
fi
log=$(mktemp "${PAGODA_TEST_TMP:-/tmp}/oclgrind-XXXXXX.log") || exit 99
trap 'rm -f "$log"' EXIT
oclgrind --data-races --check-api --build-options -cl-opt-disable \
    --log "$log" "$@"
rc=$?
if [ -s "$log" ]; then
    n=$(grep -c -E '^(Invalid|Read-write|Write-write|Work-.* divergence|OCLGRIND)' "$log")
    echo "FAIL: Oclgrind reported errors (about $n); the first of them:" >&2
    head -n 60 "$log" >&2
    exit 1
fi
if [ "$rc" -ne 0 ]; then
    echo "FAIL: $1 exited with status $rc under Oclgrind" >&2
    exit 1
fi
echo "Oclgrind: no reports"
