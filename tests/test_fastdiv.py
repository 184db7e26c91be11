"""FastDiv (csrc/kernels/cuda/common.cuh): the multiply-high division the CUDA rotary and activation kernels use
to split a flat thread index. Its host path is the device path's arithmetic (__umulhi is the high half of the
same 64-bit product), so a host program built with nvcc checks it against `/` for edge and random divisors and
dividends across the whole supported range (both below 2^31). Skipped where no nvcc is found."""
from _helpers import run_host_program

PROGRAM = r"""
#include "kernels/cuda/common.cuh"
#include <cstdio>
#include <random>
using yirage::kernels::cuda::FastDiv;
int main() {
  std::mt19937_64 g(1);
  long bad = 0, checked = 0;
  auto check = [&](uint32_t d, uint32_t n) {
    const FastDiv f(d);
    if (f.d != d || f.div(n) != n / d) {
      if (bad < 5) printf("wrong: %u / %u = %u, FastDiv gave %u\n", n, d, n / d, f.div(n));
      ++bad;
    }
    ++checked;
  };
  const uint32_t top = 0x7fffffffu;
  const uint32_t edge_d[] = {1u, 2u, 3u, 5u, 7u, 8u, 40u, 4095u, 4096u, 4097u, 12345u, 65535u, 65536u, 65537u,
                             (1u << 30) - 1, 1u << 30, (1u << 30) + 7, top - 1, top};
  for (uint32_t d : edge_d) {
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, 2 * (d / 2) + 1, top - 1, top}) if (n <= top) check(d, n);
    for (int i = 0; i < 20000; ++i) check(d, uint32_t(g() & top));
    for (uint32_t k = 1; k < 64 && uint64_t(k) * d <= top; ++k) { check(d, k * d - 1); check(d, k * d); }
  }
  for (int i = 0; i < 4000; ++i) {
    const uint32_t d = i % 2 ? uint32_t(g() % 5000) + 1 : uint32_t(g() % top) + 1;
    for (int j = 0; j < 500; ++j) check(d, uint32_t(g() & top));
  }
  printf("checked %ld, wrong %ld\n", checked, bad);
  return bad != 0;
}
"""


def test_fastdiv_matches_division(tmp_path):
    out = run_host_program(PROGRAM, tmp_path, opt="-O2")
    assert "wrong 0" in out and "checked" in out, out
