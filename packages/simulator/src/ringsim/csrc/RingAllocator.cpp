#include "RingAllocator.h"

#include <cstring>

#include <c10/util/Exception.h>

#include "runtime/Devices.h"

namespace ringsim {

namespace {

void release_device_pointer(void* ptr) {
  const int index = runtime::device_of(ptr);
  if (index >= 0) {
    runtime::device_memory(index).release(ptr);
  }
}

struct RingAllocator final : at::Allocator {
  at::DataPtr allocate(std::size_t nbytes) override {
    const int index = runtime::current_device();
    const c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index));
    if (nbytes == 0) {
      return {nullptr, nullptr, &release_device_pointer, device};
    }
    auto& memory = runtime::device_memory(index);
    const runtime::Allocation got = memory.allocate(nbytes);
    if (got.ptr == nullptr) {
      const runtime::MemoryStats stats = memory.stats();
      TORCH_CHECK_WITH(
          OutOfMemoryError,
          false,
          "ring:",
          index,
          " out of memory: tried to allocate ",
          nbytes,
          " bytes (",
          got.reserved_bytes,
          " in 128-byte sticks) with ",
          stats.allocated,
          " of ",
          stats.capacity,
          " bytes capacity allocated (set the capacity with RINGSIM_MEMORY_BYTES or ringsim.runtime.set_memory_capacity)");
    }
    return {got.ptr, got.ptr, &release_device_pointer, device};
  }

  at::DeleterFnPtr raw_deleter() const override {
    return &release_device_pointer;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

RingAllocator g_allocator;

}  // namespace

at::Allocator* ring_allocator() {
  return &g_allocator;
}

void resize_storage_bytes(const c10::Storage& storage, std::size_t new_nbytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  at::DataPtr fresh = impl->allocator()->allocate(new_nbytes);
  const std::size_t keep = std::min(new_nbytes, impl->nbytes());
  if (keep > 0 && impl->data_ptr().get() != nullptr) {
    std::memcpy(fresh.get(), impl->data_ptr().get(), keep);
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(new_nbytes);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace ringsim
