// The ring device's random generator. Its state is a CPU generator it holds: kernels draw from
// that CPU generator directly, so seeding the ring generator makes device sampling reproducible.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace ringsim {

struct RingGeneratorImpl final : c10::GeneratorImpl {
  RingGeneratorImpl(c10::DeviceIndex device_index, at::Generator host);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // The CPU generator that holds this generator's state.
  const at::Generator& host() const;

 private:
  RingGeneratorImpl* clone_impl() const override;
  at::Generator host_;
};

// A fresh ring generator with the default seed, as torch.Generator(device="ring") expects.
at::Generator make_ring_generator(c10::DeviceIndex device_index);
// The per-device default generator (seeded non-deterministically at first use, like CPU's).
const at::Generator& default_ring_generator(c10::DeviceIndex device_index);
// The CPU generator holding a ring generator's state.
const at::Generator& host_generator(const at::Generator& ring_generator);

}  // namespace ringsim
