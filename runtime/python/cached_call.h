// operator_runtime._C.run and its descriptor cache (cached_call.cc).
#ifndef OPERATOR_RUNTIME_PYTHON_CACHED_CALL_H_
#define OPERATOR_RUNTIME_PYTHON_CACHED_CALL_H_

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace oprt_python {

// Adds run, register_dtype and the cache_* functions to module m; failures
// raise `error` (_C.Error) with (status, message).
void add_cached_call(py::module_& m, PyObject* error);

}  // namespace oprt_python

#endif  // OPERATOR_RUNTIME_PYTHON_CACHED_CALL_H_
