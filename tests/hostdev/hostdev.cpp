// hostdev: a test-only out-of-tree device for the PrivateUse1 dispatch key, backed by host memory. It is what a
// vendor's device extension is, cut to the minimum (PyTorch's torch_openreg test extension is the model): an
// allocator, a device guard, the PrivateUse1 hooks, the core ATen ops that create, view, copy, resize, fill and
// read tensors, and a boxed fallback that runs every other op on CPU.
//
// The fallback logs the name of every op it runs, so a test can prove which kernel of an op ran: an op with a
// PrivateUse1 kernel never appears in the log; an op that only has a CPU kernel does (hostdev::cpu_only, the
// control). It is a separate shared library, never part of yirage's _C: a process holds one PrivateUse1
// backend, and a user may have a real one.
//
// Loaded with torch.ops.load_library (no pybind11); hostdev::* ops are its Python-facing API. One device.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/library.h>

#include <mutex>
#include <string>
#include <vector>

namespace hostdev {

constexpr c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;
constexpr c10::DeviceIndex kDeviceCount = 1;

// ---- allocator: host memory, tagged with the device ----

struct Allocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    return {data, data, &release, c10::Device(kDevice, 0)};
  }
  static void release(void* ptr) {
    if (ptr) c10::free_cpu(ptr);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, size_t count) const override { default_copy_data(dest, src, count); }
};

Allocator allocator;
REGISTER_ALLOCATOR(kDevice, &allocator)

// ---- device guard: one device, one (default) stream, synchronous ----

thread_local c10::DeviceIndex current_device = 0;

struct Guard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDevice; }
  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kDevice, current_device); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kDevice && d.index() >= 0 && d.index() < kDeviceCount, "hostdev: no device ", d);
    current_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { current_device = d.index(); }
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return c10::Stream(c10::Stream::DEFAULT, s.device()); }
  c10::DeviceIndex deviceCount() const noexcept override { return kDeviceCount; }
  // Work is done when a call returns: events and streams have nothing to wait for.
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);

// ---- hooks ----

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  at::Device getDeviceFromPtr(void*) const override { return c10::Device(kDevice, 0); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  at::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), newsize);
  }
};

struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new Hooks()); }  // lives as long as the process
} register_hooks;

// ---- core ATen ops ----
// The view ops that have per-device kernels in ATen (as_strided, view, _reshape_alias, unfold) are ATen's own
// TensorImpl-level ones; every other view op is composite over these.

constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

// A CPU tensor over the same memory as a hostdev tensor (same sizes, strides, offset): CPU kernels then do the
// copies, fills and reads.
at::Tensor cpu_alias(const at::Tensor& t) {
  if (t.device().type() != kDevice) return t;
  c10::Storage storage(c10::Storage::use_byte_size_t{}, t.storage().nbytes(),
                       c10::DataPtr(t.storage().mutable_data(), c10::Device(c10::kCPU)), nullptr,
                       /*resizable=*/false);
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                            t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return out;
}

at::Tensor empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout>,
                 std::optional<at::Device>, std::optional<bool>, std::optional<at::MemoryFormat> memory_format) {
  return at::detail::empty_generic(size, &allocator, kKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>) {
  return at::detail::empty_strided_generic(size, stride, &allocator, kKeys, c10::dtype_or_default(dtype));
}

// _copy_from(self=src, dst): either side may be CPU; conversions, strides and broadcasting are CPU copy_'s.
at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool) {
  for (const at::Tensor* t : {&src, &dst}) {
    TORCH_CHECK(t->is_cpu() || t->device().type() == kDevice, "hostdev: copies go to and from CPU, not ",
                t->device());
  }
  cpu_alias(dst).copy_(cpu_alias(src));
  return dst;
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<at::MemoryFormat> format) {
  at::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  at::native::maybe_resize_storage_cpu(
      impl, at::detail::computeStorageNbytesContiguous(size, impl->dtype().itemsize(), impl->storage_offset()));
  if (format) {
    TORCH_CHECK(*format != at::MemoryFormat::Preserve, "hostdev: resize_ does not take memory format ", *format);
    impl->empty_tensor_restride(*format);
  }
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst) {
  resize_(dst, src.sizes(), std::nullopt);
  return copy_from(src, dst, false);
}

at::Tensor& fill_(at::Tensor& self, const at::Scalar& value) {
  cpu_alias(self).fill_(value);
  return self;
}

at::Scalar local_scalar_dense(const at::Tensor& self) { return cpu_alias(self).item(); }

at::Tensor& set_storage(at::Tensor& self, c10::Storage src, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(src));
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, stride);
  return self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &empty);
  m.impl("empty_strided", &empty_strided);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("unfold", &at::native::unfold);
  m.impl("_copy_from", &copy_from);
  m.impl("_copy_from_and_resize", &copy_from_and_resize);
  m.impl("resize_", &resize_);
  m.impl("fill_.Scalar", &fill_);
  m.impl("_local_scalar_dense", &local_scalar_dense);
  m.impl("set_.source_Storage_storage_offset", &set_storage);
}

// ---- boxed CPU fallback, with a log of what it ran ----

struct Log {
  std::mutex mutex;
  std::vector<std::string> ops;
};

Log& log() {
  static Log* l = new Log();
  return *l;
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  {
    Log& l = log();
    std::lock_guard<std::mutex> lock(l.mutex);
    l.ops.push_back(op.schema().name());
  }
  // A view op run on CPU copies of its inputs would return a copy, not a view: an error, so that a view op
  // missing above is found at once.
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>()); }

// ---- the Python-facing API ----

std::vector<std::string> fallback_ops() {
  Log& l = log();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.ops;
}

void clear_fallback_ops() {
  Log& l = log();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.ops.clear();
}

at::Tensor cpu_only(const at::Tensor& x) { return x.mul(2); }

TORCH_LIBRARY(hostdev, m) {
  m.def("device_count() -> int", [] { return static_cast<int64_t>(kDeviceCount); });
  m.def("current_device() -> int", [] { return static_cast<int64_t>(current_device); });
  m.def("set_device(int index) -> ()",
        [](int64_t index) { Guard().setDevice(c10::Device(kDevice, static_cast<c10::DeviceIndex>(index))); });
  m.def("fallback_ops() -> str[]", &fallback_ops);
  m.def("clear_fallback_ops() -> ()", &clear_fallback_ops);
  // The control: an op with a CPU kernel only, so on hostdev it runs through the fallback (and is logged).
  m.def("cpu_only(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(hostdev, CPU, m) { m.impl("cpu_only", &cpu_only); }

}  // namespace hostdev
