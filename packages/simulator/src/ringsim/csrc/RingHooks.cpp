#include "RingHooks.h"

#include <c10/util/Exception.h>

#include "RingAllocator.h"
#include "RingGenerator.h"
#include "runtime/Devices.h"

namespace ringsim {

bool RingHooks::isBuilt() const {
  return true;
}

bool RingHooks::isAvailable() const {
  return runtime::device_count() > 0;
}

bool RingHooks::hasPrimaryContext(c10::DeviceIndex /*device_index*/) const {
  return true;
}

c10::DeviceIndex RingHooks::deviceCount() const {
  return static_cast<c10::DeviceIndex>(runtime::device_count());
}

void RingHooks::setCurrentDevice(c10::DeviceIndex device) const {
  runtime::set_current_device(device);
}

c10::DeviceIndex RingHooks::getCurrentDevice() const {
  return static_cast<c10::DeviceIndex>(runtime::current_device());
}

c10::DeviceIndex RingHooks::exchangeDevice(c10::DeviceIndex device) const {
  const c10::DeviceIndex previous = getCurrentDevice();
  runtime::set_current_device(device);
  return previous;
}

c10::DeviceIndex RingHooks::maybeExchangeDevice(c10::DeviceIndex device) const {
  if (device < 0 || device >= runtime::device_count()) {
    return getCurrentDevice();
  }
  return exchangeDevice(device);
}

const at::Generator& RingHooks::getDefaultGenerator(c10::DeviceIndex device_index) const {
  return default_ring_generator(device_index);
}

at::Generator RingHooks::getNewGenerator(c10::DeviceIndex device_index) const {
  return make_ring_generator(device_index);
}

at::Device RingHooks::getDeviceFromPtr(void* data) const {
  const int index = runtime::device_of(data);
  TORCH_CHECK(index >= 0, "pointer ", data, " is not in ring device memory");
  return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)};
}

bool RingHooks::isPinnedPtr(const void* /*data*/) const {
  return false;
}

void RingHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  resize_storage_bytes(storage, newsize);
}

namespace {
const bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new RingHooks());
  return true;
}();
}  // namespace

}  // namespace ringsim
