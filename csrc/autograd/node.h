// A graph node lighter than torch::autograd::Function's (CppNode): every op's Autograd kernel builds one
// directly, as PyTorch's generated autograd code does (and torch.func.grad, which refuses C++ Functions, works). On CPU, softmax at 2x64 took 29.8 us per
// forward+backward with a Function and 23.5 us with this node (torch's own softmax: 20-21 us); CppNode's output
// wrapping, its saved-data hash map of IValues and its per-call vectors are most of the difference.
//
// Saved tensors are torch::autograd::SavedVariable, as in PyTorch's own nodes: version counters checked (an
// in-place change after the forward raises), saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks,
// non-reentrant checkpointing) applied, a second backward without retain_graph=True refused.
//
// torch::autograd::Node is owned by std::shared_ptr up to torch 2.12 and by c10::intrusive_ptr after; the pointer
// type is read off Edge::function and both cases are handled here.
#pragma once

#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <array>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace yirage::autograd_node {

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

using NodePtr = decltype(torch::autograd::Edge::function);  // std::shared_ptr<Node> or c10::intrusive_ptr<Node>

template <typename P>
struct IsSharedPtr : std::false_type {};
template <typename T>
struct IsSharedPtr<std::shared_ptr<T>> : std::true_type {};

// shared_ptr torch frees long chains of nodes without recursion through deleteNode (found by ADL: the call
// depends on N, so a torch without it never looks).
template <typename N>
void delete_node(N* node) {
  deleteNode(node);
}

template <typename N, typename P = NodePtr>
auto make_node() {
  if constexpr (IsSharedPtr<P>::value) {
    return std::shared_ptr<N>(new N(), &delete_node<N>);
  } else {
    return c10::make_intrusive<N>();
  }
}

// An owning pointer to a node from inside it (SavedVariable::unpack wants one for saved outputs).
template <typename N, typename P = NodePtr>
P self_ptr(N* node) {
  if constexpr (IsSharedPtr<P>::value) {
    return node->shared_from_this();
  } else {
    return P::reclaim_copy(node);
  }
}

// A node with NSaved saved tensors. Derived nodes implement apply() (one gradient per next edge, in the
// order of the inputs given to connect) and name().
template <size_t NSaved>
struct SavedNode : torch::autograd::Node {
  std::array<SavedVariable, NSaved> saved;

  std::array<at::Tensor, NSaved> unpack_saved() {
    std::array<at::Tensor, NSaved> out;
    auto self = self_ptr(this);
    for (size_t i = 0; i < NSaved; ++i) out[i] = saved[i].unpack(self);
    return out;
  }
  void release_variables() override {
    for (auto& s : saved) s.reset_data();
  }
};

// Makes node N, points it at the inputs (its next edges, one per input: tensors or optional tensors) and
// makes it the grad_fn of the outputs (output i is its input i). Save outputs after this, inputs any time.
template <typename N, typename... Inputs>
auto connect(std::initializer_list<at::Tensor> outputs, const Inputs&... inputs) {
  auto node = make_node<N>();
  node->set_next_edges(torch::autograd::collect_next_edges(inputs...));
  for (const at::Tensor& out : outputs) torch::autograd::set_history(out, node);
  return node;
}

}  // namespace yirage::autograd_node
