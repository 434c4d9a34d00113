// Registers the storage kernels for PrivateUse1. Compute ops are registered elsewhere; an op
// with no ring kernel fails instead of falling back to CPU, as on a real accelerator.
#include <ATen/ops/is_set_to_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include "aten/StorageKernels.h"

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &ringsim::kernels::empty_memory_format);
  m.impl("empty_strided", &ringsim::kernels::empty_strided);
  m.impl("as_strided", &ringsim::kernels::as_strided);
  m.impl("view", &ringsim::kernels::view);
  m.impl("_reshape_alias", &ringsim::kernels::reshape_alias);
  m.impl("resize_", &ringsim::kernels::resize_);
  m.impl("set_", &ringsim::kernels::set_empty_);
  m.impl("set_.source_Tensor", &ringsim::kernels::set_tensor_);
  m.impl("set_.source_Storage", &ringsim::kernels::set_storage_);
  m.impl("set_.source_Storage_storage_offset", &ringsim::kernels::set_storage_offset_);
  m.impl("_copy_from", &ringsim::kernels::copy_from);
  m.impl("_copy_from_and_resize", &ringsim::kernels::copy_from_and_resize);
  m.impl("_local_scalar_dense", &ringsim::kernels::local_scalar_dense);
  // Views with backend-specific registrations upstream, whose CPU implementations only touch metadata.
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("is_set_to", TORCH_FN(at::native::is_set_to));
}

// Copies see conjugate and negative views as they are: the host aliases carry the same bits and the
// CPU copy resolves them. The default math fallback would clone the source, which copies, which recurses.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
