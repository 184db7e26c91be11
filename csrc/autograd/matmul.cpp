// Autograd for matmul in C++ (LibTorch users get gradients too). Forward redispatches below Autograd;
// backward is two matmuls through the dispatcher (so every backend supplies its own, and double backward
// works): grad_a = grad @ b^T and grad_b = a^T @ grad, each summed over the batch dims its input broadcast.
// Saved: a and b. Sizes are read as SymInts, so torch.compile traces this without specializing them.
#include <ATen/ExpandUtils.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include "autograd/common.h"
#include "autograd/node.h"

namespace yirage {
namespace {

using torch::autograd::variable_list;

const auto& matmul_op() {
  static const auto op = find_op<at::Tensor(const at::Tensor&, const at::Tensor&)>("yirage::matmul");
  return op;
}

// grad_fn of the product; saved: a and b. The backward's products go through yirage::matmul's own Autograd
// kernel, so a second derivative works.
struct MatmulNode : autograd_node::SavedNode<2> {
  variable_list apply(variable_list&& grads) override {
    const at::Tensor& g = grads[0];
    const bool a_grad = should_compute_output(0), b_grad = should_compute_output(1);
    if (!g.defined() || (!a_grad && !b_grad)) return {at::Tensor(), at::Tensor()};
    const auto saved = unpack_saved();
    const at::Tensor &a = saved[0], &b = saved[1];
    at::Tensor ga, gb;
    if (a_grad) ga = at::sum_to(matmul_op().call(g, b.mT()), a.sym_sizes());
    if (b_grad) {
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
  std::string name() const override { return "YirageMatmulBackward"; }
};

at::Tensor matmul_autograd(const at::Tensor& a, const at::Tensor& b) {
  check_no_tangents("matmul", a, b);
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = matmul_op().call(a, b);
  }
  if (!needs_graph(a, b)) return out;
  auto node = autograd_node::connect<MatmulNode>({out}, a, b);
  node->saved[0] = autograd_node::SavedVariable(a, /*is_output=*/false);
  node->saved[1] = autograd_node::SavedVariable(b, /*is_output=*/false);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) { m.impl("matmul", &matmul_autograd); }

}  // namespace yirage
