// yirage from a LibTorch program, no Python: walk the backend registry, call rms_norm and fused_add_rms_norm
// through the dispatcher (the typed header yirage/ops.h), check them against ATen, and run a backward through
// autograd; then every other typed entry point of yirage/ops.h against ATen. Exits 1 on any mismatch.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "backend/backend.h"
#include "yirage/ops.h"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%-66s %s\n", what.c_str(), ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1e", v);
  return buf;
}

// max |a - b| / max(1, max |b|), in float64
double rel_err(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(1.0, b.abs().max().item<double>());
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() / scale;
}

at::Tensor rms_norm_ref(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x * at::rsqrt(x.square().mean(-1, /*keepdim=*/true) + eps) * w;
}

}  // namespace

int main() {
  // ---- the backend registry ----
  auto& registry = yirage::BackendRegistry::get_instance();
  std::printf("backends:\n");
  for (yirage::Backend* b : registry.get_all_backends()) {
    std::printf("  %-14s %-8s %-11s %s\n", b->get_name().c_str(), b->is_device() ? "device" : "provider",
                b->is_available() ? "available" : "unavailable",
                b->is_available() ? b->get_description().c_str() : b->unavailable_reason().c_str());
  }
  std::string available;
  for (const auto& n : registry.get_available_backends()) available += " " + n;
  std::printf("available:%s\n", available.c_str());
  yirage::Backend* cuda = registry.get_backend("cuda");
  std::printf("cuda: %s%s\n", cuda && cuda->is_available() ? "available" : "unavailable: ",
              cuda && !cuda->is_available() ? cuda->unavailable_reason().c_str() : "");
  std::printf("default backend: %s\n", yirage::get_default_backend().c_str());
  yirage::Backend* cpu = registry.get_backend("cpu");
  check(cpu != nullptr && cpu->is_available() && cpu->get_compute_units() > 0, "cpu backend available, compute units > 0");
  check(cpu != nullptr && cpu->supports_data_type(at::kBFloat16), "cpu backend supports bfloat16");
  check(cuda != nullptr && (cuda->is_available() || !cuda->unavailable_reason().empty()),
        "cuda backend: available, or a reason why not");
  check(registry.get_backend("no-such-backend") == nullptr, "unknown backend name gives nullptr");
  check(cpu != nullptr && cpu->op_support().at("rms_norm") == yirage::OpSupport::native,
        "rms_norm runs natively on cpu (from the dispatcher)");
  try {
    const std::string chosen = registry.select("cuda", {"cpu"});
    check(chosen == (cuda->is_available() ? "cuda" : "cpu"), "select('cuda', {'cpu'}) -> " + chosen);
  } catch (const std::exception& e) {
    check(false, std::string("select('cuda', {'cpu'}) threw: ") + e.what());
  }

  // ---- the ops, through the dispatcher ----
  at::manual_seed(0);
  const double eps = 1e-6;
  const at::Tensor x = at::randn({16, 257});
  const at::Tensor w = at::randn({257});
  const at::Tensor res = at::randn({16, 257});
  const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);

  const at::Tensor y = yirage::rms_norm(x, w, eps);
  const double e1 = rel_err(y, rms_norm_ref(xd, wd, eps));
  check(e1 < 1e-5, "rms_norm (16, 257) float32 vs ATen, rel err " + sci(e1));

  const auto [out, h] = yirage::fused_add_rms_norm(x, res, w, eps);
  const double e2 = rel_err(h, xd + res.to(at::kDouble));
  const double e3 = rel_err(out, rms_norm_ref(h.to(at::kDouble), wd, eps));
  check(e2 < 1e-6 && e3 < 1e-5, "fused_add_rms_norm vs ATen, rel err h " + sci(e2) + ", out " +
                                    sci(e3));

  // the same call by schema name, as any dispatcher client would make it
  const auto op = c10::Dispatcher::singleton()
                      .findSchemaOrThrow("yirage::rms_norm", "")
                      .typed<at::Tensor(const at::Tensor&, const std::optional<at::Tensor>&, double)>();
  check(at::equal(op.call(x, w, eps), y), "findSchemaOrThrow(\"yirage::rms_norm\") gives the same result");

  // ---- backward through autograd ----
  const at::Tensor g = at::randn({16, 257});
  const at::Tensor xg = x.clone().requires_grad_(true), wg = w.clone().requires_grad_(true);
  (yirage::rms_norm(xg, wg, eps) * g).sum().backward();
  const at::Tensor xr = xd.clone().requires_grad_(true), wr = wd.clone().requires_grad_(true);
  (rms_norm_ref(xr, wr, eps) * g.to(at::kDouble)).sum().backward();
  const double gx = rel_err(xg.grad(), xr.grad()), gw = rel_err(wg.grad(), wr.grad());
  check(xg.grad().defined() && gx < 1e-4 && gw < 1e-4,
        "rms_norm backward vs ATen autograd, rel err dx " + sci(gx) + ", dw " + sci(gw));

  // ---- every typed entry point of yirage/ops.h (a signature that does not match its schema throws) ----
  try {
    const at::Tensor a = at::randn({4, 8}), ad = a.to(at::kDouble);
    const at::Tensor b = at::randn({8, 5}), wl = at::randn({6, 8}), bias = at::randn({6});
    const at::Tensor lo = ad.slice(-1, 0, 4), hi = ad.slice(-1, 4, 8);
    double worst = 0;
    worst = std::max(worst, rel_err(yirage::layer_norm(a), at::layer_norm(ad, {8}, {}, {}, 1e-5)));
    worst = std::max(worst, rel_err(yirage::softmax(a, 0), at::softmax(ad, 0)));
    worst = std::max(worst, rel_err(yirage::log_softmax(a), at::log_softmax(ad, -1)));
    worst = std::max(worst, rel_err(yirage::silu_and_mul(a), at::silu(lo) * hi));
    worst = std::max(worst, rel_err(yirage::gelu_and_mul(a, "tanh"), at::gelu(lo, "tanh") * hi));
    worst = std::max(worst, rel_err(yirage::gelu(a), at::gelu(ad)));
    worst = std::max(worst, rel_err(yirage::matmul(a, b), at::matmul(ad, b.to(at::kDouble))));
    worst = std::max(worst, rel_err(yirage::linear(a, wl, bias, "relu"),
                                    at::relu(at::linear(ad, wl.to(at::kDouble), bias.to(at::kDouble)))));
    const at::Tensor q = at::randn({1, 2, 5, 8}), k = at::randn({1, 2, 5, 8}), v = at::randn({1, 2, 5, 8});
    worst = std::max(worst, rel_err(yirage::attention(q, k, v, /*causal=*/true),
                                    at::scaled_dot_product_attention(q.to(at::kDouble), k.to(at::kDouble),
                                                                     v.to(at::kDouble), {}, 0.0, true)));
    const at::Tensor rq = at::randn({3, 2, 8}), rk = at::randn({3, 1, 8}), ang = at::randn({3, 4});
    const auto [q_rot, k_rot] = yirage::rotary_embedding(rq, rk, ang.cos(), ang.sin());
    // neox: the first half of each head is x1*cos - x2*sin
    const at::Tensor c = ang.cos().to(at::kDouble).unsqueeze(1), sn = ang.sin().to(at::kDouble).unsqueeze(1);
    const at::Tensor x1 = rq.to(at::kDouble).slice(-1, 0, 4), x2 = rq.to(at::kDouble).slice(-1, 4, 8);
    worst = std::max(worst, rel_err(q_rot, at::cat({x1 * c - x2 * sn, x2 * c + x1 * sn}, -1)));
    check(worst < 1e-5 && k_rot.sizes() == rk.sizes(),
          "layer_norm ... rotary_embedding typed calls vs ATen, worst rel err " + sci(worst));
  } catch (const std::exception& e) {
    check(false, std::string("typed calls threw: ") + e.what());
  }

  std::printf("%s\n", failures == 0 ? "all checks passed" : "SOME CHECKS FAILED");
  return failures == 0 ? 0 : 1;
}
