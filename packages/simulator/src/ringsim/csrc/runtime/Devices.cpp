#include "runtime/Devices.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringsim::runtime {

namespace {

constexpr int kDeviceCount = 1;
thread_local int tls_current_device = 0;

std::size_t capacity_from_environment() {
  const char* text = std::getenv("RINGSIM_MEMORY_BYTES");
  if (text == nullptr || *text == '\0') {
    return kDefaultCapacityBytes;
  }
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (!std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0' || errno == ERANGE) {
    throw std::invalid_argument(
        std::string("RINGSIM_MEMORY_BYTES must be a whole number of bytes, got '") + text + "'");
  }
  return static_cast<std::size_t>(value);
}

std::vector<std::unique_ptr<DeviceMemory>>& memories() {
  static std::vector<std::unique_ptr<DeviceMemory>> all = [] {
    std::vector<std::unique_ptr<DeviceMemory>> made;
    const std::size_t capacity = capacity_from_environment();
    for (int i = 0; i < kDeviceCount; ++i) {
      made.push_back(std::make_unique<DeviceMemory>(capacity));
    }
    return made;
  }();
  return all;
}

}  // namespace

int device_count() {
  return kDeviceCount;
}

void check_device(int index) {
  if (index < 0 || index >= kDeviceCount) {
    throw std::out_of_range(
        "ring device index " + std::to_string(index) + " out of range: " + std::to_string(kDeviceCount) +
        " device(s) present");
  }
}

int current_device() {
  return tls_current_device;
}

void set_current_device(int index) {
  check_device(index);
  tls_current_device = index;
}

DeviceMemory& device_memory(int index) {
  check_device(index);
  return *memories()[index];
}

int device_of(const void* ptr) {
  for (int i = 0; i < kDeviceCount; ++i) {
    if (memories()[i]->owns(ptr)) {
      return i;
    }
  }
  return -1;
}

}  // namespace ringsim::runtime
