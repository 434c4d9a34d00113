// A replay recipe is recorded from one call that Python ran: the call's arguments as a key, where each bound
// buffer's bytes were (an argument tensor or a fresh output), the program's actions in issue order, and how the
// results view the outputs. A later call with the same key runs the recipe here. Python decides what qualifies
// (at most one launch, every buffer located); a call the recipe cannot take returns NotImplemented, and an unseen
// key returns None, so the caller runs and records it.
#include "Replay.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DefaultDtype.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/MemoryFormat.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace ringsim::replay {
namespace {

constexpr uintptr_t kStick = 128;

// A call's arguments as a cache key, and the device tensors in them in the order met.
struct Call {
  std::string key;
  std::vector<at::Tensor> tensors;
  bool eligible = true;
};

template <class T>
void put(std::string& key, T value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void encode(Call& call, PyObject* obj);

void encode_sequence(Call& call, PyObject* seq, char tag) {
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  call.key.push_back(tag);
  put(call.key, static_cast<int64_t>(n));
  PyObject** items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < n && call.eligible; ++i) {
    encode(call, items[i]);
  }
}

// Device tensors by dtype, device and sizes (contiguous and stick aligned, as kernels prepare them); host scalars
// and other values exactly (floats by their bits). Anything else makes the call ineligible.
void encode(Call& call, PyObject* obj) {
  std::string& key = call.key;
  if (THPVariable_Check(obj)) {
    const at::Tensor& t = THPVariable_Unpack(obj);
    // A host scalar (a wrapped number): kernels take its value, so the value is the key.
    if (t.defined() && t.device().is_cpu() && t.dim() == 0 && t.layout() == c10::kStrided && !t.is_complex()) {
      key.push_back('S');
      put(key, static_cast<int8_t>(t.scalar_type()));
      key.append(static_cast<const char*>(t.const_data_ptr()), t.itemsize());
      return;
    }
    if (!t.defined() || !t.device().is_privateuseone() || !t.is_contiguous() || t.is_neg() || t.is_conj() ||
        reinterpret_cast<uintptr_t>(t.data_ptr()) % kStick != 0) {
      call.eligible = false;
      return;
    }
    key.push_back('T');
    put(key, static_cast<int8_t>(t.scalar_type()));
    put(key, static_cast<int8_t>(t.device().index()));
    put(key, static_cast<int8_t>(t.dim()));
    for (const int64_t size : t.sizes()) {
      put(key, size);
    }
    call.tensors.push_back(t);
  } else if (obj == Py_None) {
    key.push_back('n');
  } else if (PyBool_Check(obj)) {
    key.push_back(obj == Py_True ? 'Y' : 'N');
  } else if (PyLong_CheckExact(obj)) {
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow != 0) {
      call.eligible = false;
      return;
    }
    key.push_back('i');
    put(key, static_cast<int64_t>(value));
  } else if (PyFloat_CheckExact(obj)) {
    key.push_back('f');
    put(key, PyFloat_AS_DOUBLE(obj));
  } else if (PyUnicode_Check(obj)) {
    Py_ssize_t n = 0;
    const char* text = PyUnicode_AsUTF8AndSize(obj, &n);
    if (text == nullptr) {
      PyErr_Clear();
      call.eligible = false;
      return;
    }
    key.push_back('s');
    put(key, static_cast<int64_t>(n));
    key.append(text, n);
  } else if (THPDtype_Check(obj)) {
    key.push_back('d');
    put(key, static_cast<int8_t>(reinterpret_cast<THPDtype*>(obj)->scalar_type));
  } else if (THPLayout_Check(obj) || THPMemoryFormat_Check(obj)) {
    key.push_back('o');
    put(key, reinterpret_cast<uintptr_t>(obj));  // torch keeps one object per layout and memory format
  } else if (THPDevice_Check(obj)) {
    const c10::Device device = reinterpret_cast<THPDevice*>(obj)->device;
    key.push_back('D');
    put(key, static_cast<int8_t>(device.type()));
    put(key, static_cast<int8_t>(device.index()));
  } else if (PyList_Check(obj)) {
    encode_sequence(call, obj, 'l');
  } else if (PyTuple_Check(obj)) {
    encode_sequence(call, obj, 't');
  } else {
    call.eligible = false;
  }
}

Call encode_call(int64_t op, const py::tuple& args, const py::dict& kwargs) {
  Call call;
  call.key.reserve(96);
  put(call.key, op);
  // torch's default dtype decides a result's dtype (an integer tensor and a Python float): part of the signature
  put(call.key, static_cast<int8_t>(c10::get_default_dtype_as_scalartype()));
  encode_sequence(call, args.ptr(), 'A');
  for (const auto& item : kwargs) {
    if (!call.eligible) {
      break;
    }
    encode(call, item.first.ptr());
    encode(call, item.second.ptr());
  }
  return call;
}

// Where a bound buffer's bytes are: in argument tensor `index`, or in fresh output `index`, from `offset`.
struct Slot {
  bool output;
  size_t index;
  int64_t offset;
};

enum class Kind { In, Out, Send, Recv, Compute, Copy, Cast };

struct Step {
  Kind kind;
  size_t buffer = 0;
  int64_t start = 0;
  int64_t nbytes = 0;
  at::Tensor tile;  // the scratchpad bytes a DMA or ring transfer touches
  size_t link = 0;
  std::optional<c10::OperatorHandle> op;
  torch::jit::Stack stack;   // the fn's arguments with attrs filled in; input tiles go to `slots`
  std::vector<size_t> slots;
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> outputs;
  bool copy_results = false;
  std::optional<at::ScalarType> dtype;  // cast's target
};

struct Fresh {
  int64_t numel;
  at::ScalarType dtype;
  c10::Device device;
};

struct Result {
  bool argument;
  size_t index;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset;
};

struct Recipe {
  bool replayable = false;
  int64_t report = -1;  // accounting id of the program's report; -1: the call launches nothing
  std::vector<Fresh> fresh;
  std::vector<Slot> buffers;
  std::vector<size_t> written;  // argument tensors the program writes (in-place destinations)
  std::vector<Step> steps;
  size_t links = 0;
  std::vector<Result> results;
  bool tuple = false;
};

struct State {
  std::unordered_map<std::string, Recipe> recipes;
  std::unordered_map<int64_t, int64_t> counts;
  int64_t launches = 0;
  uint32_t blocked = 0;
  py::object acquire;  // the engine lock's methods: a replay and a Python launch never share the scratchpads
  py::object release;
};

State& state() {
  static auto* instance = new State();  // never destroyed: it holds Python objects past interpreter teardown
  return *instance;
}

bool is_widened(at::ScalarType dtype) {
  return dtype == at::kHalf || dtype == at::kBFloat16;
}

at::Tensor widened(const at::Tensor& tile) {
  return is_widened(tile.scalar_type()) ? tile.to(at::kFloat) : tile;
}

void store(const at::Tensor& output, const at::Tensor& result) {
  output.copy_(result.sizes() == output.sizes() ? result : result.reshape(output.sizes()));
}

std::vector<at::Tensor> tensors_of(const py::handle& seq) {
  std::vector<at::Tensor> out;
  for (const auto& item : seq) {
    out.push_back(THPVariable_Unpack(item.ptr()));
  }
  return out;
}

Step parse_step(const py::tuple& action, const std::unordered_map<std::string, size_t>& names) {
  const auto kind = action[0].cast<std::string>();
  Step step;
  if (kind == "in" || kind == "out") {
    step.kind = kind == "in" ? Kind::In : Kind::Out;
    step.buffer = names.at(action[1].cast<std::string>());
    step.start = action[2].cast<int64_t>();
    step.nbytes = action[3].cast<int64_t>() - step.start;
    step.tile = THPVariable_Unpack(action[4].ptr());
  } else if (kind == "send" || kind == "recv") {
    step.kind = kind == "send" ? Kind::Send : Kind::Recv;
    step.link = action[1].cast<size_t>();
    step.tile = THPVariable_Unpack(action[2].ptr());
    step.nbytes = static_cast<int64_t>(step.tile.nbytes());
  } else if (kind == "copy" || kind == "cast") {
    step.kind = kind == "copy" ? Kind::Copy : Kind::Cast;
    step.inputs = tensors_of(action[1]);
    step.outputs = tensors_of(action[2]);
    if (kind == "cast" && !action[3].is_none()) {
      step.dtype = reinterpret_cast<THPDtype*>(action[3].ptr())->scalar_type;
    }
  } else if (kind == "op") {
    step.kind = Kind::Compute;
    const auto name = action[1].cast<std::string>();
    const auto overload = action[2].cast<std::string>();
    step.op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
    step.inputs = tensors_of(action[3]);
    step.outputs = tensors_of(action[4]);
    const c10::FunctionSchema& schema = step.op->schema();
    // As an OpOverloadPacket call converts them: a number attr may stand for a Tensor argument (`mul(x, other=2)`).
    const torch::jit::ToIValueAllowNumbersAsTensors numbers_as_tensors(true);
    step.stack = torch::jit::createStackForSchema(
        schema, torch::jit::tuple_slice(action[5].cast<py::tuple>()),
        py::reinterpret_borrow<py::kwargs>(action[6]), std::nullopt);
    if (action[7].is_none()) {
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        step.slots.push_back(i);
      }
    } else {
      for (const auto& tile_name : action[7]) {
        const auto index = schema.argumentIndexWithName(tile_name.cast<std::string>());
        TORCH_CHECK(index.has_value(), "no argument named ", tile_name.cast<std::string>(), " in ", schema);
        step.slots.push_back(static_cast<size_t>(*index));
      }
    }
    step.copy_results = action[8].cast<bool>();
  } else {
    TORCH_CHECK(false, "unknown replay action ", kind);
  }
  return step;
}

// Arguments sharing memory make a buffer's source ambiguous (`eq(x, x)`: which of the two did `in1` read?), so a
// recipe is only recorded from a call whose argument tensors are disjoint.
bool disjoint(const Call& call) {
  for (size_t i = 0; i < call.tensors.size(); ++i) {
    const auto a = reinterpret_cast<uintptr_t>(call.tensors[i].data_ptr());
    for (size_t j = i + 1; j < call.tensors.size(); ++j) {
      const auto b = reinterpret_cast<uintptr_t>(call.tensors[j].data_ptr());
      if (a < b + call.tensors[j].nbytes() && b < a + call.tensors[i].nbytes()) {
        return false;
      }
    }
  }
  return true;
}

std::optional<Slot> locate(const at::Tensor& buffer, const Call& call, const std::vector<at::Tensor>& fresh) {
  const auto begin = reinterpret_cast<uintptr_t>(buffer.data_ptr());
  const auto end = begin + buffer.nbytes();
  for (size_t j = 0; j < call.tensors.size(); ++j) {
    const auto start = reinterpret_cast<uintptr_t>(call.tensors[j].data_ptr());
    if (begin >= start && end <= start + call.tensors[j].nbytes()) {
      return Slot{false, j, static_cast<int64_t>(begin - start)};
    }
  }
  for (size_t k = 0; k < fresh.size(); ++k) {
    const auto start = reinterpret_cast<uintptr_t>(fresh[k].storage().data());
    if (begin >= start && end <= start + fresh[k].storage().nbytes()) {
      return Slot{true, k, static_cast<int64_t>(begin - start)};
    }
  }
  return std::nullopt;
}

// Results: an argument returned as itself, or a view of a storage the call allocated.
bool record_results(Recipe& recipe, const Call& call, const py::object& result, std::vector<at::Tensor>& fresh) {
  std::vector<at::Tensor> results;
  if (THPVariable_Check(result.ptr())) {
    results.push_back(THPVariable_Unpack(result.ptr()));
  } else if (PyTuple_Check(result.ptr())) {
    recipe.tuple = true;
    for (const auto& item : result) {
      if (!THPVariable_Check(item.ptr())) {
        return false;
      }
      results.push_back(THPVariable_Unpack(item.ptr()));
    }
  } else {
    return false;
  }
  for (const at::Tensor& t : results) {
    const auto same = std::find_if(call.tensors.begin(), call.tensors.end(), [&](const at::Tensor& a) {
      return a.unsafeGetTensorImpl() == t.unsafeGetTensorImpl();
    });
    if (same != call.tensors.end()) {
      recipe.results.push_back({true, static_cast<size_t>(same - call.tensors.begin()), {}, {}, 0});
      continue;
    }
    if (!t.device().is_privateuseone() || t.storage().nbytes() % t.itemsize() != 0) {
      return false;
    }
    for (const at::Tensor& a : call.tensors) {
      if (a.storage().is_alias_of(t.storage())) {
        return false;  // a view of an argument
      }
    }
    size_t k = 0;
    while (k < fresh.size() && !fresh[k].storage().is_alias_of(t.storage())) {
      ++k;
    }
    if (k == fresh.size()) {
      fresh.push_back(t);
      recipe.fresh.push_back(
          {static_cast<int64_t>(t.storage().nbytes() / t.itemsize()), t.scalar_type(), t.device()});
    }
    recipe.results.push_back({false, k, t.sizes().vec(), t.strides().vec(), t.storage_offset()});
  }
  return true;
}

bool build(Recipe& recipe, const Call& call, const py::object& result, const py::list& launches) {
  std::vector<at::Tensor> fresh;
  if (launches.size() > 1 || !record_results(recipe, call, result, fresh)) {
    return false;
  }
  if (launches.empty()) {
    return true;
  }
  const auto launch = launches[0].cast<py::tuple>();
  if (launch[1].is_none()) {
    return false;  // the program has an action replay cannot take
  }
  std::unordered_map<std::string, size_t> names;
  for (const auto& item : launch[0].cast<py::dict>()) {
    const auto slot = locate(THPVariable_Unpack(item.second.ptr()), call, fresh);
    if (!slot) {
      return false;  // a temporary the call made: not replayable from the arguments alone
    }
    names[item.first.cast<std::string>()] = recipe.buffers.size();
    recipe.buffers.push_back(*slot);
  }
  for (const auto& action : launch[1]) {
    recipe.steps.push_back(parse_step(action.cast<py::tuple>(), names));
    const Step& step = recipe.steps.back();
    if (step.kind == Kind::Send || step.kind == Kind::Recv) {
      recipe.links = std::max(recipe.links, step.link + 1);
    }
    if (step.kind == Kind::Out && !recipe.buffers[step.buffer].output) {
      const size_t index = recipe.buffers[step.buffer].index;
      if (std::find(recipe.written.begin(), recipe.written.end(), index) == recipe.written.end()) {
        recipe.written.push_back(index);
      }
    }
  }
  recipe.report = launch[2].cast<int64_t>();
  return true;
}

bool install(int64_t op, const py::tuple& args, const py::dict& kwargs, const py::object& result,
             const py::list& launches) {
  Call call = encode_call(op, args, kwargs);
  if (!call.eligible || !disjoint(call)) {
    return false;  // nothing stored: a later call of this signature is recorded again
  }
  Recipe recipe;
  try {
    recipe.replayable = build(recipe, call, result, launches);
  } catch (const std::exception&) {
    recipe = Recipe();  // remembered as not replayable, so the call is not recorded again
  }
  Recipe& stored = state().recipes[call.key] = std::move(recipe);
  return stored.replayable;
}

// An in-place destination sharing bytes with another argument: Python decides (CPU refuses some overlaps).
bool overlaps(const Call& call, size_t written) {
  const at::Tensor& dest = call.tensors[written];
  const auto begin = reinterpret_cast<uintptr_t>(dest.data_ptr());
  const auto end = begin + dest.nbytes();
  for (size_t j = 0; j < call.tensors.size(); ++j) {
    const auto start = reinterpret_cast<uintptr_t>(call.tensors[j].data_ptr());
    if (j != written && start < end && begin < start + call.tensors[j].nbytes()) {
      return true;
    }
  }
  return false;
}

void compute(Step& step) {
  torch::jit::Stack stack = step.stack;
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    stack[step.slots[i]] = widened(step.inputs[i]);
  }
  step.op->callBoxed(stack);
  std::vector<at::Tensor> results;
  for (const c10::IValue& value : stack) {
    if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) {
        results.push_back(t);
      }
    } else {
      results.push_back(value.toTensor());
    }
  }
  TORCH_CHECK(results.size() == step.outputs.size(), "replayed fn returned ", results.size(), " tensors for ",
              step.outputs.size(), " output tiles");
  for (size_t i = 0; i < results.size(); ++i) {
    store(step.outputs[i], step.copy_results ? results[i].clone() : results[i]);
  }
}

void execute(Recipe& recipe, const Call& call, std::vector<at::Tensor>& fresh) {
  for (const Fresh& f : recipe.fresh) {
    fresh.push_back(at::empty({f.numel}, at::TensorOptions().dtype(f.dtype).device(f.device)));
  }
  std::vector<uint8_t*> base;
  base.reserve(recipe.buffers.size());
  for (const Slot& slot : recipe.buffers) {
    const at::Tensor& t = slot.output ? fresh[slot.index] : call.tensors[slot.index];
    base.push_back(static_cast<uint8_t*>(t.data_ptr()) + slot.offset);
  }
  std::vector<std::deque<std::vector<uint8_t>>> links(recipe.links);
  for (Step& step : recipe.steps) {
    switch (step.kind) {
      case Kind::In:
        if (step.nbytes > 0) {
          std::memcpy(step.tile.data_ptr(), base[step.buffer] + step.start, step.nbytes);
        }
        break;
      case Kind::Out:
        if (step.nbytes > 0) {
          std::memcpy(base[step.buffer] + step.start, step.tile.data_ptr(), step.nbytes);
        }
        break;
      case Kind::Send: {
        const auto* bytes = static_cast<const uint8_t*>(step.tile.data_ptr());
        links[step.link].emplace_back(bytes, bytes + step.nbytes);
        break;
      }
      case Kind::Recv:
        std::memcpy(step.tile.data_ptr(), links[step.link].front().data(), step.nbytes);
        links[step.link].pop_front();
        break;
      case Kind::Copy:
        store(step.outputs[0], step.inputs[0]);
        break;
      case Kind::Cast: {
        const at::Tensor source = widened(step.inputs[0]);
        store(step.outputs[0], step.dtype ? source.to(*step.dtype) : source);
        break;
      }
      case Kind::Compute:
        compute(step);
        break;
    }
  }
}

py::object wrap(const at::Tensor& t) {
  return py::reinterpret_steal<py::object>(THPVariable_Wrap(t));
}

py::object result_of(const Recipe& recipe, const Call& call, const std::vector<at::Tensor>& fresh) {
  std::vector<py::object> results;
  for (const Result& r : recipe.results) {
    if (r.argument) {
      results.push_back(wrap(call.tensors[r.index]));
      continue;
    }
    const at::Tensor& storage = fresh[r.index];
    if (r.offset == 0 && storage.sizes() == r.sizes) {
      results.push_back(wrap(storage));
    } else {
      results.push_back(wrap(storage.as_strided(r.sizes, r.strides, r.offset)));
    }
  }
  if (!recipe.tuple) {
    return results[0];
  }
  py::tuple out(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    out[i] = results[i];
  }
  return out;
}

py::object run(int64_t op, const py::tuple& args, const py::dict& kwargs) {
  State& s = state();
  if (s.blocked != 0) {
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }
  const Call call = encode_call(op, args, kwargs);
  if (!call.eligible) {
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }
  const auto found = s.recipes.find(call.key);
  if (found == s.recipes.end()) {
    return py::none();
  }
  Recipe& recipe = found->second;
  const bool refused = !recipe.replayable ||
      std::any_of(recipe.written.begin(), recipe.written.end(), [&](size_t w) { return overlaps(call, w); });
  if (refused || !s.acquire(false).cast<bool>()) {
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }
  std::vector<at::Tensor> fresh;
  try {
    if (recipe.report >= 0) {
      ++s.launches;  // counted before it runs, as a Python launch is: faults number launches
    }
    execute(recipe, call, fresh);
  } catch (...) {
    s.release();
    throw;
  }
  s.release();
  if (recipe.report >= 0) {
    ++s.counts[recipe.report];
  }
  return result_of(recipe, call, fresh);
}

py::list drain() {
  py::list out;
  for (const auto& [report, count] : state().counts) {
    out.append(py::make_tuple(report, count));
  }
  state().counts.clear();
  return out;
}

void block(uint32_t reason, bool on) {
  State& s = state();
  s.blocked = on ? (s.blocked | reason) : (s.blocked & ~reason);
}

void set_lock(const py::object& lock) {
  state().acquire = lock.attr("acquire");
  state().release = lock.attr("release");
}

}  // namespace

void bind(py::module_& m) {
  m.def("replay_set_lock", &set_lock, py::arg("lock"), "The engine's lock, taken (without waiting) around a replay.");
  m.def("replay_install", torch::wrap_pybind_function(install), py::arg("op"), py::arg("args"), py::arg("kwargs"),
        py::arg("result"), py::arg("launches"),
        "Record the recipe of a call Python just ran; returns whether later calls can replay it.");
  m.def("replay_run", torch::wrap_pybind_function(run), py::arg("op"), py::arg("args"), py::arg("kwargs"),
        "The call's result replayed, None for an unseen call, NotImplemented for one that must run in Python.");
  m.def("replay_block", &block, py::arg("reason"), py::arg("on"),
        "Send every call to Python while any reason (a bit) is set: armed faults, an active profile.");
  m.def("replay_drain", &drain, "(report id, launches) replayed since the last drain.");
  m.def("replay_launches", []() { return state().launches; }, "Kernels launched by replays in this process.");
  m.def("replay_clear", []() { state().recipes.clear(); }, "Forget every recipe.");
}

}  // namespace ringsim::replay
