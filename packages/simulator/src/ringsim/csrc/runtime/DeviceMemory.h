// Device memory of one simulated Ring-32 card: host memory handed out in whole sticks and
// accounted against a fixed capacity. Torch-free, so the accounting rules live in one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace ringsim::runtime {

// A stick is the device's memory access granularity; every allocation starts on one.
constexpr std::size_t kStickBytes = 128;
constexpr std::size_t kDefaultCapacityBytes = std::size_t{16} << 30;

struct MemoryStats {
  std::size_t capacity;
  std::size_t allocated;
  std::size_t peak_allocated;
  std::size_t active_allocations;
  std::size_t total_allocations;
  std::size_t total_frees;
};

// Outcome of an allocation request; `ptr` is null when the request would exceed capacity.
struct Allocation {
  void* ptr;
  std::size_t reserved_bytes;
};

class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t capacity);

  // Reserves ceil(nbytes / stick) sticks; returns {nullptr, reserved} when over capacity.
  Allocation allocate(std::size_t nbytes);
  void release(void* ptr);
  // True when `ptr` lies inside a live allocation of this device.
  bool owns(const void* ptr) const;

  // Fails (returns false) when `capacity` is below what is allocated right now.
  bool set_capacity(std::size_t capacity);
  MemoryStats stats() const;
  void reset_peak();

 private:
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, std::size_t> live_;  // base address -> reserved bytes
  MemoryStats stats_;
};

std::size_t round_up_to_stick(std::size_t nbytes);

}  // namespace ringsim::runtime
