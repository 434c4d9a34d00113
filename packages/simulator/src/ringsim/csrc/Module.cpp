// ringsim._C: the Python face of the native runtime. Loading it registers the allocator, guard,
// hooks and storage kernels (static registrations in the other files).
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "HostView.h"
#include "Replay.h"
#include "RingGenerator.h"
#include "runtime/Devices.h"

namespace {

pybind11::dict memory_stats(int device) {
  const ringsim::runtime::MemoryStats stats = ringsim::runtime::device_memory(device).stats();
  pybind11::dict out;
  out["capacity"] = stats.capacity;
  out["allocated"] = stats.allocated;
  out["peak_allocated"] = stats.peak_allocated;
  out["active_allocations"] = stats.active_allocations;
  out["total_allocations"] = stats.total_allocations;
  out["total_frees"] = stats.total_frees;
  return out;
}

void set_memory_capacity(int device, std::size_t capacity) {
  auto& memory = ringsim::runtime::device_memory(device);
  if (!memory.set_capacity(capacity)) {
    throw pybind11::value_error(
        "ring:" + std::to_string(device) + " capacity " + std::to_string(capacity) + " bytes is below the " +
        std::to_string(memory.stats().allocated) + " bytes already allocated");
  }
}

pybind11::object default_generator(int device) {
  // The default generators live for the whole process, so a borrowed wrapper is safe.
  return pybind11::reinterpret_steal<pybind11::object>(
      THPGenerator_initDefaultGenerator(ringsim::default_ring_generator(static_cast<c10::DeviceIndex>(device))));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Native runtime of the Ring-32 simulated device.";
  m.attr("STICK_BYTES") = ringsim::runtime::kStickBytes;
  m.def("device_count", &ringsim::runtime::device_count);
  m.def("current_device", &ringsim::runtime::current_device);
  m.def("set_device", &ringsim::runtime::set_current_device);
  m.def("memory_stats", &memory_stats, pybind11::arg("device"));
  m.def("reset_peak_memory", [](int device) { ringsim::runtime::device_memory(device).reset_peak(); });
  m.def("set_memory_capacity", &set_memory_capacity, pybind11::arg("device"), pybind11::arg("capacity"));
  m.def(
      "host_view",
      &ringsim::host_view,
      pybind11::arg("tensor"),
      "A CPU tensor over exactly the ring tensor's memory: same sizes, strides, storage offset, dtype and\n"
      "conjugate/negative bits. Writes land in the device tensor; it keeps the device storage alive but\n"
      "does not follow a later resize of it, so take it right before use.");
  m.def(
      "storage_host_view",
      &ringsim::storage_host_view,
      pybind11::arg("tensor"),
      "A flat uint8 CPU tensor over the whole untyped storage behind the ring tensor.");
  m.def("default_generator", &default_generator, pybind11::arg("device"));
  m.def("host_generator", &ringsim::host_generator, pybind11::arg("generator"));
  ringsim::replay::bind(m);
}
