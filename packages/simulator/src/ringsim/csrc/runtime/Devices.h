// The simulated cards present in this process and which one the calling thread uses.
// Torch-free: the glue layer (guard, hooks, allocator) is built on these calls.
#pragma once

#include <cstdint>

#include "runtime/DeviceMemory.h"

namespace ringsim::runtime {

int device_count();
// Throws std::out_of_range for an index that names no device.
void check_device(int index);
int current_device();
void set_current_device(int index);
// The memory of device `index`; its capacity comes from RINGSIM_MEMORY_BYTES on first use.
DeviceMemory& device_memory(int index);
// The device whose memory holds `ptr`, or -1.
int device_of(const void* ptr);

}  // namespace ringsim::runtime
