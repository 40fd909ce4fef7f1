#!/usr/bin/env python3
"""tests/fault/walk.py PAGODA CLFAULT_SO COMMAND... — OpenCL fault injection walk.

COMMAND is a pagoda command line that prints JSON with a "results" member, e.g.
  vit --weights tests/data/vit-timm.safetensors --json
  nonlocal --weights tests/data/nl-bottleneck.safetensors --input ….npy --json
(the old form `walk.py PAGODA CLFAULT_SO WEIGHTS.safetensors [STRIDE]` means the first one).

Counts the intercepted OpenCL calls of one run on PoCL (warm binary cache, Pagoda's own GEMM
so CLBlast's internal calls stay out), then for each selected call N reruns with
PGD_FAULT_CALL=N (the shim in tests/fault/clfault.c makes exactly that call fail) and asserts:
  - a non-zero exit that is not a signal (no crash, no abort);
  - stderr carries "pagoda: error:" and names the failed OpenCL call;
  - no OpenCL object left unreleased (the shim's PGD_FAULT_LEAKS count of contexts, queues,
    buffers, programs, kernels and events);
  - no AddressSanitizer/UBSan/LeakSanitizer report (run it on the ASan build: PAGODA from
    build-asan; LSan uses tests/sanitize/lsan.supp for driver leaks). LeakSanitizer's own
    exit-time scan sometimes dies beside the drivers' threads ("Tracer caught signal 11"): such
    a run is repeated, and after two such deaths run a third time without the leak scan (ASan,
    UBSan and the shim's count of unreleased OpenCL objects still apply); the summary names
    those calls;
  - the next run without a fault succeeds (nothing poisoned, e.g. the binary cache); with
    PGD_WALK_VERIFY_EVERY=K only after every K-th walked call and after every program call;
  - for the classification commands (vit, nonlocal) every run also writes --save-logits into a
    fresh directory of its own: a failed run must leave that directory empty (no output, no
    temporary file: outputs appear at the end of a successful run or not at all), a run that
    succeeds exactly logits.npy.
PGD_WALK_STRIDE=1 (default) walks every call. STRIDE S > 1 walks every call of each kind that
occurs at most 60 times, and for the frequent kinds (clSetKernelArg) their first and last call
and every S-th, so every call kind is covered. Errors cycle through the five codes.
A run that exits 0 passes only with exactly the clean run's results (a designed fallback, such
as rebuilding from source when the driver rejects a cached binary, absorbed the failure).
PGD_WALK_JOBS (default 2) faulted runs go at once.
Exit 0 when every walked call passes; 77 (skipped) without an OpenCL CPU device.
"""
import collections
import concurrent.futures
import json
import os
import shutil
import threading
import subprocess
import sys
import tempfile

ERRORS = ["CL_OUT_OF_RESOURCES", "CL_MEM_OBJECT_ALLOCATION_FAILURE", "CL_OUT_OF_HOST_MEMORY",
          "CL_INVALID_WORK_GROUP_SIZE", "CL_BUILD_PROGRAM_FAILURE"]
REPORTS = ["ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
           "SUMMARY: UndefinedBehaviorSanitizer"]


def lsan_died(err):
    """LeakSanitizer's own failure at exit (not a leak report)."""
    return "LeakSanitizer has encountered a fatal error" in err and "ERROR: LeakSanitizer" not in err


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    pagoda, shim = sys.argv[1:3]
    stride = int(os.environ.get("PGD_WALK_STRIDE", "1"))
    args = sys.argv[3:]
    if len(args) <= 2 and args[0].endswith(".safetensors"):
        if len(args) == 2:
            stride = int(args[1])
        args = ["vit", "--weights", args[0], "--json"]
    jobs = max(1, int(os.environ.get("PGD_WALK_JOBS", "2")))
    verify_every = int(os.environ.get("PGD_WALK_VERIFY_EVERY", "1"))
    here = os.path.dirname(os.path.abspath(__file__))
    supp = os.path.join(here, "..", "sanitize", "lsan.supp")
    tmp = tempfile.mkdtemp(prefix="pgd-fault-", dir=os.environ.get("PAGODA_TEST_TMP"))
    env = dict(os.environ)
    env.setdefault("PAGODA_DEVICE", "cpu")
    env["PAGODA_GEMM"] = "pagoda"
    # A private binary cache, seeded from the one the caller uses (the test suite's), so the
    # walk never races other processes on it.
    cache = os.path.join(tmp, "cache")
    if os.path.isdir(env.get("PAGODA_CACHE_DIR", "")):
        shutil.copytree(env["PAGODA_CACHE_DIR"], cache)
    env["PAGODA_CACHE_DIR"] = cache
    env["ASAN_OPTIONS"] = ("detect_leaks=1:halt_on_error=1:verify_asan_link_order=0:" +
                           env.get("ASAN_OPTIONS", ""))
    env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    env["LSAN_OPTIONS"] = "suppressions=" + supp
    env["PGD_FAULT_LEAKS"] = "1"
    cmd = [pagoda] + args
    print("walk: pagoda " + " ".join(args))

    lock = threading.Lock()
    lsan_reruns = []
    lsan_off = []

    classify = args[0] in ("vit", "nonlocal")

    def run(extra, tag=None, timeout=300):
        """(exit status, stderr, "results" of the JSON on stdout or None, what is wrong with the
        output directory or None). LeakSanitizer's
        exit-time scan itself sometimes dies beside the drivers' threads ("Tracer caught signal
        11", then "LeakSanitizer has encountered a fatal error"): that is the tool failing, not a
        report about Pagoda, so such a run is repeated (twice at most) and counted under `tag`;
        a real leak report reads "ERROR: LeakSanitizer" and fails."""
        e = dict(env)
        e.update(extra)
        e["LD_PRELOAD"] = shim
        out = tempfile.mkdtemp(prefix="out-", dir=tmp) if classify else None
        full = cmd + (["--save-logits", os.path.join(out, "logits.npy")] if out else [])
        for attempt in range(3):
            if out:
                for name in os.listdir(out):
                    os.unlink(os.path.join(out, name))
            if attempt == 2:
                # LeakSanitizer died at exit twice on this call: the third run keeps ASan and
                # UBSan but not the leak scan, so every other check still holds; the call is
                # named in the summary as run without a leak check.
                e["ASAN_OPTIONS"] = env["ASAN_OPTIONS"] + ":detect_leaks=0"
                with lock:
                    lsan_off.append(tag if tag is not None else "clean")
            p = subprocess.run(full, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=timeout)
            err = p.stderr.decode("utf-8", "replace")
            if not lsan_died(err) or attempt == 2:
                break
            with lock:
                lsan_reruns.append(tag if tag is not None else "clean")
        try:
            res = json.loads(p.stdout)["results"]
        except (ValueError, KeyError, TypeError):
            res = None
        bad = None
        if out:
            left = sorted(os.listdir(out))
            if p.returncode != 0 and left:
                bad = "the failed run left %s" % ", ".join(left)
            elif p.returncode == 0 and left != ["logits.npy"]:
                bad = "the run left %s, not exactly logits.npy" % (", ".join(left) or "nothing")
            shutil.rmtree(out, ignore_errors=True)
        return p.returncode, err, res, bad

    # Warm the cache, then count and name every call.
    rc, err, want, bad = run({})
    if rc != 0:
        if "matches no device" in err or "no OpenCL device" in err:
            print("walk: no CPU OpenCL device; skipped")
            return 77
        print("walk: the run without a fault fails:\n" + err)
        return 1
    if want is None or "clfault: leaked" in err or bad:
        print("walk: the run without a fault prints no results, leaks or %s:\n%s" % (bad, err))
        return 1
    trace = os.path.join(tmp, "trace")
    rc, err, _, _ = run({"PGD_FAULT_TRACE": trace, "PGD_FAULT_COUNT": os.path.join(tmp, "count")})
    calls = [line.split()[1] for line in open(trace)]
    kinds = collections.Counter(calls)
    print("walk: %d intercepted calls: %s" % (len(calls), ", ".join(
        "%s %d" % kv for kv in sorted(kinds.items()))))
    seen = collections.Counter()
    picked = []
    for n, name in enumerate(calls, 1):
        seen[name] += 1
        if (stride <= 1 or kinds[name] <= 60 or seen[name] in (1, kinds[name])
                or seen[name] % stride == 0):
            picked.append((n, name))
    # PGD_WALK_FROM=N skips the calls before N; PGD_WALK_PER_KIND=K keeps at most K calls of
    # each kind, spread evenly (a quick pass that still reaches every kind).
    first = int(os.environ.get("PGD_WALK_FROM", "1"))
    picked = [(n, name) for n, name in picked if n >= first]
    per_kind = int(os.environ.get("PGD_WALK_PER_KIND", "0"))
    if per_kind > 0:
        by_kind = collections.defaultdict(list)
        for n, name in picked:
            by_kind[name].append(n)
        keep = set()
        for name, ns in by_kind.items():
            step = max(1, len(ns) / per_kind)
            keep.update(ns[int(i * step)] for i in range(min(per_kind, len(ns))))
        picked = [(n, name) for n, name in picked if n in keep]
    print("walk: faulting %d of them (stride %d)" % (len(picked), stride))
    # Each worker has its own copy of the warm cache: a faulted run may drop and rebuild an
    # entry, which would change the call sequence of a run beside it.
    local = threading.local()
    workers = []

    def own_cache():
        if not hasattr(local, "cache"):
            with lock:
                local.cache = os.path.join(tmp, "cache-%d" % len(workers))
                workers.append(local.cache)
            shutil.copytree(env["PAGODA_CACHE_DIR"], local.cache)
        return {"PAGODA_CACHE_DIR": local.cache}

    def check(item):
        i, (n, name) = item
        code = ERRORS[i % len(ERRORS)]
        mine = own_cache()
        try:
            rc, err, res, bad = run(dict(mine, PGD_FAULT_CALL=str(n), PGD_FAULT_ERROR=code), n)
        except subprocess.TimeoutExpired:
            return n, name, code, "FAIL: timed out", "", "timed out"
        why = []
        recovered = False
        if rc == 0:
            # Designed fallbacks (a rejected cached binary is rebuilt from source, a platform
            # without devices is skipped) may absorb a failure: then the results must be
            # exactly those of the clean run.
            if res == want:
                recovered = True
            else:
                why.append("exit 0 with different results (the failure was swallowed)")
        elif rc < 0 or rc >= 128:
            why.append("killed by a signal (%d)" % rc)
        if bad:
            why.append(bad)
        if rc != 0 and "pagoda: error:" not in err:
            why.append("no 'pagoda: error:' line")
        if rc != 0 and name not in err:
            why.append("the message does not name %s" % name)
        if "clfault: leaked" in err:
            why.append(next(l for l in err.splitlines() if "clfault: leaked" in l))
        for r in REPORTS:
            if r in err:
                why.append("sanitizer report (%s)" % r)
        rc2 = 0
        if i % verify_every == 0 or "Program" in name or "Kernels" in name:
            try:
                rc2, err2, res2, _ = run(mine, n)
            except subprocess.TimeoutExpired:
                rc2, err2, res2 = -1, "timed out", None
            if rc2 == 0 and res2 != want:
                why.append("the next run without a fault gives other results")
        if rc2 != 0:
            why.append("the next run without a fault fails (%d): %s" % (rc2, err2.strip()[-300:]))
        status = ("recovered" if recovered else "ok") if not why else "FAIL: " + "; ".join(why)
        first = next((l for l in err.splitlines() if "pagoda: error:" in l), err.strip()[-200:])
        return n, name, code, status, first, err

    failures = []
    n_ok = n_recovered = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for n, name, code, status, first, err in pool.map(check, enumerate(picked)):
            print("call %4d %-26s %-32s %s | %s" % (n, name, code, status, first[:160]),
                  flush=True)
            if status.startswith("FAIL"):
                failures.append("call %d %s (%s): %s\n%s" % (n, name, code, status, err[-2000:]))
            elif status == "recovered":
                n_recovered += 1
            else:
                n_ok += 1
    print("walk: %d of %d faulted calls passed (%d with a clean error, %d recovered with identical "
          "results)" % (len(picked) - len(failures), len(picked), n_ok, n_recovered))
    if lsan_reruns:
        print("walk: %d run(s) repeated because LeakSanitizer itself died at exit (calls %s)"
              % (len(lsan_reruns), ", ".join(str(n) for n in sorted(set(lsan_reruns), key=str))))
    if lsan_off:
        print("walk: %d run(s) checked without the leak scan after LeakSanitizer died at exit "
              "twice (calls %s)" % (len(lsan_off),
                                    ", ".join(str(n) for n in sorted(set(lsan_off), key=str))))
    for f in failures:
        print("---\n" + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
