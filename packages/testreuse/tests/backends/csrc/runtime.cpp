// Runtime glue: host-memory allocator, device guard and PrivateUse1 hooks.
// Device memory is ordinary host memory, so kernels can alias it as CPU tensors; tensors still carry a real
// storage with real strides, offsets and data pointers, which upstream view and storage tests inspect.
#include "fallbackdev.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>


namespace fallbackdev {
namespace {

thread_local c10::DeviceIndex tls_current_device = 0;

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < kDeviceCount, "fallbackdev: invalid device index ", static_cast<int>(index),
              " (device count is ", static_cast<int>(kDeviceCount), ")");
}

struct HostMemoryAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Device device(c10::DeviceType::PrivateUse1, current_device());
    void* data = nbytes == 0 ? nullptr : c10::alloc_cpu(nbytes);
    return {data, data, &c10::free_cpu, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &c10::free_cpu; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

HostMemoryAllocator host_memory_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &host_memory_allocator);

struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return static_type; }

  c10::Device exchangeDevice(c10::Device device) const override {
    return {static_type, fallbackdev::exchange_device(device.index())};
  }

  c10::Device getDevice() const override { return {static_type, current_device()}; }

  void setDevice(c10::Device device) const override { set_device(device.index()); }

  void uncheckedSetDevice(c10::Device device) const noexcept override { tls_current_device = device.index(); }

  // Work is synchronous, so every device has exactly one stream: the default one.
  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override { return stream; }

  c10::DeviceIndex deviceCount() const noexcept override { return kDeviceCount; }

  void synchronizeDevice(c10::DeviceIndex /*device_index*/) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return kDeviceCount; }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override { return fallbackdev::exchange_device(device); }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return fallbackdev::exchange_device(device);
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), newsize);
  }
};

const bool hooks_registered [[maybe_unused]] = [] {
  static Hooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}();

} // namespace

c10::DeviceIndex current_device() { return tls_current_device; }

void set_device(c10::DeviceIndex index) {
  check_index(index);
  tls_current_device = index;
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  const auto previous = tls_current_device;
  if (index >= 0) {
    set_device(index);
  }
  return previous;
}

} // namespace fallbackdev
