// operator_runtime._C.run: ort.<op>'s call path from Python (the torch.library
// kernels' fallback, library.py). One Python crossing per call: the tensors
// arrive as they are, are read once here, and the descriptor cache
// (descriptor_cache.h) serves the call.
#include "runtime/python/cached_call.h"

#include <cstdint>
#include <string>
#include <vector>

#include <operator_runtime/api.h>

#include "runtime/python/torch_kernels.h"

namespace oprt_python {
namespace {

// The torch dtype objects the Python layer registered, by C dtype code.
struct DtypeCode {
  PyObject* dtype;
  int32_t code;
};
std::vector<DtypeCode>& dtype_codes() {
  static std::vector<DtypeCode> codes;
  return codes;
}

PyObject* str_data_ptr = nullptr;
PyObject* str_shape = nullptr;
PyObject* str_stride = nullptr;
PyObject* str_dtype = nullptr;
PyObject* str_get_device = nullptr;
PyObject* str_storage_offset = nullptr;
PyObject* str_untyped_storage = nullptr;
PyObject* str_nbytes = nullptr;
PyObject* str_is_neg = nullptr;
PyObject* str_is_conj = nullptr;
PyObject* error_type = nullptr;

}  // namespace

PyObject* set_error(oprt_status_t status, const std::string& message) {
  PyObject* args = Py_BuildValue("(is)", static_cast<int>(status), message.c_str());
  if (args != nullptr) {
    PyErr_SetObject(error_type, args);
    Py_DECREF(args);
  }
  return nullptr;
}

namespace {

// Reads a sequence of ints (torch.Size or a tuple) into out[0..ndim).
bool read_extents(PyObject* sequence, int64_t* out, int32_t* ndim, const char* op,
                  const char* role) {
  PyObject* fast = PySequence_Fast(sequence, "extents must be a sequence");
  if (fast == nullptr) return false;
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
  if (count > OPRT_MAX_DIMS) {
    Py_DECREF(fast);
    set_error(OPRT_ERR_INVALID_ARG, std::string(op) + ": " + role + " has ndim " +
                                        std::to_string(count) + ", more than the supported " +
                                        std::to_string(OPRT_MAX_DIMS));
    return false;
  }
  PyObject** items = PySequence_Fast_ITEMS(fast);
  for (Py_ssize_t d = 0; d < count; ++d) out[d] = PyLong_AsLongLong(items[d]);
  Py_DECREF(fast);
  *ndim = static_cast<int32_t>(count);
  return !PyErr_Occurred();
}

// Calls tensor.<method>() and returns its truth; -1 with a Python error set.
int call_flag(PyObject* tensor, PyObject* method) {
  PyObject* result = PyObject_CallMethodNoArgs(tensor, method);
  if (result == nullptr) return -1;
  const int flag = PyObject_IsTrue(result);
  Py_DECREF(result);
  return flag;
}

// Calls tensor.<method>() for an int.
bool call_int(PyObject* tensor, PyObject* method, int64_t* value) {
  PyObject* result = PyObject_CallMethodNoArgs(tensor, method);
  if (result == nullptr) return false;
  *value = PyLong_AsLongLong(result);
  Py_DECREF(result);
  return !PyErr_Occurred();
}

// Whether every element of operand lies inside its storage: a tensor whose
// storage was resized (resize_, untyped_storage().resize_, set_) since its
// shape was fixed must never be read or written past the storage's end.
bool check_storage(PyObject* tensor, const Operand& operand, const char* op, const char* role) {
  int64_t offset = 0, nbytes = 0;
  if (!call_int(tensor, str_storage_offset, &offset)) return false;
  PyObject* storage = PyObject_CallMethodNoArgs(tensor, str_untyped_storage);
  if (storage == nullptr) return false;
  const bool read = call_int(storage, str_nbytes, &nbytes);
  Py_DECREF(storage);
  if (!read) return false;
  if (!within_storage(operand, offset, nbytes)) {
    set_error(OPRT_ERR_INVALID_ARG,
              std::string(op) + ": " + role + " reaches past its storage (" +
                  std::to_string(nbytes) + " bytes from offset " + std::to_string(offset) +
                  " elements); was its storage resized or freed?");
    return false;
  }
  return true;
}

}  // namespace

bool read_operand(PyObject* tensor, Operand* operand, const char* op, const char* role) {
  if (read_tensor_object(tensor, operand)) return true;
  PyObject* dtype = PyObject_GetAttr(tensor, str_dtype);
  if (dtype == nullptr) return false;
  int32_t code = -1;
  for (const DtypeCode& entry : dtype_codes()) {
    if (entry.dtype == dtype) code = entry.code;
  }
  if (code < 0) {
    PyObject* text = PyObject_Str(dtype);
    std::string name = text != nullptr ? PyUnicode_AsUTF8(text) : "?";
    Py_XDECREF(text);
    Py_DECREF(dtype);
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);
    set_error(OPRT_ERR_UNSUPPORTED_DTYPE, std::string(op) + ": " + role + " has dtype " + name +
                                              "; supported dtypes are float32, float16, bfloat16");
    return false;
  }
  Py_DECREF(dtype);
  operand->dtype = code;

  PyObject* shape = PyObject_GetAttr(tensor, str_shape);
  if (shape == nullptr) return false;
  const bool shape_ok = read_extents(shape, operand->shape, &operand->ndim, op, role);
  Py_DECREF(shape);
  if (!shape_ok) return false;
  PyObject* strides = PyObject_CallMethodNoArgs(tensor, str_stride);
  if (strides == nullptr) return false;
  int32_t stride_count = 0;
  const bool strides_ok = read_extents(strides, operand->strides, &stride_count, op, role);
  Py_DECREF(strides);
  if (!strides_ok) return false;

  PyObject* device = PyObject_CallMethodNoArgs(tensor, str_get_device);
  if (device == nullptr) return false;
  operand->device = PyLong_AsLongLong(device);
  Py_DECREF(device);
  // torch's lazy negation and conjugation bits: the memory holds -x or conj(x).
  const int negated = call_flag(tensor, str_is_neg);
  const int conjugated = negated == 0 ? call_flag(tensor, str_is_conj) : 0;
  if (negated < 0 || conjugated < 0) return false;
  if (negated || conjugated) {
    const std::string remedy =
        std::string(role) == "out"
            ? "write into a tensor without torch's negation or conjugation bit"
            : std::string("resolve it first (") + (negated ? ".resolve_neg()" : ".resolve_conj()") + ")";
    set_error(OPRT_ERR_INVALID_ARG, std::string(op) + ": " + role + " is a lazily " +
                                        (negated ? "negated" : "conjugated") + " view; " + remedy);
    return false;
  }
  if (!check_storage(tensor, *operand, op, role)) return false;
  PyObject* data = PyObject_CallMethodNoArgs(tensor, str_data_ptr);
  if (data == nullptr) return false;
  operand->data = PyLong_AsVoidPtr(data);
  Py_DECREF(data);
  return !PyErr_Occurred();
}

std::string device_text(int64_t device) {
  return device < 0 ? "cpu" : "device " + std::to_string(device);
}

namespace {

// run(op_index, backend, stream, workspace_ptr, workspace_size, params, out, *inputs)
// -> 0 once executed, or the workspace bytes the descriptor needs when
// workspace_size is smaller (nothing is executed then: call again with one).
PyObject* run(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  constexpr Py_ssize_t kFixed = 7;
  if (nargs < kFixed) {
    PyErr_SetString(PyExc_TypeError,
                    "run(op_index, backend, stream, workspace_ptr, workspace_size, params, out, "
                    "*inputs)");
    return nullptr;
  }
  const long op_index = PyLong_AsLong(args[0]);
  if (PyErr_Occurred()) return nullptr;
  const oprt_operator_t* op = operator_at(static_cast<int32_t>(op_index));
  if (op == nullptr) {
    return set_error(OPRT_ERR_INVALID_ARG, "run: operator index " + std::to_string(op_index) +
                                               " out of range");
  }
  Call call;
  call.op_index = static_cast<int32_t>(op_index);
  call.backend = static_cast<int32_t>(PyLong_AsLong(args[1]));
  call.stream = PyLong_AsVoidPtr(args[2]);
  call.workspace = PyLong_AsVoidPtr(args[3]);
  call.workspace_size = PyLong_AsSize_t(args[4]);
  if (PyErr_Occurred()) return nullptr;

  PyObject* params = PySequence_Fast(args[5], "params must be a sequence of numbers");
  if (params == nullptr) return nullptr;
  const Py_ssize_t num_params = PySequence_Fast_GET_SIZE(params);
  if (num_params != op->num_params || num_params > kMaxParams) {
    Py_DECREF(params);
    return set_error(OPRT_ERR_INVALID_ARG, std::string(op->name) + ": expected " +
                                               std::to_string(op->num_params) + " params, got " +
                                               std::to_string(num_params));
  }
  for (Py_ssize_t i = 0; i < num_params; ++i) {
    call.params[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(params, i));
  }
  Py_DECREF(params);
  if (PyErr_Occurred()) return nullptr;
  call.num_params = static_cast<int32_t>(num_params);

  const Py_ssize_t num_inputs = nargs - kFixed;
  if (num_inputs != op->num_inputs) {
    return set_error(OPRT_ERR_INVALID_ARG, std::string(op->name) + ": expected " +
                                               std::to_string(op->num_inputs) + " inputs, got " +
                                               std::to_string(num_inputs));
  }
  call.num_operands = static_cast<int32_t>(1 + num_inputs);
  // Inputs first, so a bad dtype is reported where the caller gave it.
  for (Py_ssize_t i = 0; i < num_inputs; ++i) {
    if (!read_operand(args[kFixed + i], &call.operands[1 + i], op->name, op->input_names[i])) {
      return nullptr;
    }
  }
  if (!read_operand(args[6], &call.operands[0], op->name, "out")) return nullptr;
  for (int i = 1; i < call.num_operands; ++i) {
    if (call.operands[i].device != call.operands[0].device) {
      return set_error(OPRT_ERR_INVALID_ARG,
                       std::string(op->name) + ": tensors are on different devices (out on " +
                           device_text(call.operands[0].device) + ", " + op->input_names[i - 1] +
                           " on " + device_text(call.operands[i].device) + ")");
    }
  }

  CallResult result;
  {
    // A CPU kernel can run long; other Python threads go on meanwhile.
    PyThreadState* thread_state = PyEval_SaveThread();
    result = execute_cached(call);
    PyEval_RestoreThread(thread_state);
  }
  if (result.status != OPRT_SUCCESS) {
    return set_error(result.status,
                     result.message.empty() ? oprt_status_string(result.status) : result.message);
  }
  return PyLong_FromSize_t(result.needed_workspace);
}

// Where op's operand lies in memory: [first, last] bytes, empty when it has no element.
struct Extent {
  uintptr_t first = 0, last = 0;
  bool empty = true;
};

Extent extent_of(const Operand& operand) {
  Extent extent;
  int64_t span = 0;
  for (int d = 0; d < operand.ndim; ++d) {
    if (operand.shape[d] == 0) return extent;
    span += (operand.shape[d] - 1) * operand.strides[d];
  }
  const auto item = static_cast<int64_t>(oprt_dtype_size(static_cast<oprt_dtype_t>(operand.dtype)));
  extent.first = reinterpret_cast<uintptr_t>(operand.data);
  extent.last = extent.first + static_cast<uintptr_t>((span + 1) * item - 1);
  extent.empty = false;
  return extent;
}

// How out shares memory with an input: the same tensor, none, or part of it.
enum class Overlap : char { kSame = 's', kDisjoint = 'd', kPartial = 'p' };

Overlap overlap_of(const Operand& out, const Operand& input) {
  if (out.data == input.data && same_layout(out, input)) return Overlap::kSame;
  const Extent a = extent_of(out), b = extent_of(input);
  if (a.empty || b.empty || a.last < b.first || b.last < a.first) return Overlap::kDisjoint;
  return Overlap::kPartial;
}

// The widest vector access a kernel makes (128 bits): a signature tells data
// pointers apart by their alignment up to it, no further.
constexpr uintptr_t kWidestAccess = 16;

template <typename T>
void append(std::string* bytes, const T& value) {
  bytes->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// signature(out, *inputs) -> bytes: everything about the tensors a call of a
// Python backend is prepared for besides the op and params: each operand's
// dtype, device, shape, strides and data alignment (up to kWidestAccess), and
// how out overlaps each input. Equal bytes, equal preparation.
PyObject* signature(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || nargs > kMaxOperands) {
    PyErr_SetString(PyExc_TypeError, "signature(out, *inputs): 1 to 9 tensors");
    return nullptr;
  }
  Operand operands[kMaxOperands];
  std::string bytes;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    Operand& operand = operands[i];
    if (!read_operand(args[i], &operand, "signature", i == 0 ? "out" : "input")) return nullptr;
    append(&bytes, operand.dtype);
    append(&bytes, operand.device);
    append(&bytes, operand.ndim);
    bytes.append(reinterpret_cast<const char*>(operand.shape), sizeof(int64_t) * operand.ndim);
    bytes.append(reinterpret_cast<const char*>(operand.strides), sizeof(int64_t) * operand.ndim);
    const auto address = reinterpret_cast<uintptr_t>(operand.data);
    append(&bytes, static_cast<char>(address % kWidestAccess == 0 ? kWidestAccess
                                                                     : address & -address));
  }
  for (Py_ssize_t i = 1; i < nargs; ++i) append(&bytes, overlap_of(operands[0], operands[i]));
  return PyBytes_FromStringAndSize(bytes.data(), static_cast<Py_ssize_t>(bytes.size()));
}

PyMethodDef signature_method = {
    "signature", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&signature)),
    METH_FASTCALL,
    "signature(out, *inputs) -> bytes: the tensors' dtypes, devices, shapes, strides, data "
    "alignment (up to 16 bytes) and out's overlap with each input, for keying calls."};

PyMethodDef run_method = {
    "run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&run)), METH_FASTCALL,
    "run(op_index, backend, stream, workspace_ptr, workspace_size, params, out, *inputs): "
    "executes op on the tensors through the descriptor cache; returns 0, or the workspace "
    "bytes needed when workspace_size is smaller (then nothing ran)."};

}  // namespace

void add_cached_call(py::module_& m, PyObject* error) {
  error_type = error;
  str_data_ptr = PyUnicode_InternFromString("data_ptr");
  str_shape = PyUnicode_InternFromString("shape");
  str_stride = PyUnicode_InternFromString("stride");
  str_dtype = PyUnicode_InternFromString("dtype");
  str_get_device = PyUnicode_InternFromString("get_device");
  str_storage_offset = PyUnicode_InternFromString("storage_offset");
  str_untyped_storage = PyUnicode_InternFromString("untyped_storage");
  str_nbytes = PyUnicode_InternFromString("nbytes");
  str_is_neg = PyUnicode_InternFromString("is_neg");
  str_is_conj = PyUnicode_InternFromString("is_conj");
  load_operator_table();

  m.add_object("run", py::reinterpret_steal<py::object>(PyCFunction_New(&run_method, nullptr)));
  m.add_object("signature",
               py::reinterpret_steal<py::object>(PyCFunction_New(&signature_method, nullptr)));
  m.def(
      "register_dtype",
      [](py::object dtype, int code) {
        dtype_codes().push_back(DtypeCode{dtype.release().ptr(), static_cast<int32_t>(code)});
      },
      py::arg("dtype"), py::arg("code"),
      "Maps a dtype object (torch.float32, ...) to its C dtype code for run().");
  m.def(
      "register_tensor_types",
      [](py::handle tensor_type, py::handle parameter_type, py::handle probe) {
        Operand probe_read;
        if (!read_operand(probe.ptr(), &probe_read, "register_tensor_types", "probe")) {
          throw py::error_already_set();
        }
        return enable_tensor_object_reads(tensor_type.ptr(), parameter_type.ptr(), probe.ptr(),
                                          probe_read);
      },
      py::arg("tensor_type"), py::arg("parameter_type"), py::arg("probe"),
      "Reads objects of exactly these types (torch.Tensor, torch.nn.Parameter) without "
      "Python calls from now on, if probe (a tensor) reads the same that way as through "
      "its attributes; returns whether it does.");
  m.def(
      "set_error_type",
      [](py::object type) {
        error_type = type.release().ptr();
        py::module_::import("operator_runtime._C").attr("Error") = py::handle(error_type);
      },
      py::arg("type"),
      "Makes every failure raise type(status, message) and names it _C.Error (the "
      "package passes a subclass of its OperatorRuntimeError).");
  m.def(
      "cache_info",
      [] {
        const CacheInfo info = cache_info();
        py::dict result;
        result["size"] = info.size;
        result["capacity"] = info.capacity;
        result["hits"] = info.hits;
        result["misses"] = info.misses;
        return result;
      },
        "The descriptor cache of run(): size, capacity, hits, misses.");
  m.def("cache_clear", [] { cache_clear(); },
        "Destroys every cached descriptor (those executing now once they finish).");
  m.def("cache_set_capacity", [](size_t capacity) { cache_set_capacity(capacity); },
        py::arg("capacity"), "Bounds the cache (0 disables it), dropping the least recent.");
}

}  // namespace oprt_python
