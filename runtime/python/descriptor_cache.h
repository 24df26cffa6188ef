// The descriptor cache behind ort.<op> and ort.<op>_, free of Python and of torch,
// shared by _C.run (cached_call.cc) and the torch.library kernels
// (torch_kernels.cc). A bounded LRU of descriptors keyed by everything create
// validates except the data pointers (op, backend, device, dtypes, shapes,
// strides, params); execute re-checks each call's own pointers (overlap,
// null), so a descriptor created for one set of tensors is safe for any other
// of the same layouts. Thread-safe; held across fork().
#ifndef OPERATOR_RUNTIME_PYTHON_DESCRIPTOR_CACHE_H_
#define OPERATOR_RUNTIME_PYTHON_DESCRIPTOR_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include <operator_runtime/api.h>

namespace oprt_python {

constexpr int kMaxOperands = 9;  // out and up to 8 inputs
constexpr int kMaxParams = 8;

// One tensor as the C runtime needs it.
struct Operand {
  void* data = nullptr;
  int64_t device = -1;  // the device index; -1 on the CPU
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[OPRT_MAX_DIMS] = {};
  int64_t strides[OPRT_MAX_DIMS] = {};
};

// Whether every element of operand lies inside a storage of storage_nbytes
// bytes when the operand starts storage_offset elements into it: a tensor whose
// storage was resized or freed under it (resize_, untyped_storage().resize_(0),
// set_) never does. An empty operand always does.
bool within_storage(const Operand& operand, int64_t storage_offset, int64_t storage_nbytes);

// Same dtype, shape and strides (what a descriptor was created for).
bool same_layout(const Operand& a, const Operand& b);

// One execution: operands[0] is out, then the inputs.
struct Call {
  int32_t op_index = 0;  // position in the C operator table
  int32_t backend = 0;
  void* stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_size = 0;
  int32_t num_params = 0;
  double params[kMaxParams] = {};
  int32_t num_operands = 0;
  Operand operands[kMaxOperands];
};

struct CallResult {
  oprt_status_t status = OPRT_SUCCESS;
  std::string message;          // the C runtime's, when status is not SUCCESS
  size_t needed_workspace = 0;  // > 0: the call's workspace is too small, nothing ran
};

struct CacheInfo {
  size_t size, capacity;
  uint64_t hits, misses;
};

// Reads the C operator table once (the binding's start-up) and installs the
// cache's fork handlers.
void load_operator_table();
// The operator at index of the table, or nullptr.
const oprt_operator_t* operator_at(int32_t index);

// Creates (on a miss) and executes the call's descriptor. Call without the GIL.
CallResult execute_cached(const Call& call);

CacheInfo cache_info();
void cache_clear();
void cache_set_capacity(size_t capacity);

}  // namespace oprt_python

#endif  // OPERATOR_RUNTIME_PYTHON_DESCRIPTOR_CACHE_H_
