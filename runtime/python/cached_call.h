// operator_runtime._C.run and its descriptor cache (cached_call.cc).
#ifndef OPERATOR_RUNTIME_PYTHON_CACHED_CALL_H_
#define OPERATOR_RUNTIME_PYTHON_CACHED_CALL_H_

#include <pybind11/pybind11.h>

namespace py = pybind11;

#include <cstdint>
#include <string>

#include <operator_runtime/api.h>

namespace oprt_python {

// One tensor as the C runtime needs it, read from the torch tensor itself.
struct Operand {
  void* data = nullptr;
  int64_t device = -1;  // tensor.get_device(): -1 on the CPU
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[OPRT_MAX_DIMS] = {};
  int64_t strides[OPRT_MAX_DIMS] = {};
};

// Reads tensor's dtype, shape, strides, device and data pointer; refuses, with
// _C.Error set, an unsupported dtype, more than OPRT_MAX_DIMS dims, a lazily
// negated or conjugated view and a view reaching past its storage.
bool read_operand(PyObject* tensor, Operand* operand, const char* op, const char* role);

// Sets _C.Error(status, message) and returns nullptr.
PyObject* set_error(oprt_status_t status, const std::string& message);

std::string device_text(int64_t device);

// Adds run, register_dtype and the cache_* functions to module m; failures
// raise `error` (_C.Error) with (status, message).
void add_cached_call(py::module_& m, PyObject* error);

}  // namespace oprt_python

#endif  // OPERATOR_RUNTIME_PYTHON_CACHED_CALL_H_
