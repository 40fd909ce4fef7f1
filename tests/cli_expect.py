#!/usr/bin/env python3
"""cli_expect.py — runs a command line and checks what hostile input must produce.

    cli_expect.py [--exit N] [--json] [--has TEXT]... [--lacks TEXT]... [--stdout-has T]... [--env VAR=VALUE]...
                  [--as-limit BYTES] [--max-seconds S] [--link NAME=FILE] -- COMMAND ARGS...

--exit N        the exit status wanted (default 0)
--json          stdout must be one valid JSON document (json.loads of its bytes as UTF-8)
--has TEXT      stderr must contain TEXT; --lacks TEXT: must not ("unknown failure")
--stdout-has T  stdout must contain T
--env VAR=VAL   set in the command's environment; VAL may carry \\xNN escapes for raw bytes
--as-limit B    run under RLIMIT_AS = B bytes, so a huge host allocation fails fast; under
                AddressSanitizer (ASAN_OPTIONS set), whose shadow memory needs terabytes of
                address space, ASan's own max_allocation_size_mb plays that part instead
--max-seconds S the command must finish within S seconds (a refusal is quick)
--link NAME=F   a symbolic link NAME (\\xNN escapes allowed: bytes that are not UTF-8) to F in
                a temporary directory; '@LINK@' in the arguments becomes its path
"""
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time


def raw(text):
    """'a\\xffb' → b'a\\xffb': arguments carry bytes that are not valid UTF-8 as escapes."""
    return re.sub(rb"\\x([0-9a-fA-F]{2})", lambda m: bytes([int(m.group(1), 16)]),
                  text.encode())


def main(argv):
    want_exit, want_json, has, lacks, env, limit, max_s, links = 0, False, [], [], {}, None, None, []
    out_has = []
    i = 1
    while i < len(argv) and argv[i] != "--":
        opt = argv[i]
        val = argv[i + 1] if i + 1 < len(argv) else None
        if opt == "--json":
            want_json = True
            i += 1
            continue
        if val is None:
            sys.exit(f"cli_expect: {opt} wants a value")
        if opt == "--exit":
            want_exit = int(val)
        elif opt == "--has":
            has.append(val)
        elif opt == "--stdout-has":
            out_has.append(val)
        elif opt == "--lacks":
            lacks.append(val)
        elif opt == "--env":
            k, _, v = val.partition("=")
            env[k.encode()] = raw(v)
        elif opt == "--as-limit":
            limit = int(val)
        elif opt == "--max-seconds":
            max_s = float(val)
        elif opt == "--link":
            name, _, target = val.partition("=")
            links.append((raw(name), target))
        else:
            sys.exit(f"cli_expect: unknown option {opt}")
        i += 2
    cmd = [a.encode() for a in argv[i + 1:]]
    if not cmd:
        sys.exit("cli_expect: no command")
    with tempfile.TemporaryDirectory() as tmp:
        for name, target in links:
            path = os.path.join(os.fsencode(tmp), name)
            os.symlink(os.path.abspath(target), path)
            cmd = [a.replace(b"@LINK@", path) for a in cmd]
        full_env = dict(os.environb)
        full_env.update(env)
        if limit and b"ASAN_OPTIONS" in full_env:
            # RLIMIT_AS would stop ASan from reserving its shadow before main(): make one
            # allocation above the limit fail (return NULL) the way the kernel would.
            full_env[b"ASAN_OPTIONS"] += b":max_allocation_size_mb=%d:allocator_may_return_null=1" % (
                limit >> 20)
            limit = None

        def set_limit():
            if limit:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        t0 = time.monotonic()
        p = subprocess.run(cmd, env=full_env, capture_output=True, preexec_fn=set_limit)
        took = time.monotonic() - t0
    err = p.stderr.decode("utf-8", "backslashreplace")
    sys.stderr.write(err)
    problems = []
    if p.returncode != want_exit:
        problems.append(f"exit status {p.returncode}, wanted {want_exit}")
    for t in has:
        if t not in err:
            problems.append(f"stderr lacks {t!r}")
    for t in lacks:
        if t in err:
            problems.append(f"stderr has {t!r}")
    for t in out_has:
        if t.encode() not in p.stdout:
            problems.append(f"stdout lacks {t!r}")
    if max_s is not None and took > max_s:
        problems.append(f"took {took:.1f} s, more than {max_s} s")
    if want_json:
        try:
            json.loads(p.stdout.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            problems.append(f"stdout is not valid JSON ({e}): {p.stdout[:400]!r}")
    for msg in problems:
        print(f"cli_expect: {msg}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
