// The recording device: a privateuse1 backend whose memory is host memory and whose every op is computed by the CPU
// kernel, after writing down the aten overload that reached the PrivateUse1 dispatch key, the dtype the device
// decides it by, and whether the kernel returned or raised (a call the device does not run raises its refusal).
//
// What reaches that key is what a device backend would be asked to run: torch's composite kernels have decomposed
// above it, and ops on CPU tensors (comparison helpers, `.cpu()` results, reference computations) never get here.
// The allocation, copy and view kernels every device registers are recorded as well, under their own names.
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Generator.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/Generator.h>
#include <torch/extension.h>
#include <torch/library.h>

namespace recorder {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

std::string device_name = "privateuseone";
int device_count = 1;
thread_local c10::DeviceIndex current = 0;
// The device's export: aten overload -> the dtypes it runs (empty: any).
std::map<std::string, std::set<std::string>> exported;
// Every dtype some op of the export computes in (empty: no export, nothing known).
std::set<std::string> computed;

// ---- what reached the device -------------------------------------------------------------------------------------

// aten overload -> calls, and the dtypes the device decided them by
using Calls = std::map<std::string, std::pair<int64_t, std::set<std::string>>>;

std::mutex seen_mutex;
Calls seen;    // the calls that returned
Calls raised;  // the calls whose kernel raised: a device that lacks the op raises as well

void note(const std::string& name, const std::set<std::string>& dtypes, bool threw) {
  const std::lock_guard<std::mutex> lock(seen_mutex);
  auto& entry = (threw ? raised : seen)[name];
  entry.first += 1;
  entry.second.insert(dtypes.begin(), dtypes.end());
}

// Runs `compute`, noting the call under `name` as returned or raised (and raising again).
template <class F>
decltype(auto) noted(const std::string& name, const std::set<std::string>& dtypes, F&& compute) {
  try {
    decltype(auto) result = compute();  // a kernel's `Tensor&` stays a reference
    note(name, dtypes, false);
    return result;
  } catch (...) {
    note(name, dtypes, true);
    throw;
  }
}

// `float32`: torch's Python name of the dtype, as the evidence store writes dtypes.
std::string dtype_name(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::ComplexHalf: return "complex32";
    case c10::ScalarType::ComplexFloat: return "complex64";
    case c10::ScalarType::ComplexDouble: return "complex128";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::BFloat16: return "bfloat16";
    default: return c10::toString(type);  // the rarer dtypes under c10's own name (Float8_e4m3fn, UInt16, ...)
  }
}

std::string overload_name(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// The dtypes a device decides a call by, as an export's op dtypes mean them (and an OpInfo's dtypes): its first
// device tensor's, else a factory's `dtype=`. A host scalar or host index is not the device's; another operand of
// another dtype is promoted or cast by the op, which the device runs for its first operand's dtype, unless no op of
// the export computes in that dtype (a complex operand of a device without complex): that dtype is the call's too.
class Lead {
 public:
  void see(const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kType) {
      return;
    }
    std::string dtype = dtype_name(t.scalar_type());
    if (tensor_.empty()) {
      tensor_ = std::move(dtype);
    } else if (!computed.empty() && computed.count(dtype) == 0) {
      foreign_.insert(std::move(dtype));
    }
  }
  void see(const c10::IValue& value) {
    if (value.isTensor()) {
      see(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorVector()) {
        see(t);
      }
    } else if (value.isList()) {
      for (const c10::IValue& item : value.toListRef()) {
        see(item);
      }
    }
  }
  void see_factory(c10::ScalarType type) {
    if (factory_.empty()) {
      factory_ = dtype_name(type);
    }
  }
  std::set<std::string> dtypes() const {
    std::set<std::string> all = foreign_;
    const std::string& lead = tensor_.empty() ? factory_ : tensor_;
    if (!lead.empty()) {
      all.insert(lead);
    }
    return all;
  }

 private:
  std::string tensor_;
  std::string factory_;
  std::set<std::string> foreign_;
};

bool is_kind(const c10::Argument& argument, c10::TypeKind kind) {
  c10::TypePtr type = argument.type();
  if (const auto* optional = type->castRaw<c10::OptionalType>()) {
    type = optional->getElementType();
  }
  return type->kind() == kind;
}

std::set<std::string> stack_dtypes(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& arguments = op.schema().arguments();
  const std::size_t begin = stack.size() - arguments.size();
  Lead lead;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const c10::IValue& value = stack[begin + i];
    if (value.isInt() && is_kind(arguments[i], c10::TypeKind::ScalarTypeType)) {  // a `dtype=`
      lead.see_factory(static_cast<c10::ScalarType>(value.toInt()));
    } else {
      lead.see(value);
    }
  }
  return lead.dtypes();
}

void note_dtypes(Lead& /*lead*/) {}

template <class T, class... Rest>
void note_dtypes(Lead& lead, const T& first, const Rest&... rest) {
  if constexpr (std::is_same_v<std::decay_t<T>, at::Tensor>) {
    lead.see(first);
  } else if constexpr (std::is_same_v<std::decay_t<T>, std::optional<c10::ScalarType>>) {
    lead.see_factory(first.value_or(c10::get_default_dtype_as_scalartype()));
  }
  note_dtypes(lead, rest...);
}

// A directly registered kernel, recorded under `Name` before it runs.
template <auto Kernel, const char* Name>
struct Recorded;

template <class R, class... A, R (*Kernel)(A...), const char* Name>
struct Recorded<Kernel, Name> {
  static R call(A... args) {
    Lead lead;
    note_dtypes(lead, args...);
    return noted(Name, lead.dtypes(), [&]() -> R { return Kernel(std::forward<A>(args)...); });
  }
};

// ---- memory ------------------------------------------------------------------------------------------------------

void free_block(void* ptr) {
  std::free(ptr);
}

c10::DataPtr allocate_on(c10::DeviceIndex device, std::size_t nbytes) {
  void* ptr = nbytes > 0 ? std::malloc(nbytes) : nullptr;
  TORCH_CHECK_WITH(OutOfMemoryError, nbytes == 0 || ptr != nullptr, "recorder: out of memory for ", nbytes, " bytes");
  return {ptr, ptr, &free_block, c10::Device(kType, device)};
}

class Allocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t nbytes) override {
    return allocate_on(current, nbytes);
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return &free_block;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

Allocator allocator;
REGISTER_ALLOCATOR(kType, &allocator)

void resize_storage_bytes(c10::StorageImpl* storage, std::size_t nbytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  const c10::DeviceIndex index = storage->device().index();
  c10::DataPtr fresh = allocate_on(index < 0 ? current : index, nbytes);
  const std::size_t kept = std::min(nbytes, storage->nbytes());
  if (kept > 0 && storage->data() != nullptr) {
    std::memcpy(fresh.get(), storage->data(), kept);
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

// ---- device guard and hooks --------------------------------------------------------------------------------------

void set_device(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < device_count, "recorder: invalid device index ", static_cast<int>(index));
  current = index;
}

class GuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override {
    return kType;
  }
  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device old = getDevice();
    set_device(device.index());
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(kType, current);
  }
  void setDevice(c10::Device device) const override {
    set_device(device.index());
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    current = device.index();
  }
  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    return c10::Stream(c10::Stream::DEFAULT, stream.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count);
  }
  bool queryStream(const c10::Stream& /*stream*/) const override {
    return true;
  }
  void synchronizeStream(const c10::Stream& /*stream*/) const override {}
  void synchronizeDevice(const c10::DeviceIndex /*device_index*/) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

// Random ops run by the CPU kernels draw from a CPU engine that each device generator owns.
class Generator final : public c10::GeneratorImpl {
 public:
  Generator(c10::DeviceIndex index, at::Generator engine)
      : c10::GeneratorImpl(c10::Device(kType, index), kKeys), engine_(std::move(engine)) {}
  static c10::DeviceType device_type() {
    return kType;
  }
  const at::Generator& engine() const {
    return engine_;
  }
  void set_current_seed(uint64_t seed) override {
    engine_.set_current_seed(seed);
  }
  uint64_t current_seed() const override {
    return engine_.current_seed();
  }
  uint64_t seed() override {
    return engine_.seed();
  }
  void set_offset(uint64_t offset) override {
    engine_.set_offset(offset);
  }
  uint64_t get_offset() const override {
    return engine_.get_offset();
  }
  void set_state(const c10::TensorImpl& new_state) override {
    engine_.unsafeGetGeneratorImpl()->set_state(new_state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return engine_.unsafeGetGeneratorImpl()->get_state();
  }

 private:
  Generator* clone_impl() const override {
    return new Generator(device().index(), engine_.clone());
  }
  at::Generator engine_;
};

at::Generator make_generator(c10::DeviceIndex index) {
  return at::make_generator<Generator>(index, at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val));
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::vector<at::Generator> generators = [] {
    std::vector<at::Generator> made;
    for (int i = 0; i < device_count; ++i) {
      made.push_back(make_generator(static_cast<c10::DeviceIndex>(i)));
    }
    return made;
  }();
  return generators.at(index < 0 ? current : index);
}

class Hooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override {
    return true;
  }
  bool isAvailable() const override {
    return true;
  }
  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override {
    return true;
  }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(device_count);
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_device(device);
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return current;
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex old = current;
    set_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  at::Device getDeviceFromPtr(void* /*data*/) const override {
    return at::Device(kType, current);
  }
  bool isPinnedPtr(const void* /*data*/) const override {
    return false;
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return make_generator(device_index < 0 ? current : device_index);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

// ---- the kernels every device registers --------------------------------------------------------------------------

at::Tensor host_view(const at::Tensor& t) {
  at::Tensor view = at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(c10::kCPU));
  view._set_conj(t.is_conj());
  view._set_neg(t.is_neg());
  return view;
}

void restride(c10::TensorImpl* impl, c10::IntArrayRef size, at::OptionalIntArrayRef stride) {
  if (impl->sizes() == size && (!stride || impl->strides() == *stride)) {
    return;
  }
  at::detail::check_size_nonnegative(size);
  const std::size_t itemsize = impl->dtype().itemsize();
  const std::size_t offset = impl->storage_offset();
  std::size_t nbytes = 0;
  if (stride) {
    impl->set_sizes_and_strides(size, *stride);
    nbytes = at::detail::computeStorageNbytes(size, *stride, itemsize, offset);
  } else {
    impl->set_sizes_contiguous(size);
    nbytes = at::detail::computeStorageNbytesContiguous(size, itemsize, offset);
  }
  c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();
  if (impl->numel() > 0 && nbytes > storage->nbytes()) {
    resize_storage_bytes(storage, nbytes);
  }
}

void check_factory(const c10::Device& device, std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(device.type() == kType, "recorder: cannot allocate a tensor on ", device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "recorder: only strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "recorder: only CPU memory can be pinned");
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  const c10::Device target = c10::device_or_default(device);
  check_factory(target, layout, pin_memory);
  const c10::DeviceGuard guard(target);
  return at::detail::empty_generic(size, &allocator, kKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(
    c10::IntArrayRef size,
    c10::IntArrayRef stride,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory) {
  const c10::Device target = c10::device_or_default(device);
  check_factory(target, layout, pin_memory);
  const c10::DeviceGuard guard(target);
  return at::detail::empty_strided_generic(size, stride, &allocator, kKeys, c10::dtype_or_default(dtype));
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  const bool self_ok = self.device().type() == kType || self.is_cpu();
  const bool dst_ok = dst.device().type() == kType || dst.is_cpu();
  TORCH_CHECK(self_ok && dst_ok, "recorder: cannot copy from ", self.device(), " to ", dst.device());
  if (dst.numel() == 0) {
    return dst;
  }
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::Tensor dst_host = dst.is_cpu() ? dst : host_view(dst);
  dst_host.copy_(self.is_cpu() ? self : host_view(self));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::_local_scalar_dense(host_view(self));
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> memory_format) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  restride(impl, size, std::nullopt);
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage_offset_(
    at::Tensor& self,
    c10::Storage source,
    int64_t storage_offset,
    c10::IntArrayRef size,
    c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, std::move(source), storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  const at::OptionalIntArrayRef strides =
      stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : at::OptionalIntArrayRef(std::nullopt);
  restride(self.unsafeGetTensorImpl(), size, strides);
  return self;
}

at::Tensor& set_storage_(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage_offset_(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_tensor_(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() != source.unsafeGetTensorImpl()) {
    set_storage_offset_(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
  }
  return self;
}

at::Tensor& set_empty_(at::Tensor& self) {
  const c10::DeviceGuard guard(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &allocator, /*resizable=*/true);
  return set_storage_offset_(self, std::move(storage), 0, {0}, {});
}

bool is_set_to(const at::Tensor& self, const at::Tensor& tensor) {
  return self.storage().unsafeGetStorageImpl() == tensor.storage().unsafeGetStorageImpl() &&
      self.storage_offset() == tensor.storage_offset() && self.sizes() == tensor.sizes() &&
      self.strides() == tensor.strides();
}

// ---- everything else: recorded, then the CPU kernel --------------------------------------------------------------

void use_device_generators(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const std::size_t begin = stack->size() - arguments.size();
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    if (!is_kind(arguments[i], c10::TypeKind::GeneratorType)) {
      continue;
    }
    c10::IValue& value = (*stack)[begin + i];
    if (value.isNone()) {
      value = c10::IValue(at::check_generator<Generator>(default_generator(current))->engine());
    } else if (value.isGenerator() && value.toGenerator().device().type() == kType) {
      value = c10::IValue(at::check_generator<Generator>(value.toGenerator())->engine());
    }
  }
}

bool takes_host_indices(const c10::OperatorName& name) {
  return name.name == "aten::index" || name.name == "aten::index_put" || name.name == "aten::index_put_" ||
      name.name == "aten::_index_put_impl_";
}

// The CPU kernel would compute on any mix of devices: refuse the mixes a device's own kernel refuses.
void check_same_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (takes_host_indices(op.operator_name())) {
    return;
  }
  std::optional<c10::Device> first;
  auto check = [&first](const at::Tensor& t) {
    if (!t.defined() || (t.device().type() != kType && t.dim() == 0)) {
      return;  // a host scalar, as every device accepts
    }
    if (!first) {
      first = t.device();
      return;
    }
    TORCH_CHECK(
        *first == t.device(), "Expected all tensors to be on the same device, but found at least two devices, ",
        *first, " and ", t.device(), "!");
  };
  const std::size_t count = op.schema().arguments().size();
  for (std::size_t i = stack.size() - count; i < stack.size(); ++i) {
    if (stack[i].isTensor()) {
      check(stack[i].toTensor());
    } else if (stack[i].isTensorList()) {
      for (const at::Tensor& t : stack[i].toTensorVector()) {
        check(t);
      }
    }
  }
}

// `aten::addcdiv.out (int16)` when the export does not run the call (the op, or one of its dtypes), else "".
std::string lacked(const std::string& name, const std::set<std::string>& dtypes) {
  const auto entry = exported.find(name);
  if (entry == exported.end()) {
    return name;
  }
  std::string missing;
  for (const std::string& dtype : dtypes) {
    if (!entry->second.empty() && entry->second.count(dtype) == 0) {
      missing += (missing.empty() ? "" : ", ") + dtype;
    }
  }
  return missing.empty() ? "" : name + " (" + missing + ")";
}

// The device of the call's first device tensor, if any.
std::optional<c10::Device> call_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const std::size_t count = op.schema().arguments().size();
  for (std::size_t i = stack.size() - count; i < stack.size(); ++i) {
    std::vector<at::Tensor> tensors;
    if (stack[i].isTensor()) {
      tensors.push_back(stack[i].toTensor());
    } else if (stack[i].isTensorList()) {
      tensors = stack[i].toTensorVector();
    }
    for (const at::Tensor& t : tensors) {
      if (t.defined() && t.device().type() == kType) {
        return t.device();
      }
    }
  }
  return std::nullopt;
}

// A host result copied to the device below the dispatcher: the device would have made it there, so no call is noted.
at::Tensor on_device(const at::Tensor& host, const c10::Device& device) {
  const c10::DeviceGuard guard(device);
  at::Tensor made = at::detail::empty_generic(host.sizes(), &allocator, kKeys, host.scalar_type(), std::nullopt);
  host_view(made).copy_(host);
  return made;
}

// The CPU fallback returns a new result on its first tensor argument's device, which is the host for a host scalar
// first (`prims.add(1e-8, t)`): a device returns it on the device, where the next kernel expects it.
void return_on(const c10::OperatorHandle& op, torch::jit::Stack* stack, const c10::Device& device) {
  const auto& returns = op.schema().returns();
  const std::size_t begin = stack->size() - returns.size();
  for (std::size_t i = 0; i < returns.size(); ++i) {
    c10::IValue& value = (*stack)[begin + i];
    if (returns[i].alias_info() != nullptr) {
      continue;  // an argument handed back (in place, out=): it stays where it was
    }
    if (value.isTensor() && value.toTensor().defined() && value.toTensor().is_cpu()) {
      value = c10::IValue(on_device(value.toTensor(), device));
    } else if (value.isTensorList()) {
      std::vector<at::Tensor> moved = value.toTensorVector();
      for (at::Tensor& t : moved) {
        t = t.defined() && t.is_cpu() ? on_device(t, device) : t;
      }
      value = c10::IValue(moved);
    }
  }
}

// A call whose CPU kernel raises is one the test may expect to raise; the device raises too, but its own refusal
// when it does not run the call: the test sees that refusal, as it would on the device.
void record_and_compute(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = overload_name(op.operator_name());
  const std::set<std::string> dtypes = stack_dtypes(op, *stack);
  const std::optional<c10::Device> device = call_device(op, *stack);
  try {
    check_same_device(op, *stack);
    use_device_generators(op, stack);
    at::native::cpu_fallback(op, stack);
    if (device) {
      return_on(op, stack, *device);
    }
  } catch (...) {
    note(name, dtypes, true);
    const std::string refused = lacked(name, dtypes);
    TORCH_CHECK_NOT_IMPLEMENTED(refused.empty(), device_name, " does not run ", refused);
    throw;
  }
  note(name, dtypes, false);
}

constexpr char kEmpty[] = "aten::empty.memory_format";
constexpr char kEmptyStrided[] = "aten::empty_strided";
constexpr char kCopyFrom[] = "aten::_copy_from";
constexpr char kCopyFromAndResize[] = "aten::_copy_from_and_resize";
constexpr char kLocalScalar[] = "aten::_local_scalar_dense";
constexpr char kResize[] = "aten::resize_";
constexpr char kSetOffset[] = "aten::set_.source_Storage_storage_offset";
constexpr char kSetStorage[] = "aten::set_.source_Storage";
constexpr char kSetTensor[] = "aten::set_.source_Tensor";
constexpr char kSetEmpty[] = "aten::set_";
constexpr char kIsSetTo[] = "aten::is_set_to";
constexpr char kAsStrided[] = "aten::as_strided";
constexpr char kView[] = "aten::view";
constexpr char kReshapeAlias[] = "aten::_reshape_alias";
constexpr char kUnfold[] = "aten::unfold";
constexpr char kViewAsReal[] = "aten::view_as_real";
constexpr char kViewAsComplex[] = "aten::view_as_complex";

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN((Recorded<&empty_memory_format, kEmpty>::call)));
  m.impl("empty_strided", TORCH_FN((Recorded<&empty_strided, kEmptyStrided>::call)));
  m.impl("_copy_from", TORCH_FN((Recorded<&copy_from, kCopyFrom>::call)));
  m.impl("_copy_from_and_resize", TORCH_FN((Recorded<&copy_from_and_resize, kCopyFromAndResize>::call)));
  m.impl("_local_scalar_dense", TORCH_FN((Recorded<&local_scalar_dense, kLocalScalar>::call)));
  m.impl("resize_", TORCH_FN((Recorded<&resize_, kResize>::call)));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN((Recorded<&set_storage_offset_, kSetOffset>::call)));
  m.impl("set_.source_Storage", TORCH_FN((Recorded<&set_storage_, kSetStorage>::call)));
  m.impl("set_.source_Tensor", TORCH_FN((Recorded<&set_tensor_, kSetTensor>::call)));
  m.impl("set_", TORCH_FN((Recorded<&set_empty_, kSetEmpty>::call)));
  m.impl("is_set_to", TORCH_FN((Recorded<&is_set_to, kIsSetTo>::call)));
  m.impl("as_strided", TORCH_FN((Recorded<&at::native::as_strided_tensorimpl, kAsStrided>::call)));
  m.impl("view", TORCH_FN((Recorded<&at::native::view, kView>::call)));
  m.impl("_reshape_alias", TORCH_FN((Recorded<&at::native::_reshape_alias, kReshapeAlias>::call)));
  m.impl("unfold", TORCH_FN((Recorded<&at::native::unfold, kUnfold>::call)));
  m.impl("view_as_real", TORCH_FN((Recorded<&at::native::view_as_real, kViewAsReal>::call)));
  m.impl("view_as_complex", TORCH_FN((Recorded<&at::native::view_as_complex, kViewAsComplex>::call)));
}

TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&record_and_compute>());
}

} // namespace

// The device's own registrations, each bound to record-and-compute, so that the dispatcher resolves every call as it
// would on the device: a composite the device overrides reaches it whole, the others decompose above it. Returns
// the names torch does not know (an export written for another torch).
std::vector<std::string> register_ops(const std::vector<std::string>& names) {
  static std::set<std::string> native = {kEmpty, kEmptyStrided, kCopyFrom, kCopyFromAndResize, kLocalScalar,
      kResize, kSetOffset, kSetStorage, kSetTensor, kSetEmpty, kIsSetTo, kAsStrided, kView, kReshapeAlias, kUnfold,
      kViewAsReal, kViewAsComplex};
  static torch::Library library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  std::vector<std::string> unknown;
  for (const std::string& name : names) {
    const std::size_t dot = name.find('.');
    const std::string base = name.substr(0, dot);
    const std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
    if (native.count(name) > 0) {
      continue;
    }
    if (!c10::Dispatcher::singleton().findOp({base, overload})) {
      unknown.push_back(name);
      continue;
    }
    const std::string unqualified = name.substr(name.find("::") + 2);
    library.impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&record_and_compute>());
  }
  return unknown;
}

} // namespace recorder

namespace py = pybind11;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "The recording privateuse1 device of testselect evidence";
  m.def("configure", [](const std::string& name, int count) {
    TORCH_CHECK(count >= 1, "recorder: needs at least one device");
    recorder::device_name = name;
    recorder::device_count = count;
    at::RegisterPrivateUse1HooksInterface(new recorder::Hooks());
  });
  m.def("register_ops", &recorder::register_ops);
  m.def("export", [](const std::map<std::string, std::vector<std::string>>& ops) {
    for (const auto& [name, dtypes] : ops) {
      recorder::exported[name] = std::set<std::string>(dtypes.begin(), dtypes.end());
      recorder::computed.insert(dtypes.begin(), dtypes.end());
    }
  });
  m.def("device_count", [] { return recorder::device_count; });
  m.def("current_device", [] { return static_cast<int>(recorder::current); });
  m.def("set_device", [](int index) { recorder::set_device(static_cast<c10::DeviceIndex>(index)); });
  m.def("default_generator", [](int index) {
    const at::Generator& generator = recorder::default_generator(static_cast<c10::DeviceIndex>(index));
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(generator));
  });
  m.def("take", [] {
    const std::lock_guard<std::mutex> lock(recorder::seen_mutex);
    recorder::Calls returned;
    recorder::Calls raised;
    returned.swap(recorder::seen);
    raised.swap(recorder::raised);
    return std::make_pair(returned, raised);
  });
}
