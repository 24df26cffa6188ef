// The CPU and CUDA kernels of the torch.library ops oprt::<op> and oprt::<op>_out
// (python/operator_runtime/library.py defines them): one boxed kernel serves
// every operator of the C table. Its fast path reads the at::Tensors, allocates
// out (functional ops), and runs through the descriptor cache, with no Python
// on the way. Anything else — a tensor that requires grad, a dtype, layout or
// negation bit the runtime does not take, a tensor past its storage, a Python
// backend (named or the default), a failing C call — goes to the op's Python
// implementation, oprt::_python_<op>[_out], which raises the library's own
// exceptions with their messages.
#include "runtime/python/torch_kernels.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <pthread.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/python/descriptor_cache.h"

namespace oprt_python {
namespace {

// backends.resolve's answers, published by Python (set_backend_table): the
// native code per (backend named, or none) x (cpu, cuda tensors), -1 where the
// Python path must run the call. The rule itself lives in backends.py only.
// Until Python publishes it, every call takes the Python path.
std::atomic<int32_t> backend_table[kBackendSlots][2] = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};

// The native backend that runs a call on device, or -1 for the Python path
// (which also says why a backend cannot run).
int32_t native_backend(const c10::IValue& backend, const c10::Device& device) {
  int slot = 0;
  if (!backend.isNone()) {
    const std::string& name = backend.toStringRef();
    slot = name == "cpu" ? 1 : name == "nvidia" ? 2 : name == "metax" ? 3 : -1;
  }
  if (slot < 0 || !(device.is_cpu() || device.is_cuda())) return -1;
  return backend_table[slot][device.is_cuda() ? 1 : 0].load(std::memory_order_relaxed);
}

int32_t dtype_code(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return OPRT_DTYPE_F32;
    case c10::ScalarType::Half: return OPRT_DTYPE_F16;
    case c10::ScalarType::BFloat16: return OPRT_DTYPE_BF16;
    default: return -1;
  }
}

// Whether t carries a forward-mode AD tangent (torch.func.jvp, forward_ad): oprt has
// no forward-mode formula, so AutogradKernel refuses such calls, and the fast paths
// leave them to the Python path, which refuses them too (library.check_autograd).
// Level 0, as torch's own isFwGradDefined.
bool has_tangent(const at::Tensor& t) { return t._fw_grad(/*level=*/0).defined(); }

// torch refuses in-place updates of an inference tensor outside InferenceMode; so
// does the Python path (library.check_autograd).
bool writes_inference_tensor_outside_inference_mode(const at::Tensor& out) {
  return out.is_inference() && !c10::InferenceMode::is_enabled();
}

// Reads t for the C runtime; false for anything the Python path must judge.
bool read(const at::Tensor& t, Operand* operand) {
  if (!t.defined() || t.layout() != c10::kStrided || t.is_neg() || t.is_conj() ||
      !t.has_storage() || t.dim() > OPRT_MAX_DIMS || has_tangent(t)) {
    return false;
  }
  operand->dtype = dtype_code(t.scalar_type());
  if (operand->dtype < 0) return false;
  operand->ndim = static_cast<int32_t>(t.dim());
  for (int d = 0; d < operand->ndim; ++d) {
    operand->shape[d] = t.size(d);
    operand->strides[d] = t.stride(d);
  }
  operand->device = t.is_cpu() ? -1 : t.get_device();
  if (!within_storage(*operand, t.storage_offset(), static_cast<int64_t>(t.storage().nbytes()))) {
    return false;
  }
  operand->data = t.data_ptr();
  return true;
}

// A Python tensor object as torch lays it out (THPVariable, in
// torch/csrc/autograd/python_variable.h): the object header, then the at::Tensor
// it holds. That header builds only with torch's own copy of pybind11 and this
// module builds with the venv's, so the layout is restated here, and used only
// for objects of exactly the types enable_tensor_object_reads accepted after
// reading a live tensor through it.
struct TensorObject {
  PyObject_HEAD
  at::Tensor tensor;
};
std::atomic<PyTypeObject*> tensor_object_types[2] = {nullptr, nullptr};

bool reads_tensor_objects_of(PyTypeObject* type) {
  return type != nullptr && (type == tensor_object_types[0].load(std::memory_order_relaxed) ||
                             type == tensor_object_types[1].load(std::memory_order_relaxed));
}

bool read_through_layout(PyObject* object, Operand* operand) {
  const at::Tensor& t = reinterpret_cast<TensorObject*>(object)->tensor;
  if (!t.defined() || !(t.is_cpu() || t.is_cuda())) return false;
  try {
    return read(t, operand);
  } catch (const std::exception&) {
    return false;
  }
}

// The functional op's out: contiguous, of the shape the operator's kind gives.
at::Tensor new_output(const oprt_operator_t* op, const at::Tensor* const* inputs,
                      const Call& call, bool keepdim) {
  const at::Tensor& first = *inputs[0];
  if (op->kind == OPRT_KIND_NORMALIZATION) return at::empty(first.sizes(), first.options());
  if (op->kind == OPRT_KIND_ELEMENTWISE) {
    at::DimVector shape(first.sizes().begin(), first.sizes().end());
    for (int i = 1; i < op->num_inputs; ++i) {
      if (inputs[i]->sizes() != c10::IntArrayRef(shape)) {
        shape = at::infer_size_dimvector(shape, inputs[i]->sizes());  // throws if not broadcastable
      }
    }
    return at::empty(shape, first.options());
  }
  const int64_t ndim = first.dim();
  const auto dim = static_cast<int64_t>(call.params[0]);
  if (static_cast<double>(dim) != call.params[0] || dim < -ndim || dim >= ndim) return {};
  const int64_t axis = dim < 0 ? dim + ndim : dim;
  at::DimVector shape;
  for (int64_t d = 0; d < ndim; ++d) {
    if (d != axis) {
      shape.push_back(first.size(d));
    } else if (keepdim) {
      shape.push_back(1);
    }
  }
  return at::empty(shape, first.options());
}

class OperatorKernel final : public c10::OperatorKernel {
 public:
  OperatorKernel(int32_t op_index, bool out_variant, c10::OperatorHandle python)
      : op_index_(op_index), out_variant_(out_variant), python_(std::move(python)) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    bool done = false;
    try {
      done = fast_path(stack);
    } catch (const std::exception&) {
      done = false;  // the Python implementation says what was wrong
    }
    if (!done) python_.callBoxed(stack);
  }

 private:
  bool fast_path(torch::jit::Stack* stack) const {
    const oprt_operator_t* op = operator_at(op_index_);
    const int n_inputs = op->num_inputs;
    const int n_params = op->num_params;
    const bool has_keepdim = !out_variant_ && op->kind == OPRT_KIND_REDUCTION;
    const size_t n_args = (out_variant_ ? 1 : 0) + n_inputs + n_params + (has_keepdim ? 1 : 0) + 1;
    if (n_inputs >= kMaxOperands || n_params > kMaxParams || stack->size() < n_args) return false;
    const c10::IValue* args = &(*stack)[stack->size() - n_args];
    size_t a = 0;
    const at::Tensor* out_arg = out_variant_ ? &args[a++].toTensor() : nullptr;
    const at::Tensor* inputs[kMaxOperands];
    for (int i = 0; i < n_inputs; ++i) inputs[i] = &args[a++].toTensor();
    Call call;
    call.op_index = op_index_;
    call.num_params = n_params;
    for (int j = 0; j < n_params; ++j, ++a) {
      call.params[j] = args[a].isInt() ? static_cast<double>(args[a].toInt()) : args[a].toDouble();
    }
    const bool keepdim = has_keepdim && args[a++].toBool();
    const c10::Device device = (out_arg != nullptr ? *out_arg : *inputs[0]).device();
    call.backend = native_backend(args[a], device);
    if (call.backend < 0) return false;
    if (c10::GradMode::is_enabled()) {
      if (out_arg != nullptr && out_arg->requires_grad()) return false;
      for (int i = 0; i < n_inputs; ++i) {
        if (inputs[i]->requires_grad()) return false;
      }
    }
    const at::Tensor out = out_variant_ ? *out_arg : new_output(op, inputs, call, keepdim);
    if (!out.defined() || writes_inference_tensor_outside_inference_mode(out)) return false;
    call.num_operands = n_inputs + 1;
    if (!read(out, &call.operands[0])) return false;
    for (int i = 0; i < n_inputs; ++i) {
      if (!read(*inputs[i], &call.operands[i + 1]) ||
          call.operands[i + 1].device != call.operands[0].device) {
        return false;
      }
    }
    c10::OptionalDeviceGuard guard;
    if (device.is_cuda()) {
      guard.reset_device(device);
      call.stream =
          c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device).native_handle();
    }
    CallResult result = execute_cached(call);
    at::Tensor workspace;
    if (result.needed_workspace > 0) {
      // Freed after the launch: the caching allocator keeps it for this stream
      // until the work queued there has passed.
      workspace = at::empty({static_cast<int64_t>(result.needed_workspace)},
                            out.options().dtype(c10::kByte));
      call.workspace = workspace.data_ptr();
      call.workspace_size = result.needed_workspace;
      result = execute_cached(call);
    }
    if (result.status != OPRT_SUCCESS || result.needed_workspace > 0) return false;
    if (out_variant_) out.unsafeGetTensorImpl()->bump_version();
    torch::jit::drop(*stack, n_args);
    if (!out_variant_) torch::jit::push(*stack, out);
    return true;
  }

  int32_t op_index_;
  bool out_variant_;
  c10::OperatorHandle python_;
};

// The AutogradCPU and AutogradCUDA kernel of every op. A tensor with a
// forward-mode AD tangent is refused here, where torch.func's wrappers still hold
// the tangent (below autograd they are unwrapped): refuse_tangent, a Python op,
// raises the library's AutogradError. A functional op with a gradient hands a call
// that needs it to the Python kernel torch.library.register_autograd installs
// (operator_runtime/autograd.py), registered for the Autograd alias, which fills
// every autograd key this kernel was not registered for, so a redispatch through
// AutogradOther reaches it with the rest of the call's keys (fake, functionalization
// and tracing modes included) unchanged. Every other call goes straight below
// autograd, as torch's own C++ autograd kernels do: through Python it cost about
// 3.7 us of each call on the cpu machine; ops without a gradient refuse a tensor
// that requires grad there (library.check_autograd).
class AutogradKernel final : public c10::OperatorKernel {
 public:
  AutogradKernel(bool has_gradient, c10::OperatorHandle refuse_tangent)
      : has_gradient_(has_gradient), refuse_tangent_(std::move(refuse_tangent)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
    const c10::DispatchKeySet below_autograd = keys & c10::after_autograd_keyset;
    const c10::FunctionSchema& schema = op.schema();
    const size_t first = stack->size() - schema.arguments().size();
    const bool grad = has_gradient_ && c10::GradMode::is_enabled();
    bool needs_gradient = false;
    for (size_t i = first; i < stack->size(); ++i) {
      if (!(*stack)[i].isTensor()) continue;
      const at::Tensor& tensor = (*stack)[i].toTensor();
      if (has_tangent(tensor)) refuse(schema, schema.arguments()[i - first].name());
      needs_gradient = needs_gradient || (grad && tensor.requires_grad());
    }
    if (needs_gradient) {
      op.redispatchBoxed(below_autograd | c10::DispatchKeySet(c10::DispatchKey::AutogradOther),
                         stack);
      return;
    }
    at::AutoDispatchBelowAutograd guard;
    op.redispatchBoxed(below_autograd, stack);
  }

 private:
  [[noreturn]] void refuse(const c10::FunctionSchema& schema, const std::string& role) const {
    const std::string& name = schema.name();
    const std::string op = name.substr(name.find("::") + 2);
    torch::jit::Stack arguments{c10::IValue(op), c10::IValue(role)};
    refuse_tangent_.callBoxed(&arguments);  // raises
    TORCH_CHECK(false, op, ": ", role, " has a forward-mode AD tangent, which oprt cannot follow");
  }

  bool has_gradient_;
  c10::OperatorHandle refuse_tangent_;
};

// Prepared descriptors that runs may take through _prepared_run, by id.
struct PreparedEntry {
  const oprt_operator_t* op;
  void* handle;
  int64_t device;
  std::vector<Operand> layouts;  // out, then the inputs, as created
};

struct PreparedRegistry {
  std::mutex mutex;
  std::unordered_map<int64_t, std::shared_ptr<const PreparedEntry>> entries;
  int64_t next_id = 1;
};

PreparedRegistry& prepared_registry() {
  static auto* registry = new PreparedRegistry();
  return *registry;
}

// _prepared_run(Tensor(a!) out, Tensor[] inputs, int prepared, int workspace,
// int workspace_size) -> int: 0 once run, 1 when the caller's Python path must
// run it (and say what is wrong): the descriptor is gone, a tensor requires grad,
// or a tensor's layout, device or storage is not what the descriptor was made for.
class PreparedRunKernel final : public c10::OperatorKernel {
 public:
  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    int64_t outcome = 1;
    try {
      outcome = run(stack) ? 0 : 1;
    } catch (const std::exception&) {
      outcome = 1;
    }
    torch::jit::drop(*stack, 5);
    torch::jit::push(*stack, outcome);
  }

 private:
  static bool run(torch::jit::Stack* stack) {
    const c10::IValue* args = &(*stack)[stack->size() - 5];
    const at::Tensor& out = args[0].toTensor();
    const c10::List<at::Tensor> inputs = args[1].toTensorList();
    std::shared_ptr<const PreparedEntry> entry;
    {
      PreparedRegistry& registry = prepared_registry();
      std::lock_guard<std::mutex> lock(registry.mutex);
      auto it = registry.entries.find(args[2].toInt());
      if (it == registry.entries.end()) return false;
      entry = it->second;
    }
    const size_t count = inputs.size() + 1;
    if (count != entry->layouts.size() || count > static_cast<size_t>(kMaxOperands) ||
        writes_inference_tensor_outside_inference_mode(out)) {
      return false;
    }
    Operand operands[kMaxOperands];
    const void* input_ptrs[kMaxOperands - 1];
    const bool grad = c10::GradMode::is_enabled();
    for (size_t i = 0; i < count; ++i) {
      const at::Tensor tensor = i == 0 ? out : inputs.get(i - 1);
      if ((grad && tensor.requires_grad()) || !read(tensor, &operands[i]) ||
          operands[i].device != entry->device || !same_layout(operands[i], entry->layouts[i])) {
        return false;
      }
      if (i > 0) input_ptrs[i - 1] = operands[i].data;
    }
    void* stream = nullptr;
    c10::OptionalDeviceGuard guard;
    if (out.is_cuda()) {
      guard.reset_device(out.device());
      stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)
                   ->getStream(out.device())
                   .native_handle();
    }
    const oprt_status_t status = entry->op->execute(
        entry->handle, reinterpret_cast<void*>(args[3].toInt()),
        static_cast<size_t>(args[4].toInt()), operands[0].data, input_ptrs, stream);
    if (status != OPRT_SUCCESS) return false;
    out.unsafeGetTensorImpl()->bump_version();
    return true;
  }
};

}  // namespace

int64_t register_prepared(const oprt_operator_t* op, void* handle, int64_t device,
                          std::vector<Operand> layouts) {
  auto entry = std::make_shared<PreparedEntry>();
  entry->op = op;
  entry->handle = handle;
  entry->device = device;
  entry->layouts = std::move(layouts);
  PreparedRegistry& registry = prepared_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  const int64_t id = registry.next_id++;
  registry.entries.emplace(id, std::move(entry));
  return id;
}

void unregister_prepared(int64_t id) {
  std::shared_ptr<const PreparedEntry> dropped;  // freed after the lock is released
  PreparedRegistry& registry = prepared_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto it = registry.entries.find(id);
  if (it == registry.entries.end()) return;
  dropped = std::move(it->second);
  registry.entries.erase(it);
}

namespace {

// A library of kernels for the dispatch key in the namespace, kept for the process:
// registrations last as long as their Library objects.
torch::Library& process_library(const std::string& ns, c10::DispatchKey key) {
  static auto* libraries = new std::vector<std::unique_ptr<torch::Library>>();
  libraries->push_back(
      std::make_unique<torch::Library>(torch::Library::IMPL, ns, key, __FILE__, __LINE__));
  return *libraries->back();
}

}  // namespace

void register_torch_kernels(const std::string& ns, const std::vector<TorchKernel>& kernels) {
  static const bool fork_handlers_installed =
      pthread_atfork([] { prepared_registry().mutex.lock(); },
                     [] { prepared_registry().mutex.unlock(); },
                     [] { prepared_registry().mutex.unlock(); }) == 0;
  (void)fork_handlers_installed;
  for (c10::DispatchKey key : {c10::DispatchKey::CPU, c10::DispatchKey::CUDA}) {
    torch::Library& library = process_library(ns, key);
    for (const TorchKernel& kernel : kernels) {
      c10::OperatorHandle python = c10::Dispatcher::singleton().findSchemaOrThrow(
          (ns + "::" + kernel.python_op).c_str(), "");
      library.impl(kernel.op.c_str(),
                   torch::CppFunction::makeFromBoxedFunctor(std::make_unique<OperatorKernel>(
                       kernel.op_index, kernel.out_variant, python)));
    }
    library.impl("_prepared_run",
                 torch::CppFunction::makeFromBoxedFunctor(std::make_unique<PreparedRunKernel>()));
  }
}

void register_autograd_kernels(const std::string& ns, const std::vector<AutogradOp>& ops,
                               const std::string& refuse_tangent) {
  const c10::OperatorHandle refuse = c10::Dispatcher::singleton().findSchemaOrThrow(
      (ns + "::" + refuse_tangent).c_str(), "");
  for (c10::DispatchKey key : {c10::DispatchKey::AutogradCPU, c10::DispatchKey::AutogradCUDA}) {
    torch::Library& library = process_library(ns, key);
    for (const AutogradOp& op : ops) {
      library.impl(op.op.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                      std::make_unique<AutogradKernel>(op.has_gradient, refuse)));
    }
  }
}

bool read_tensor_object(PyObject* object, Operand* operand) {
  return reads_tensor_objects_of(Py_TYPE(object)) && read_through_layout(object, operand);
}

bool enable_tensor_object_reads(PyObject* tensor_type, PyObject* parameter_type, PyObject* probe,
                                const Operand& probe_read) {
  auto* type = reinterpret_cast<PyTypeObject*>(tensor_type);
  if (!PyType_Check(tensor_type) || !PyType_Check(parameter_type) || Py_TYPE(probe) != type ||
      type->tp_basicsize < static_cast<Py_ssize_t>(sizeof(TensorObject))) {
    return false;
  }
  Operand through_layout;
  if (!read_through_layout(probe, &through_layout) || through_layout.data != probe_read.data ||
      through_layout.device != probe_read.device || !same_layout(through_layout, probe_read)) {
    return false;
  }
  Py_INCREF(tensor_type);
  Py_INCREF(parameter_type);
  tensor_object_types[0].store(type);
  tensor_object_types[1].store(reinterpret_cast<PyTypeObject*>(parameter_type));
  return true;
}

void set_backend_table(const std::vector<int32_t>& codes) {
  for (int slot = 0; slot < kBackendSlots; ++slot) {
    for (int device = 0; device < 2; ++device) {
      const size_t i = static_cast<size_t>(slot * 2 + device);
      backend_table[slot][device].store(i < codes.size() ? codes[i] : -1);
    }
  }
}

// On the 2-core CI machine the library's own workers and torch's OpenMP
// threads, which spin for a while after each torch op, took turns on the same
// cores: relu of 2^20 f32 ran at 150-170 us between torch calls and at 100 us
// with torch's threads told not to spin (OMP_WAIT_POLICY=PASSIVE). One pool
// for the process, torch's, serves both.
void run_cpu_pieces_on_torch_threads() {
  static const oprt_cpu_runner_t runner = {
      [] { return static_cast<int32_t>(at::get_num_threads()); },
      [](int64_t pieces, oprt_cpu_task_t task, void* context) {
        at::parallel_for(0, pieces, 1, [&](int64_t begin, int64_t end) {
          for (int64_t piece = begin; piece < end; ++piece) task(context, piece);
        });
      },
  };
  oprt_set_cpu_runner(&runner);
}

}  // namespace oprt_python
