#!/usr/bin/env python3
"""ctypes_layout.py — python/pagoda/_capi.py's structures checked against the C headers.

    ctypes_layout.py --cc CC [CC ARGS...] -- -I runtime/include -I apps/models

Every ctypes Structure declared in _capi.py must name a C struct in STRUCTS below (a new
structure without an entry fails), and for each the C compiler's sizeof and the offsetof of
every field must equal ctypes' sizeof and field offsets: a tiny C program printing them is
compiled against pagoda.h, pagoda_util.h and pagoda_models.h and run. A field ctypes names that
the C struct lacks fails the compile; a C field ctypes lacks changes the size or an offset.
Exit 0 when all agree, 1 listing each difference, 77 (skip) without a C compiler."""
import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile

# ctypes class in _capi.py -> the C typedef it mirrors.
STRUCTS = {
    "DeviceInfo": "pgd_device_info",
    "CtxOptions": "pgd_ctx_options",
    "MemoryStats": "pgd_memory_stats",
    "GemmArgs": "pgd_gemm_args",
    "View": "pgd_view",
    "AttentionArgs": "pgd_attention_args",
    "Conv2dDesc": "pgd_conv2d_desc",
    "BatchNorm": "pgd_batchnorm",
    "NonlocalDesc": "pgd_nonlocal_desc",
    "NonlocalParams": "pgd_nonlocal_params",
    "ModelOptions": "pgd_model_options",
    "ModelInfo": "pgd_model_info",
    "PoolDesc": "pgd_pool_desc",
    "AttentionExt": "pgd_attention_ext",
    "GraphIO": "pgd_graph_io",
    "DeviceLowp": "pgd_device_lowp",
    "BertInfo": "pgd_bert_info",
}


def load_capi(top):
    """_capi.py alone (not the package, which needs NumPy); it loads the libraries from
    $PAGODA_LIB_DIR."""
    path = os.path.join(top, "python", "pagoda", "_capi.py")
    spec = importlib.util.spec_from_file_location("pagoda_capi_layout", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def structures(mod):
    return {name: cls for name, cls in vars(mod).items()
            if isinstance(cls, type) and issubclass(cls, ctypes.Structure)
            and cls is not ctypes.Structure and cls.__module__ == mod.__name__}


def c_program(classes):
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "pagoda.h"',
             '#include "pagoda_util.h"', '#include "pagoda_models.h"', "int main(void)", "{"]
    for name, cls in classes:
        c = STRUCTS[name]
        lines.append(f'    printf("{name} :sizeof %zu\\n", sizeof({c}));')
        for field in cls._fields_:
            lines.append(f'    printf("{name} {field[0]} %zu\\n", offsetof({c}, {field[0]}));')
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


def main(argv):
    if "--cc" not in argv or "--" not in argv:
        print(__doc__)
        return 2
    cc = argv[argv.index("--cc") + 1:argv.index("--")]
    flags = argv[argv.index("--") + 1:]
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    mod = load_capi(top)
    found = structures(mod)
    problems = [f"{n}: a ctypes Structure in _capi.py with no C struct in "
                f"tests/ctypes_layout.py's STRUCTS" for n in sorted(set(found) - set(STRUCTS))]
    problems += [f"{n}: in STRUCTS but not declared in _capi.py"
                 for n in sorted(set(STRUCTS) - set(found))]
    classes = [(n, found[n]) for n in sorted(found) if n in STRUCTS]
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write(c_program(classes))
        try:
            build = subprocess.run(cc + flags + [src, "-o", exe], capture_output=True, text=True)
        except OSError as e:
            print(f"ctypes_layout: no C compiler ({e}): skipped")
            return 77
        if build.returncode:
            print("ctypes_layout: the layout program does not compile (a ctypes field the C "
                  "struct lacks?):\n" + build.stderr)
            return 1
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    c_values = {}
    for line in out.splitlines():
        cls, what, value = line.split()
        c_values[(cls, what)] = int(value)
    checked = 0
    for name, cls in classes:
        want = c_values[(name, ":sizeof")]
        if ctypes.sizeof(cls) != want:
            problems.append(f"{name}: ctypes size {ctypes.sizeof(cls)}, sizeof({STRUCTS[name]}) "
                            f"{want}")
        for field in cls._fields_:
            got, want = getattr(cls, field[0]).offset, c_values[(name, field[0])]
            checked += 1
            if got != want:
                problems.append(f"{name}.{field[0]}: ctypes offset {got}, C offsetof {want}")
    for p in problems:
        print("ctypes_layout: " + p)
    print(f"ctypes_layout: {len(classes)} structures, {checked} fields checked against the "
          f"headers; {len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
