// operator_runtime._C.run and its descriptor cache (cached_call.cc).
#ifndef OPERATOR_RUNTIME_PYTHON_CACHED_CALL_H_
#define OPERATOR_RUNTIME_PYTHON_CACHED_CALL_H_

#include <pybind11/pybind11.h>

namespace py = pybind11;

#include <cstdint>
#include <string>

#include <operator_runtime/api.h>

#include "runtime/python/descriptor_cache.h"

namespace oprt_python {

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
