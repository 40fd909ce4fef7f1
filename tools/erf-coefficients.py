#!/usr/bin/env python3
"""tools/erf-coefficients.py — fits the polynomials of the float erf in cl/gemm.cl (ERF_FN, the
GELU epilogue) and checks them as the kernel evaluates them.

    .deps/py-venv/bin/python tools/erf-coefficients.py [--points N]

Three pieces, each a least-squares fit on Chebyshev nodes against double erf (math.erf):
  |z| < 1          erf(z) = z + z*Q(z^2), Q of degree 6, fitted for relative error;
  1 <= |z| < 2.5   a degree-10 polynomial in u = (|z| - 1.75) * 4/3 (u in [-1, 1]);
  2.5 <= |z| < 4   a degree-8 polynomial in v = (|z| - 3.25) * 4/3;
  |z| >= 4         1 (erfc(4) = 1.5e-8, below half an ulp of 1).
It prints the coefficients (highest power first, the order of the Horner steps in the kernel)
and then evaluates the kernel's float arithmetic: coefficients rounded to float, each Horner
step one fused multiply-add (a double product and sum rounded once to float, which is exact
for an FMA of floats), on N points of [0, 8] (default 2^23), and reports the largest error in
float ulps of the correctly rounded result. Needs numpy.
"""
import argparse
import math
import sys

import numpy as np

F32, F64 = np.float32, np.float64


def nodes(lo, hi, n=4000):
    return np.cos(np.pi * (np.arange(n) + 0.5) / n) * 0.5 * (hi - lo) + 0.5 * (hi + lo)


def fit_small(deg=6):
    """Q with erf(z) = z + z*Q(z^2) on [0, 1], weighted for relative error."""
    t = nodes(0.0, 1.0)
    erf = np.array([math.erf(v) for v in t])
    basis = np.vander(t * t, deg + 1, increasing=True) * t[:, None]
    c = np.linalg.lstsq(basis / erf[:, None], np.ones_like(t), rcond=None)[0]
    c[0] -= 1.0
    return c


def fit_piece(lo, hi, deg):
    t = nodes(lo, hi)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    cheb = np.polynomial.chebyshev.chebfit((t - mid) / half, [math.erf(v) for v in t], deg)
    return np.polynomial.chebyshev.cheb2poly(cheb), mid, 1.0 / half


def fma(a, b, c):
    return (a.astype(F64) * b.astype(F64) + c.astype(F64)).astype(F32)


def horner(coef, x):
    r = np.full_like(x, F32(coef[-1]))
    for c in coef[-2::-1]:
        r = fma(r, x, np.full_like(x, F32(c)))
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=1 << 23)
    args = ap.parse_args()
    q = fit_small()
    b, bmid, bscale = fit_piece(1.0, 2.5, 10)
    c, cmid, cscale = fit_piece(2.5, 4.0, 8)
    for name, coef in (("Q (z^2)", q), ("B (u)", b), ("C (v)", c)):
        print(f"{name}: " + ", ".join(f"{v:.9e}" for v in coef[::-1]))
    print(f"u = (|z| - {bmid}) * {bscale:.9f}; v = (|z| - {cmid}) * {cscale:.9f}")

    z = np.linspace(0.0, 8.0, args.points, dtype=F32)
    a = np.abs(z)
    small = fma(z, horner(q, z * z), z)
    big_b = horner(b, ((a - F32(bmid)) * F32(bscale)).astype(F32))
    big_c = horner(c, ((a - F32(cmid)) * F32(cscale)).astype(F32))
    big = np.where(a >= 2.5, big_c, big_b)
    big = np.where((a >= 4.0) | (big > 1.0), F32(1.0), big)
    got = np.where(a < 1.0, small, big).astype(F64)
    want = np.array([math.erf(v) for v in z.astype(F64)])
    ulp = np.spacing(want.astype(F32)).astype(F64)
    err = np.abs(got - want) / np.where(want == 0, 1.0, ulp)
    i = int(np.argmax(err))
    print(f"{args.points} points of [0, 8]: largest error {err[i]:.3f} ulp at z = {z[i]:.9g}")
    return 0 if err[i] <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
