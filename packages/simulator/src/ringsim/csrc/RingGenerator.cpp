#include "RingGenerator.h"

#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/DistributionsHelper.h>
#include <c10/util/Exception.h>

#include "runtime/Devices.h"

namespace ringsim {

RingGeneratorImpl::RingGeneratorImpl(c10::DeviceIndex device_index, at::Generator host)
    : c10::GeneratorImpl(
          c10::Device(c10::DeviceType::PrivateUse1, device_index),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      host_(std::move(host)) {}

void RingGeneratorImpl::set_current_seed(uint64_t seed) {
  host_.set_current_seed(seed);
}

void RingGeneratorImpl::set_offset(uint64_t offset) {
  host_.set_offset(offset);
}

uint64_t RingGeneratorImpl::get_offset() const {
  return host_.get_offset();
}

uint64_t RingGeneratorImpl::current_seed() const {
  return host_.current_seed();
}

uint64_t RingGeneratorImpl::seed() {
  return host_.seed();
}

void RingGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  host_.unsafeGetGeneratorImpl()->set_state(new_state);
}

c10::intrusive_ptr<c10::TensorImpl> RingGeneratorImpl::get_state() const {
  return host_.unsafeGetGeneratorImpl()->get_state();
}

const at::Generator& RingGeneratorImpl::host() const {
  return host_;
}

RingGeneratorImpl* RingGeneratorImpl::clone_impl() const {
  return new RingGeneratorImpl(device().index(), host_.clone());
}

at::Generator make_ring_generator(c10::DeviceIndex device_index) {
  const c10::DeviceIndex index = device_index < 0 ? runtime::current_device() : device_index;
  runtime::check_device(index);
  return at::make_generator<RingGeneratorImpl>(
      index, at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val));
}

const at::Generator& default_ring_generator(c10::DeviceIndex device_index) {
  static std::vector<at::Generator> generators = [] {
    std::vector<at::Generator> made;
    for (int i = 0; i < runtime::device_count(); ++i) {
      made.push_back(make_ring_generator(static_cast<c10::DeviceIndex>(i)));
      made.back().seed();
    }
    return made;
  }();
  const c10::DeviceIndex index = device_index < 0 ? runtime::current_device() : device_index;
  runtime::check_device(index);
  return generators[index];
}

const at::Generator& host_generator(const at::Generator& ring_generator) {
  auto* impl = dynamic_cast<RingGeneratorImpl*>(ring_generator.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl != nullptr, "expected a ring generator, got one for ", ring_generator.device());
  return impl->host();
}

}  // namespace ringsim
