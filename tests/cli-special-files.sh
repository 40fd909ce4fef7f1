#!/bin/sh
# cli-special-files.sh PAGODA WHAT ARGS... — runs `PAGODA ARGS...` where the placeholders FIFO
# and DIR are replaced by a named pipe with no writer and a directory made here, and expects
# exit status 1 with an error naming what the path is (WHAT) within 20 seconds: before every
# input went through pgd_file_read's rules, a FIFO blocked the open forever and /dev/zero was
# read until memory ran out.
set -u
pagoda=$1 what=$2
shift 2
tmp=$(mktemp -d "${PAGODA_TEST_TMP:-/tmp}/special-XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
mkfifo "$tmp/fifo" || exit 99
mkdir "$tmp/dir" || exit 99
for a in "$@"; do
    case $a in
    FIFO) a=$tmp/fifo ;;
    DIR) a=$tmp/dir ;;
    esac
    set -- "$@" "$a"
    shift
done
timeout 20 "$pagoda" "$@" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/err" >&2
if [ $rc -eq 124 ]; then
    echo "FAIL: hung (killed after 20 s)" >&2
    exit 1
fi
if [ $rc -ne 1 ]; then
    echo "FAIL: exit status $rc, want 1" >&2
    exit 1
fi
if ! grep -q "$what" "$tmp/err"; then
    echo "FAIL: the error does not say '$what'" >&2
    exit 1
fi
exit 0
