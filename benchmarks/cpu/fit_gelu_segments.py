"""Fits the segment polynomials of the AVX-512 bf16 gelu (csrc/kernels/cpu/activation_impl.h, gelu_bf16_segments):
Q(y) = Phi(-y) on 32 segments of [0, 8), each a quartic in u = 4y - floor(4y) in [0, 1), by iterated weighted least
squares on the relative error (400 Chebyshev points a segment, double precision), rounded to float. Prints each
segment's relative error evaluated in fp32 as the kernel does (Horner in u), the worst, and the five C arrays.
Needs numpy.   python benchmarks/cpu/fit_gelu_segments.py"""
import math

import numpy as np

SEGMENTS, RANGE, DEGREE, POINTS = 32, 8.0, 4, 400


def q(y: float) -> float:
    return 0.5 * math.erfc(y / math.sqrt(2.0))


def fit_segment(a: float, width: float) -> np.ndarray:
    k = np.arange(POINTS)
    u = 0.5 + 0.5 * np.cos(np.pi * (k + 0.5) / POINTS)
    target = np.array([q(a + v * width) for v in u])
    basis = np.vstack([u**p for p in range(DEGREE, -1, -1)]).T
    inv = 1.0 / target
    weight = np.ones_like(u)
    for _ in range(60):  # Lawson-style reweighting towards the minimax relative error
        c, *_ = np.linalg.lstsq(basis * (inv * np.sqrt(weight))[:, None], target * inv * np.sqrt(weight), rcond=None)
        err = np.abs((basis @ c - target) * inv)
        weight = weight * err / err.max() + 1e-12
    return np.float32(c)


def fp32_error(c: np.ndarray, a: float, width: float) -> float:
    u = np.linspace(0.0, 1.0, 4001)
    exact = np.array([q(a + v * width) for v in u])
    h = np.float32(c[0])
    for cc in c[1:]:
        h = np.float32(np.float32(h) * np.float32(u) + cc)
    return float(np.max(np.abs((h - exact) / exact)))


def main() -> None:
    width = RANGE / SEGMENTS
    coef = []
    worst = 0.0
    for j in range(SEGMENTS):
        c = fit_segment(j * width, width)
        e = fp32_error(c, j * width, width)
        worst = max(worst, e)
        coef.append(c)
        print(f"segment {j:2d} [{j * width:.2f}, {(j + 1) * width:.2f}): relative error {e:.2e}")
    print(f"worst {worst:.2e}")
    coef = np.array(coef)
    for i in range(DEGREE + 1):
        vals = [f"{v:.9e}f" for v in coef[:, i]]
        body = "\n".join("    " + ", ".join(vals[k:k + 4]) + "," for k in range(0, SEGMENTS, 4))
        print(f"alignas(64) constexpr float kGeluSegC{DEGREE - i}[32] = {{\n{body}\n}};")


if __name__ == "__main__":
    main()
