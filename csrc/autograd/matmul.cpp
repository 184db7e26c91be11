// Autograd for matmul in C++ (LibTorch users get gradients too). Forward redispatches below Autograd;
// backward is two matmuls through the dispatcher (so every backend supplies its own, and double backward
// works): grad_a = grad @ b^T and grad_b = a^T @ grad, each summed over the batch dims its input broadcast.
// Saved: a and b. Sizes are read as SymInts, so torch.compile traces this without specializing them.
#include <ATen/ExpandUtils.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "autograd/common.h"

namespace yirage {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const auto& matmul_op() {
  static const auto op = find_op<at::Tensor(const at::Tensor&, const at::Tensor&)>("yirage::matmul");
  return op;
}

class MatmulFunction : public torch::autograd::Function<MatmulFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({a, b});
    return matmul_op().call(a, b);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1], &g = grads[0];
    at::Tensor ga, gb;
    if (ctx->needs_input_grad(0)) {
      ga = at::sum_to(matmul_op().call(g, b.mT()), a.sym_sizes());
    }
    if (ctx->needs_input_grad(1)) {
      if (b.dim() == 2 && a.dim() > 2) {
        // a b shared by every matrix of a batched a: the batch folds into the contraction, (a rows)^T @ (g rows),
        // one (K, B*M) @ (B*M, N) product and no (B, K, N) intermediate
        gb = matmul_op().call(a.reshape_symint({-1, a.sym_size(-1)}).mT(), g.reshape_symint({-1, g.sym_size(-1)}));
      } else {
        gb = at::sum_to(matmul_op().call(a.mT(), g), b.sym_sizes());
      }
    }
    return {ga, gb};
  }
};

at::Tensor matmul_autograd(const at::Tensor& a, const at::Tensor& b) {
  check_no_tangents("matmul", a, b);
  if (!needs_graph(a, b)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return matmul_op().call(a, b);
  }
  return MatmulFunction::apply(a, b);
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) { m.impl("matmul", &matmul_autograd); }

}  // namespace yirage
