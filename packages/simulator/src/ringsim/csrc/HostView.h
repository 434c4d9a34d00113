// CPU tensors that alias ring device memory. Copies and compute kernels reach device memory only
// through these, so "where the host touches device memory" is one function.
#pragma once

#include <ATen/core/Tensor.h>

namespace ringsim {

// A CPU tensor over exactly `device_tensor`'s elements (sizes, strides, storage offset, dtype,
// conjugate and negative bits), sharing its memory and keeping its storage alive.
at::Tensor host_view(const at::Tensor& device_tensor);
// A flat uint8 CPU tensor over the whole untyped storage of `device_tensor`.
at::Tensor storage_host_view(const at::Tensor& device_tensor);

}  // namespace ringsim
