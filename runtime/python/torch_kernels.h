// The CPU and CUDA kernels of the oprt:: torch.library ops, and the cpu
// backend's threads (torch_kernels.cc).
#ifndef OPERATOR_RUNTIME_PYTHON_TORCH_KERNELS_H_
#define OPERATOR_RUNTIME_PYTHON_TORCH_KERNELS_H_

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

#include <operator_runtime/api.h>

#include "runtime/python/descriptor_cache.h"

namespace oprt_python {

// One op to serve: op (e.g. "softmax_out") in the namespace, the operator's
// position in the C table, whether op is the out-variant, and the op holding
// its Python implementation (e.g. "_python_softmax_out"), which takes every
// call the fast path does not.
struct TorchKernel {
  std::string op;
  int32_t op_index;
  bool out_variant;
  std::string python_op;
};

// Registers the kernels for the CPU and CUDA dispatch keys, and that of
// <ns>::_prepared_run (a prepared descriptor's run: register_prepared); the ops
// and their Python implementations must be defined already.
void register_torch_kernels(const std::string& ns, const std::vector<TorchKernel>& kernels);

// An op of the namespace ("softmax", "softmax_out") and whether
// torch.library.register_autograd has registered its gradient.
struct AutogradOp {
  std::string op;
  bool has_gradient;
};

// Registers, for CPU and CUDA tensors, the autograd kernel of ops: a tensor with a
// forward-mode AD tangent makes it call <ns>::<refuse_tangent>(op, role), a Python
// op that raises; a call that needs a gradient runs the registered Python formula;
// any other goes straight below autograd.
void register_autograd_kernels(const std::string& ns, const std::vector<AutogradOp>& ops,
                               const std::string& refuse_tangent);

// Makes a created descriptor (handle, of op, on device -1 for the CPU) runnable
// through _prepared_run with tensors of the layouts it was created for (out, then
// the inputs); returns its id. unregister_prepared before destroying it.
int64_t register_prepared(const oprt_operator_t* op, void* handle, int64_t device,
                          std::vector<Operand> layouts);
void unregister_prepared(int64_t id);

// Reads a Python tensor object of exactly torch.Tensor or torch.nn.Parameter
// without a Python call, once enable_tensor_object_reads has; false for any
// other object and for anything the Python path must judge (read_operand then
// reads it through its Python attributes, and says what is wrong).
bool read_tensor_object(PyObject* object, Operand* operand);

// Enables read_tensor_object for tensor_type and parameter_type when probe, an
// object of tensor_type, reads the same through it as probe_read (read through
// its Python attributes); returns whether it did.
bool enable_tensor_object_reads(PyObject* tensor_type, PyObject* parameter_type, PyObject* probe,
                                const Operand& probe_read);

// The backend the kernels use, as backends.resolve decides it: codes[slot * 2 +
// device] is the native backend code for a call naming slot (0: none, 1: "cpu",
// 2: "nvidia", 3: "metax") on device (0: cpu, 1: cuda tensors), or -1 where the
// Python path must take the call (a Python backend, or one that cannot run).
constexpr int kBackendSlots = 4;
void set_backend_table(const std::vector<int32_t>& codes);

// Makes the cpu backend run its pieces on torch's intra-op threads
// (oprt_set_cpu_runner), so the process has one pool of threads.
void run_cpu_pieces_on_torch_threads();

}  // namespace oprt_python

#endif  // OPERATOR_RUNTIME_PYTHON_TORCH_KERNELS_H_
