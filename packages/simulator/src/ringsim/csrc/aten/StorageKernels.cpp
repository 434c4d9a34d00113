#include "aten/StorageKernels.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>

#include "HostView.h"
#include "RingAllocator.h"

namespace ringsim::kernels {

namespace {

constexpr c10::DispatchKeySet kRingKeys(c10::DispatchKey::PrivateUse1);

void check_creation_options(
    const c10::Device& device,
    std::optional<c10::Layout> layout,
    std::optional<bool> pin_memory) {
  TORCH_CHECK(device.is_privateuseone(), "expected a ring device, got ", device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "ring tensors are strided only");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "only CPU memory can be pinned");
}

}  // namespace

at::Tensor empty_memory_format(
    c10::IntArrayRef size,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  const c10::Device target = c10::device_or_default(device);
  check_creation_options(target, layout, pin_memory);
  const c10::DeviceGuard guard(target);
  return at::detail::empty_generic(
      size, ring_allocator(), kRingKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(
    c10::IntArrayRef size,
    c10::IntArrayRef stride,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory) {
  const c10::Device target = c10::device_or_default(device);
  check_creation_options(target, layout, pin_memory);
  const c10::DeviceGuard guard(target);
  return at::detail::empty_strided_generic(size, stride, ring_allocator(), kRingKeys, c10::dtype_or_default(dtype));
}

at::Tensor as_strided(
    const at::Tensor& self,
    c10::SymIntArrayRef size,
    c10::SymIntArrayRef stride,
    std::optional<c10::SymInt> storage_offset) {
  std::optional<int64_t> offset;
  if (storage_offset.has_value()) {
    offset = storage_offset->expect_int();
  }
  return at::native::as_strided_tensorimpl(
      self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride), offset);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& resize_(
    const at::Tensor& self,
    c10::SymIntArrayRef size,
    std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(
      memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format ", c10::MemoryFormat::Preserve);
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  at::native::resize_impl_cpu_(impl, C10_AS_INTARRAYREF_SLOW(size), std::nullopt, /*resize_storage=*/false);
  if (impl->numel() > 0) {
    const std::size_t needed = at::detail::computeStorageNbytesContiguous(
        impl->sizes(), impl->dtype().itemsize(), impl->storage_offset());
    if (needed > impl->unsafe_storage().nbytes()) {
      resize_storage_bytes(impl->unsafe_storage(), needed);
    }
  }
  if (memory_format.has_value()) {
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_empty_(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, ring_allocator(), /*resizable=*/true);
  return set_storage_offset_(self, std::move(empty), 0, c10::SymIntArrayRef({0}), c10::SymIntArrayRef());
}

at::Tensor& set_tensor_(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_storage_(at::Tensor& self, c10::Storage source) {
  return at::native::set_(self, std::move(source));
}

at::Tensor& set_storage_offset_(
    at::Tensor& self,
    c10::Storage source,
    c10::SymInt storage_offset,
    c10::SymIntArrayRef size,
    c10::SymIntArrayRef stride) {
  return at::native::set_storage_cpu_(
      self,
      std::move(source),
      storage_offset.expect_int(),
      C10_AS_INTARRAYREF_SLOW(size),
      C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy needs defined source and destination tensors");
  at::Tensor source = self.device().is_privateuseone() ? host_view(self) : self;
  at::Tensor target = dst.device().is_privateuseone() ? host_view(dst) : dst;
  at::native::copy_(target, source, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  resize_(dst, c10::fromIntArrayRefSlow(self.sizes()), std::nullopt);
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::native::_local_scalar_dense_cpu(host_view(self));
}

}  // namespace ringsim::kernels
