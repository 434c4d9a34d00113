// The Python face of the fallback device: the functions torch expects on `torch.<device>`.
#include "fallbackdev.h"

#include <torch/extension.h>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Minimal privateuse1 device: host memory, metadata and copy kernels, CPU fallback for the rest.";
  m.def("is_available", [] { return true; });
  m.def("is_initialized", [] { return true; });
  m.def("device_count", [] { return static_cast<int>(fallbackdev::kDeviceCount); });
  m.def("current_device", [] { return static_cast<int>(fallbackdev::current_device()); });
  m.def("set_device", [](int index) { fallbackdev::set_device(static_cast<c10::DeviceIndex>(index)); });
  m.def("synchronize", [](py::object /*device*/) {}, py::arg("device") = py::none());
  // Random numbers come from the CPU generator through the fallback, which torch.manual_seed already seeds.
  m.def("manual_seed", [](int64_t /*seed*/) {});
  m.def("manual_seed_all", [](int64_t /*seed*/) {});
  m.def("_is_in_bad_fork", [] { return false; });
}
