#include "RingGuard.h"

#include <c10/util/Exception.h>

#include "runtime/Devices.h"

namespace ringsim {

namespace {

c10::Device ring_device(int index) {
  return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)};
}

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK(
      index >= 0 && index < runtime::device_count(),
      "ring device index ",
      static_cast<int>(index),
      " out of range: ",
      runtime::device_count(),
      " device(s) present");
}

}  // namespace

c10::DeviceType RingGuardImpl::type() const {
  return static_type;
}

c10::Device RingGuardImpl::exchangeDevice(c10::Device device) const {
  const c10::Device previous = getDevice();
  if (device.index() != previous.index()) {
    setDevice(device);
  }
  return previous;
}

c10::Device RingGuardImpl::getDevice() const {
  return ring_device(runtime::current_device());
}

void RingGuardImpl::setDevice(c10::Device device) const {
  TORCH_CHECK(device.is_privateuseone(), "expected a ring device, got ", device);
  check_index(device.index());
  runtime::set_current_device(device.index());
}

void RingGuardImpl::uncheckedSetDevice(c10::Device device) const noexcept {
  if (device.index() >= 0 && device.index() < runtime::device_count()) {
    runtime::set_current_device(device.index());
  }
}

c10::Stream RingGuardImpl::getStream(c10::Device device) const {
  return c10::Stream(c10::Stream::DEFAULT, device);
}

c10::Stream RingGuardImpl::getDefaultStream(c10::Device device) const {
  return c10::Stream(c10::Stream::DEFAULT, device);
}

c10::Stream RingGuardImpl::exchangeStream(c10::Stream stream) const {
  return c10::Stream(c10::Stream::DEFAULT, stream.device());
}

c10::DeviceIndex RingGuardImpl::deviceCount() const noexcept {
  return static_cast<c10::DeviceIndex>(runtime::device_count());
}

bool RingGuardImpl::queryStream(const c10::Stream& /*stream*/) const {
  return true;
}

void RingGuardImpl::synchronizeStream(const c10::Stream& /*stream*/) const {}

void RingGuardImpl::synchronizeDevice(c10::DeviceIndex /*device_index*/) const {}

C10_REGISTER_GUARD_IMPL(PrivateUse1, RingGuardImpl);

}  // namespace ringsim
