// Native replay of cached kernel calls: a call whose arguments look like one seen before runs the same program
// (DMA byte copies, compute through the dispatcher, ring transfers) without re-entering Python.
#pragma once

#include <pybind11/pybind11.h>

namespace ringsim::replay {

// Adds replay_install, replay_run, replay_block, replay_drain, replay_launches and replay_clear to `m`.
void bind(pybind11::module_& m);

}  // namespace ringsim::replay
