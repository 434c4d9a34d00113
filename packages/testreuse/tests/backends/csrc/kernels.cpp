// The only kernels the fallback device implements itself: allocation, views and copies, which must produce
// tensors that live on the device (and views that share their base's storage). Every other operator goes through the boxed CPU fallback at the bottom.
#include "fallbackdev.h"

#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace fallbackdev {
namespace {

constexpr c10::DispatchKeySet kDeviceKeys(c10::DispatchKey::PrivateUse1);

void check_factory_args(const c10::Device& device, std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(device.is_privateuseone(), "fallbackdev: expected a fallbackdev device, got ", device);
  TORCH_CHECK_NOT_IMPLEMENTED(c10::layout_or_default(layout) == c10::Layout::Strided,
                              "fallbackdev: only strided tensors are supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "fallbackdev: pinned memory is a CPU concept");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device_opt,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  const auto device = c10::device_or_default(device_opt);
  check_factory_args(device, layout, pin_memory);
  const c10::DeviceGuard guard(device);
  return at::detail::empty_generic(size, at::GetAllocator(at::kPrivateUse1), kDeviceKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device_opt,
                         std::optional<bool> pin_memory) {
  const auto device = c10::device_or_default(device_opt);
  check_factory_args(device, layout, pin_memory);
  const c10::DeviceGuard guard(device);
  return at::detail::empty_strided_generic(size, stride, at::GetAllocator(at::kPrivateUse1), kDeviceKeys,
                                           c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  return at::cpu::as_strided_symint(self, size, stride, std::move(storage_offset));
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

// Views that have no backend-generic kernel: through the CPU fallback they would silently return copies.
at::Tensor view_as_real(const at::Tensor& self) { return at::native::view_as_real(self); }

at::Tensor view_as_complex(const at::Tensor& self) { return at::native::view_as_complex(self); }

at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), memory_format);
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) { return at::native::set_(self, source); }

at::Tensor& set_source_storage_offset(at::Tensor& self, at::Storage source, int64_t storage_offset,
                                      c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::cpu::set_(self, source, storage_offset, size, stride);
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

// Device memory is host memory: a device tensor seen through a CPU alias of the same bytes, strides, offset and
// conjugate/negative bits.
at::Tensor host_alias(const at::Tensor& tensor) {
  if (tensor.is_cpu()) {
    return tensor;
  }
  auto alias = at::from_blob(tensor.data_ptr(), tensor.sizes(), tensor.strides(), tensor.options().device(at::kCPU));
  alias._set_conj(tensor.is_conj());
  alias._set_neg(tensor.is_neg());
  return alias;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "fallbackdev: copy between undefined tensors");
  if (self.numel() == 0) {
    return dst;
  }
  auto dst_alias = host_alias(dst);
  at::native::copy_(dst_alias, host_alias(self), non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) { return at::native::_local_scalar_dense_cpu(self); }

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) { at::native::cpu_fallback(op, stack); }

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("view_as_real", view_as_real);
  m.impl("view_as_complex", view_as_complex);
  m.impl("unfold", unfold);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
}

// The conjugate and negative fallbacks would materialise the bit with clone(), which copies through _copy_from
// again; _copy_from honours both bits itself (see host_alias), so let the call through untouched.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>()); }

} // namespace fallbackdev
