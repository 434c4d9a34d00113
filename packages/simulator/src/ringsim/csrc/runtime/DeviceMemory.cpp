#include "runtime/DeviceMemory.h"

#include <cstdlib>

namespace ringsim::runtime {

std::size_t round_up_to_stick(std::size_t nbytes) {
  return (nbytes + kStickBytes - 1) / kStickBytes * kStickBytes;
}

DeviceMemory::DeviceMemory(std::size_t capacity) : stats_{capacity, 0, 0, 0, 0, 0} {}

Allocation DeviceMemory::allocate(std::size_t nbytes) {
  const std::size_t reserved = round_up_to_stick(nbytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reserved > stats_.capacity - stats_.allocated) {
      return {nullptr, reserved};
    }
    stats_.allocated += reserved;
  }
  void* ptr = std::aligned_alloc(kStickBytes, reserved);
  std::lock_guard<std::mutex> lock(mutex_);
  if (ptr == nullptr) {
    stats_.allocated -= reserved;
    return {nullptr, reserved};
  }
  live_.emplace(reinterpret_cast<std::uintptr_t>(ptr), reserved);
  stats_.active_allocations += 1;
  stats_.total_allocations += 1;
  if (stats_.allocated > stats_.peak_allocated) {
    stats_.peak_allocated = stats_.allocated;
  }
  return {ptr, reserved};
}

void DeviceMemory::release(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == live_.end()) {
      return;
    }
    stats_.allocated -= it->second;
    stats_.active_allocations -= 1;
    stats_.total_frees += 1;
    live_.erase(it);
  }
  std::free(ptr);
}

bool DeviceMemory::owns(const void* ptr) const {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.upper_bound(address);
  if (it == live_.begin()) {
    return false;
  }
  --it;
  return address < it->first + it->second;
}

bool DeviceMemory::set_capacity(std::size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capacity < stats_.allocated) {
    return false;
  }
  stats_.capacity = capacity;
  return true;
}

MemoryStats DeviceMemory::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void DeviceMemory::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated = stats_.allocated;
}

}  // namespace ringsim::runtime
