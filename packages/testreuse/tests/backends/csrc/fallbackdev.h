// Device state shared by the runtime, the kernels and the Python module of the fallback device.
#pragma once

#include <c10/core/Device.h>

namespace fallbackdev {

// Two devices, so that tests needing a second device (cross-device copies, deviceCountAtLeast(2)) run.
constexpr c10::DeviceIndex kDeviceCount = 2;

c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
c10::DeviceIndex exchange_device(c10::DeviceIndex index);

} // namespace fallbackdev
