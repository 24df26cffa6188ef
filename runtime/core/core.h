// Internal helpers shared by every operator's front end and backend: errors,
// the kernel registry, backend resolution and tensor-view checks.
#ifndef OPERATOR_RUNTIME_CORE_CORE_H_
#define OPERATOR_RUNTIME_CORE_CORE_H_

#include <cstdarg>
#include <cstdint>

#include "operator_runtime/api.h"

namespace oprt {

// Records a formatted message for oprt_last_error_message() and returns status,
// so a check reads: `return fail(OPRT_ERR_INVALID_ARG, "copy: dst is null");`.
oprt_status_t fail(oprt_status_t status, const char* format, ...)
    __attribute__((format(printf, 2, 3)));
// Clears the thread's message; every public entry point calls it on success.
oprt_status_t succeed();

const char* dtype_name(oprt_dtype_t dtype);
bool is_valid_dtype(oprt_dtype_t dtype);

// The backend a new descriptor uses: `requested` with AUTO resolved. Fails with
// INVALID_ARG for an unknown code and NOT_SUPPORTED when the asked-for backend
// is not built in or has no device.
oprt_status_t resolve_backend(const char* op, oprt_backend_t requested, oprt_backend_t* backend);

// The thread's oprt_set_backend choice, which the typed create functions pass.
oprt_backend_t thread_backend();

// Backends register themselves from static initialisers (their libraries are
// alwayslink), so the core never names a backend's code.
using AvailabilityFn = bool (*)();
void register_backend(oprt_backend_t backend, AvailabilityFn available);

// One kernel entry point per (operator, backend). The pointer's real type is
// the operator's own kernel signature; find_kernel callers cast it back.
void register_kernel(const char* op, oprt_backend_t backend, const void* kernel);
const void* find_kernel(const char* op, oprt_backend_t backend);

// Operators register their uniform table entry the same way (see
// OPRT_REGISTER_OPERATOR below); oprt_find_operator() reads the table.
void register_operator(const oprt_operator_t* op);

// Every descriptor the runtime hands out derives from this, so execute and
// destroy can tell a live descriptor from a stale or foreign pointer.
struct Descriptor {
  explicit Descriptor(const char* op_name, oprt_backend_t backend_kind);
  virtual ~Descriptor();
  const char* op;
  oprt_backend_t backend;
};
// Records desc as live (create) / forgets it (destroy); is_live is what execute,
// get_workspace_size and destroy check first, under a lock, so a destroyed or
// never-created pointer gets OPRT_ERR_INVALID_ARG instead of a crash.
void track(Descriptor* desc);
bool untrack(Descriptor* desc);
bool is_live(const void* desc, const char* op);

// Checks a view's pointer, ndim (0..8), extents (>= 0), dtype and that its
// element count fits int64. `role` names it in messages ("src", "out").
oprt_status_t check_view(const char* op, const char* role, const oprt_tensor_view_t* view);

int64_t numel(const oprt_tensor_view_t& view);

// The element offsets [lo, hi] a view can touch (hi < lo when empty).
void span(const oprt_tensor_view_t& view, int64_t* lo, int64_t* hi);

// True when out is written through two different index tuples (a stride-0 or
// otherwise self-overlapping layout), which would make the result order-dependent.
bool has_internal_overlap(const oprt_tensor_view_t& view);

enum class Overlap { kNone, kExact, kPartial };
// How out and in share memory: not at all, element for element (in-place is
// safe for pointwise ops), or in any other way.
Overlap overlap(const oprt_tensor_view_t& out, const oprt_tensor_view_t& in);

// Formats a shape as "[2, 3, 4]" into a thread-local buffer for messages.
const char* shape_string(const oprt_tensor_view_t& view);

}  // namespace oprt

#define OPRT_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    oprt_status_t oprt_status_ = (expr);            \
    if (oprt_status_ != OPRT_SUCCESS) return oprt_status_; \
  } while (0)

// Registers a kernel from a backend library at load time.
#define OPRT_REGISTER_KERNEL(op, backend, fn)                                   \
  static const bool oprt_kernel_registered_##op##_##backend =                   \
      (::oprt::register_kernel(#op, backend, reinterpret_cast<const void*>(fn)), true)

// Adds an operator's table entry at load time: `OPRT_REGISTER_OPERATOR(copy, entry)`.
#define OPRT_REGISTER_OPERATOR(op, entry) \
  static const bool oprt_operator_registered_##op = (::oprt::register_operator(&(entry)), true)

#endif  // OPERATOR_RUNTIME_CORE_CORE_H_
