// A/B of the CPU kernels of two source trees in one process (not part of the library): the "old" kernel objects
// are compiled with the top namespace renamed (-Dyirage=yirage_old) and linked beside the new ones, and each
// case runs old and new alternately on the same in-cache data in one thread. Prints, per case, the median time of
// each, the median of the paired ratios old / new, and how many outputs differ (bits) with the largest difference
// in units of the last place. Built and run by benchmarks/cpu/kernel_ab.sh, which documents the options.
//   kernel_ab [reps] [case-substring]     (YIRAGE_CPU_ISA=avx2 / avx512 / avx512_bf16 / generic picks the variant of both)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/softmax.h"

#define yirage yirage_old
#include "old/csrc/kernels/cpu/activation.h"
#include "old/csrc/kernels/cpu/layer_norm.h"
#include "old/csrc/kernels/cpu/rms_norm.h"
#include "old/csrc/kernels/cpu/softmax.h"
#undef yirage

namespace nk = yirage::kernels;
namespace ok = yirage_old::kernels;
using nk::cpu::bf16;
using nk::cpu::f16;

namespace {

template <typename T>
std::vector<T> random_data(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> v(n);
  for (auto& e : v) e = nk::cpu::from_float<T>(d(gen));
  return v;
}

// distance in units of the last place between two values of T (their bit patterns as ordered integers)
template <typename T>
int64_t ulp_distance(T a, T b) {
  if constexpr (sizeof(T) == 4) {
    int32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    const int64_t ox = x < 0 ? int64_t(INT32_MIN) - x : x, oy = y < 0 ? int64_t(INT32_MIN) - y : y;
    return ox > oy ? ox - oy : oy - ox;
  } else {
    int16_t x, y;
    std::memcpy(&x, &a, 2);
    std::memcpy(&y, &b, 2);
    const int64_t ox = x < 0 ? int64_t(INT16_MIN) - x : x, oy = y < 0 ? int64_t(INT16_MIN) - y : y;
    return ox > oy ? ox - oy : oy - ox;
  }
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Times old() and new_() alternately (`reps` pairs, each call repeated `inner` times, the pair's order alternating
// too); prints the summary. The callers point both at the same output buffers once their results are compared, so
// that neither gains from where its outputs lie (with separate buffers the same source built twice measured
// 0.90-1.07x at 16 x 4096).
void ab(const std::string& name, int reps, const std::function<void()>& old_fn, const std::function<void()>& new_fn,
        int64_t diff, int64_t n, int64_t max_ulp) {
  int inner = 1;  // calls per timing: about 2 ms
  for (;;) {
    const double t0 = now_us();
    for (int i = 0; i < inner; ++i) new_fn();
    if (now_us() - t0 >= 2000 || inner >= (1 << 20)) break;
    inner *= 2;
  }
  std::vector<double> to, tn, ratio;
  auto time = [&](const std::function<void()>& fn) {
    const double t = now_us();
    for (int i = 0; i < inner; ++i) fn();
    return (now_us() - t) / inner;
  };
  for (int r = 0; r < reps; ++r) {
    double a, b;
    if (r % 2 == 0) {
      a = time(old_fn);
      b = time(new_fn);
    } else {
      b = time(new_fn);
      a = time(old_fn);
    }
    to.push_back(a);
    tn.push_back(b);
    ratio.push_back(a / b);
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("%-34s old %9.2f us  new %9.2f us  old/new %.3f  differ %lld of %lld (max %lld ulp)\n", name.c_str(),
              med(to), med(tn), med(ratio), (long long)diff, (long long)n, (long long)max_ulp);
}

template <typename T>
void compare(const std::vector<T>& a, const std::vector<T>& b, int64_t* diff, int64_t* max_ulp) {
  *diff = 0;
  *max_ulp = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      ++*diff;
      *max_ulp = std::max(*max_ulp, ulp_distance(a[i], b[i]));
    }
  }
}

template <typename T>
constexpr nk::DType dtype_of() {
  return sizeof(T) == 4 ? nk::DType::f32 : std::is_same_v<T, bf16> ? nk::DType::bf16 : nk::DType::f16;
}
template <typename T>
constexpr ok::DType old_dtype_of() {
  return sizeof(T) == 4 ? ok::DType::f32 : std::is_same_v<T, bf16> ? ok::DType::bf16 : ok::DType::f16;
}
template <typename T>
const char* tname() {
  return sizeof(T) == 4 ? "fp32" : std::is_same_v<T, bf16> ? "bf16" : "fp16";
}

bool wanted(const std::string& name, const char* filter) { return !filter || name.find(filter) != std::string::npos; }

template <typename T>
void norms(int reps, const char* filter, int64_t rows, int64_t cols) {
  const auto x = random_data<T>(rows * cols, -3.f, 3.f, 1), r = random_data<T>(rows * cols, -3.f, 3.f, 2);
  const auto w = random_data<T>(cols, 0.5f, 1.5f, 3), b = random_data<T>(cols, -0.5f, 0.5f, 4);
  std::vector<T> yo(rows * cols), yn(rows * cols), ho(rows * cols), hn(rows * cols);
  const std::string shape = std::to_string(rows) + "x" + std::to_string(cols) + " " + tname<T>();
  int64_t diff, mu;
  for (int fused = 0; fused < 2; ++fused) {
    const std::string name = std::string(fused ? "fused_add_rms_norm " : "rms_norm ") + shape;
    if (!wanted(name, filter)) continue;
    nk::RmsNormForward pn;
    ok::RmsNormForward po;
    pn.x = x.data(); pn.x_stride = cols; pn.weight = w.data(); pn.out = yn.data(); pn.rows = rows; pn.cols = cols;
    pn.dtype = dtype_of<T>();
    po.x = x.data(); po.x_stride = cols; po.weight = w.data(); po.out = yo.data(); po.rows = rows; po.cols = cols;
    po.dtype = old_dtype_of<T>();
    if (fused) {
      pn.residual = r.data(); pn.residual_stride = cols; pn.residual_out = hn.data();
      po.residual = r.data(); po.residual_stride = cols; po.residual_out = ho.data();
    }
    auto fo = [&] { ok::cpu::rms_norm_forward(po, 0, rows); };
    auto fn = [&] { nk::cpu::rms_norm_forward(pn, 0, rows); };
    fo();
    fn();
    compare(yo, yn, &diff, &mu);
    po.out = pn.out;  // timed writing the same buffers
    po.residual_out = pn.residual_out;
    ab(name, reps, fo, fn, diff, rows * cols, mu);
  }
  const std::string name = "layer_norm " + shape;
  if (!wanted(name, filter)) return;
  nk::LayerNormForward pn;
  ok::LayerNormForward po;
  pn.x = x.data(); pn.x_stride = cols; pn.weight = w.data(); pn.bias = b.data(); pn.out = yn.data(); pn.rows = rows;
  pn.cols = cols; pn.dtype = dtype_of<T>();
  po.x = x.data(); po.x_stride = cols; po.weight = w.data(); po.bias = b.data(); po.out = yo.data(); po.rows = rows;
  po.cols = cols; po.dtype = old_dtype_of<T>();
  auto fo = [&] { ok::cpu::layer_norm_forward(po, 0, rows); };
  auto fn = [&] { nk::cpu::layer_norm_forward(pn, 0, rows); };
  fo();
  fn();
  compare(yo, yn, &diff, &mu);
  po.out = pn.out;  // timed writing the same buffer
  ab(name, reps, fo, fn, diff, rows * cols, mu);
}

template <typename T>
void softmaxes(int reps, const char* filter, int64_t rows, int64_t cols) {
  const auto x = random_data<T>(rows * cols, -8.f, 8.f, 5);
  std::vector<T> yo(rows * cols), yn(rows * cols);
  int64_t diff, mu;
  for (int log = 0; log < 2; ++log) {
    const std::string name = std::string(log ? "log_softmax " : "softmax ") + std::to_string(rows) + "x" +
                             std::to_string(cols) + " " + tname<T>();
    if (!wanted(name, filter)) continue;
    nk::SoftmaxForward pn;
    ok::SoftmaxForward po;
    pn.x = x.data(); pn.x_outer_stride = cols; pn.x_dim_stride = 1; pn.out = yn.data(); pn.outer = rows;
    pn.dim = cols; pn.inner = 1; pn.log = log; pn.dtype = dtype_of<T>();
    po.x = x.data(); po.x_outer_stride = cols; po.x_dim_stride = 1; po.out = yo.data(); po.outer = rows;
    po.dim = cols; po.inner = 1; po.log = log; po.dtype = old_dtype_of<T>();
    const int64_t tn = nk::cpu::softmax_tasks(rows, cols, 1, pn.dtype).count;
    const int64_t to = ok::cpu::softmax_tasks(rows, cols, 1, po.dtype).count;
    auto fo = [&] { ok::cpu::softmax_forward(po, 0, to); };
    auto fn = [&] { nk::cpu::softmax_forward(pn, 0, tn); };
    fo();
    fn();
    compare(yo, yn, &diff, &mu);
    po.out = pn.out;  // timed writing the same buffer
    ab(name, reps, fo, fn, diff, rows * cols, mu);
  }
}

template <typename T>
void activations(int reps, const char* filter, int64_t rows, int64_t cols) {
  const auto x = random_data<T>(rows * 2 * cols, -6.f, 6.f, 6);
  std::vector<T> yo(rows * cols), yn(rows * cols);
  int64_t diff, mu;
  struct Act {
    const char* name;
    nk::Activation n;
    ok::Activation o;
    bool gated;
  };
  const Act acts[] = {{"silu_and_mul", nk::Activation::silu, ok::Activation::silu, true},
                      {"gelu_and_mul", nk::Activation::gelu, ok::Activation::gelu, true},
                      {"gelu", nk::Activation::gelu, ok::Activation::gelu, false},
                      {"gelu_tanh", nk::Activation::gelu_tanh, ok::Activation::gelu_tanh, false}};
  for (const Act& a : acts) {
    const std::string name = std::string(a.name) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " " +
                             tname<T>();
    if (!wanted(name, filter)) continue;
    nk::ActivationForward pn;
    ok::ActivationForward po;
    pn.x = x.data(); pn.x_stride = a.gated ? 2 * cols : cols; pn.out = yn.data(); pn.rows = rows; pn.cols = cols;
    pn.act = a.n; pn.gated = a.gated; pn.dtype = dtype_of<T>();
    po.x = x.data(); po.x_stride = a.gated ? 2 * cols : cols; po.out = yo.data(); po.rows = rows; po.cols = cols;
    po.act = a.o; po.gated = a.gated; po.dtype = old_dtype_of<T>();
    auto fo = [&] { ok::cpu::activation_forward(po, 0, rows * cols); };
    auto fn = [&] { nk::cpu::activation_forward(pn, 0, rows * cols); };
    fo();
    fn();
    compare(yo, yn, &diff, &mu);
    po.out = pn.out;  // timed writing the same buffer
    ab(name, reps, fo, fn, diff, rows * cols, mu);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 31;
  const char* filter = argc > 2 ? argv[2] : nullptr;
  // about 256 KiB of fp32 input per case: in the L2 cache of one core, so that the loops' instructions, not the
  // memory, are timed
  norms<float>(reps, filter, 64, 1024);
  norms<bf16>(reps, filter, 64, 1024);
  norms<f16>(reps, filter, 64, 1024);
  norms<bf16>(reps, filter, 16, 4096);
  norms<f16>(reps, filter, 16, 4096);
  softmaxes<float>(reps, filter, 64, 1024);
  softmaxes<bf16>(reps, filter, 64, 1024);
  softmaxes<f16>(reps, filter, 64, 1024);
  activations<float>(reps, filter, 64, 1024);
  activations<bf16>(reps, filter, 64, 1024);
  activations<f16>(reps, filter, 64, 1024);
  return 0;
}
