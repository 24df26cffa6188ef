// Internal helpers shared by every operator's front end and backend: errors,
// the kernel registry, backend resolution and tensor-view checks.
#ifndef OPERATOR_RUNTIME_CORE_CORE_H_
#define OPERATOR_RUNTIME_CORE_CORE_H_

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <new>

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

// A typed oprt_create_<op>_descriptor: entry's create on the thread's backend, with the
// operator's own handle type. params holds the typed function's scalars in table order.
template <class Handle>
oprt_status_t create_typed(const oprt_operator_t& entry, Handle** desc,
                           const oprt_tensor_view_t* out,
                           const oprt_tensor_view_t* const* inputs, const double* params) {
  if (desc == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: desc is null", entry.name);
  void* created = nullptr;
  const oprt_status_t status = entry.create(&created, thread_backend(), out, inputs, params);
  *desc = static_cast<Handle*>(created);
  return status;
}

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

// Every descriptor the runtime hands out derives from this.
struct Descriptor {
  explicit Descriptor(const char* op_name, oprt_backend_t backend_kind);
  virtual ~Descriptor();
  // Fills the family's fields of plan (oprt_descriptor_plan), which arrives zeroed with
  // its kind set; called on a live descriptor, whose plan create fixed.
  virtual void describe(oprt_plan_t* plan) const = 0;
  const char* op;
  oprt_backend_t backend;
  // What execute needs of workspace, fixed at create.
  size_t workspace_bytes = 0;
  // Guarded by the handle registry's lock (core.cc).
  int32_t in_use = 0;
  bool retired = false;
};

// Callers never see a descriptor's address. track() registers a new descriptor
// and returns its handle: a registry slot and that slot's generation. retire()
// (destroy) bumps the generation, so the handle stays dead for good, even when
// the allocator hands the same address to the next descriptor; a stale, foreign
// or never-created handle gets OPRT_ERR_INVALID_ARG instead of a crash.
void* track(Descriptor* desc);
// The live descriptor behind handle if it belongs to operator op, else nullptr.
// The caller holds it until release(): a retire() meanwhile (another thread's
// destroy) defers the delete to the last release.
Descriptor* acquire(const void* handle, const char* op);
void release(Descriptor* desc);
// Makes handle dead and deletes its descriptor once no caller holds it; false
// when handle was not a live descriptor of op.
bool retire(const void* handle, const char* op);

// acquire()/release() as a scope: `LiveDescriptor<ElementwiseDescriptor> d(handle, "copy");`
template <class T>
class LiveDescriptor {
 public:
  LiveDescriptor(const void* handle, const char* op)
      : desc_(static_cast<T*>(acquire(handle, op))) {}
  ~LiveDescriptor() {
    if (desc_ != nullptr) release(desc_);
  }
  LiveDescriptor(const LiveDescriptor&) = delete;
  LiveDescriptor& operator=(const LiveDescriptor&) = delete;
  T* get() const { return desc_; }
  T* operator->() const { return desc_; }

 private:
  T* desc_;
};

// The descriptor lifecycle every family shares. A family's create checks and plans, then:
//   const void* kernel; oprt_backend_t backend;
//   OPRT_RETURN_IF_ERROR(find_backend_kernel(op, requested, &backend, &kernel));
//   FamilyDescriptor* created; OPRT_RETURN_IF_ERROR(new_descriptor(op, backend, &created));
//   ...fill it...; return publish(created, desc);
// and its workspace size and destroy are descriptor_workspace_size and destroy_descriptor.

// The backend `requested` resolves to and the kernel registered there for op.
oprt_status_t find_backend_kernel(const char* op, oprt_backend_t requested,
                                  oprt_backend_t* backend, const void** kernel);

template <class T>
oprt_status_t new_descriptor(const char* op, oprt_backend_t backend, T** created) {
  *created = new (std::nothrow) T(op, backend);
  if (*created == nullptr) return fail(OPRT_ERR_RUNTIME, "%s: out of host memory", op);
  return OPRT_SUCCESS;
}

// Tracks created and hands its handle to the caller.
oprt_status_t publish(Descriptor* created, void** desc);

// INVALID_ARG, for a handle that is not a live descriptor of op.
oprt_status_t fail_not_live(const char* op);

oprt_status_t descriptor_workspace_size(const char* op, const void* desc, size_t* bytes);
oprt_status_t destroy_descriptor(const char* op, void* desc);

// Checks a view's pointer, ndim (0..8), extents (>= 0), dtype and that its
// element count fits int64. `role` names it in messages ("src", "out").
oprt_status_t check_view(const char* op, const char* role, const oprt_tensor_view_t* view);

int64_t numel(const oprt_tensor_view_t& view);

// view with every stride 0 when it has no elements: an empty view's strides are
// never used to address memory, and check_view does not bound them, so plans
// must not do arithmetic on them.
oprt_tensor_view_t layout_of_checked(const oprt_tensor_view_t& view);

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
