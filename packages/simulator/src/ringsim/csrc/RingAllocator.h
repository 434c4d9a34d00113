// The c10::Allocator behind every ring storage: runtime device memory, OOM as torch.OutOfMemoryError.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

namespace ringsim {

at::Allocator* ring_allocator();
// Grows or shrinks a ring storage in place of its bytes, keeping the common prefix.
void resize_storage_bytes(const c10::Storage& storage, std::size_t new_nbytes);

}  // namespace ringsim
