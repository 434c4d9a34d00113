#include "HostView.h"

#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

namespace ringsim {

namespace {

void drop_storage_reference(void* context) {
  delete static_cast<c10::Storage*>(context);
}

// A CPU storage over the device storage's bytes that owns a reference to the device storage.
c10::Storage host_alias_of(const c10::Storage& device_storage) {
  void* bytes = device_storage.unsafeGetStorageImpl()->data_ptr().get();
  auto* keep_alive = new c10::Storage(device_storage);
  c10::DataPtr data(bytes, keep_alive, &drop_storage_reference, c10::Device(c10::DeviceType::CPU));
  return {c10::Storage::use_byte_size_t(), device_storage.nbytes(), std::move(data), nullptr, false};
}

void check_ring(const at::Tensor& tensor) {
  TORCH_CHECK(tensor.defined(), "host_view needs a defined tensor");
  TORCH_CHECK(tensor.device().is_privateuseone(), "host_view needs a ring tensor, got one on ", tensor.device());
  TORCH_CHECK(tensor.layout() == c10::kStrided, "host_view needs a strided tensor");
}

}  // namespace

at::Tensor host_view(const at::Tensor& device_tensor) {
  check_ring(device_tensor);
  auto alias = at::detail::make_tensor<c10::TensorImpl>(
      host_alias_of(device_tensor.storage()), c10::DispatchKeySet(c10::DispatchKey::CPU), device_tensor.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(
      device_tensor.sizes(), device_tensor.strides(), device_tensor.storage_offset());
  alias._set_conj(device_tensor.is_conj());
  alias._set_neg(device_tensor.is_neg());
  return alias;
}

at::Tensor storage_host_view(const at::Tensor& device_tensor) {
  check_ring(device_tensor);
  const c10::Storage& storage = device_tensor.storage();
  auto alias = at::detail::make_tensor<c10::TensorImpl>(
      host_alias_of(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), caffe2::TypeMeta::Make<uint8_t>());
  alias.unsafeGetTensorImpl()->set_sizes_contiguous({static_cast<int64_t>(storage.nbytes())});
  return alias;
}

}  // namespace ringsim
