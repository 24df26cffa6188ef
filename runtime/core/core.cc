// The runtime core: status and dtype strings, the thread-local error message
// and backend setting, the backend / kernel / operator registries and
// descriptor liveness. Tensor-view helpers live in tensor_view.cc.
#include "runtime/core/core.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace oprt {
namespace {

// Long enough for any message the runtime writes; longer ones are truncated.
constexpr size_t kMessageCapacity = 512;
thread_local char t_last_error[kMessageCapacity] = "";
thread_local oprt_backend_t t_backend = OPRT_BACKEND_AUTO;

bool is_valid_backend(oprt_backend_t backend) {
  return backend >= OPRT_BACKEND_AUTO && backend <= OPRT_BACKEND_CPU;
}

// Registries are function-local statics so that backends and operators may
// register from static initialisers in any translation unit, in any order.
struct BackendSlot {
  AvailabilityFn available = nullptr;
  int cached = -1;  // -1: not probed yet; probing a GPU is slow, devices do not come and go
};

struct BackendRegistry {
  std::mutex mutex;
  BackendSlot slots[OPRT_BACKEND_CPU + 1];
  BackendRegistry() {
    slots[OPRT_BACKEND_CPU].available = [] { return true; };
  }
};

BackendRegistry& backend_registry() {
  static BackendRegistry registry;
  return registry;
}

bool backend_registered(oprt_backend_t backend) {
  BackendRegistry& registry = backend_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  return registry.slots[backend].available != nullptr;
}

bool backend_has_device(oprt_backend_t backend) {
  BackendRegistry& registry = backend_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  BackendSlot& slot = registry.slots[backend];
  if (slot.available == nullptr) return false;
  if (slot.cached < 0) slot.cached = slot.available() ? 1 : 0;
  return slot.cached == 1;
}

struct KernelRegistry {
  std::mutex mutex;
  std::map<std::pair<std::string, int>, const void*> kernels;
};

KernelRegistry& kernel_registry() {
  static KernelRegistry registry;
  return registry;
}

struct OperatorTable {
  std::mutex mutex;
  std::vector<const oprt_operator_t*> ops;  // sorted by name, so the order does not depend on link order
};

OperatorTable& operator_table() {
  static OperatorTable table;
  return table;
}

// Descriptor handles: slot index + 1 in the low 32 bits, the slot's generation
// in the high 32, so no handle is 0 and none is a heap address.
struct HandleSlot {
  Descriptor* desc = nullptr;
  uint32_t generation = 0;
};

struct HandleRegistry {
  std::mutex mutex;
  std::vector<HandleSlot> slots;
  std::vector<uint32_t> free_slots;
};

HandleRegistry& handle_registry() {
  static HandleRegistry registry;
  return registry;
}

// The slot of a well-formed live handle, else nullptr; registry.mutex held.
HandleSlot* slot_of(HandleRegistry& registry, const void* handle) {
  const auto bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
  const uint64_t index = (bits & 0xffffffffu) - 1;
  const auto generation = static_cast<uint32_t>(bits >> 32);
  if (handle == nullptr || index >= registry.slots.size()) return nullptr;
  HandleSlot& slot = registry.slots[index];
  if (slot.desc == nullptr || slot.generation != generation) return nullptr;
  return &slot;
}

// fork() copies each mutex in whatever state another thread left it: the
// registries are locked across the fork, so both processes find them unlocked
// and consistent. No code path holds two of them at once, so the order is free.
void lock_registries_for_fork() {
  backend_registry().mutex.lock();
  kernel_registry().mutex.lock();
  operator_table().mutex.lock();
  handle_registry().mutex.lock();
}

void unlock_registries_after_fork() {
  handle_registry().mutex.unlock();
  operator_table().mutex.unlock();
  kernel_registry().mutex.unlock();
  backend_registry().mutex.unlock();
}

[[maybe_unused]] const bool fork_handlers_installed =
    pthread_atfork(lock_registries_for_fork, unlock_registries_after_fork,
                   unlock_registries_after_fork) == 0;

// A registration conflict is a build mistake that no caller could handle.
[[noreturn]] void die(const char* what, const char* name) {
  std::fprintf(stderr, "oprt: %s %s registered twice\n", what, name);
  std::abort();
}

}  // namespace

oprt_status_t fail(oprt_status_t status, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(t_last_error, kMessageCapacity, format, args);
  va_end(args);
  return status;
}

oprt_status_t succeed() {
  t_last_error[0] = '\0';
  return OPRT_SUCCESS;
}

const char* dtype_name(oprt_dtype_t dtype) {
  switch (dtype) {
    case OPRT_DTYPE_F16: return "f16";
    case OPRT_DTYPE_F32: return "f32";
    case OPRT_DTYPE_BF16: return "bf16";
  }
  return "unknown";
}

bool is_valid_dtype(oprt_dtype_t dtype) {
  return dtype == OPRT_DTYPE_F16 || dtype == OPRT_DTYPE_F32 || dtype == OPRT_DTYPE_BF16;
}

oprt_backend_t thread_backend() { return t_backend; }

oprt_status_t resolve_backend(const char* op, oprt_backend_t wanted, oprt_backend_t* backend) {
  if (!is_valid_backend(wanted)) {
    return fail(OPRT_ERR_INVALID_ARG, "%s: unknown backend %d", op, static_cast<int>(wanted));
  }
  if (wanted == OPRT_BACKEND_AUTO) {
    for (oprt_backend_t gpu : {OPRT_BACKEND_NVIDIA, OPRT_BACKEND_METAX}) {
      if (backend_has_device(gpu)) {
        *backend = gpu;
        return OPRT_SUCCESS;
      }
    }
    *backend = OPRT_BACKEND_CPU;
    return OPRT_SUCCESS;
  }
  if (!backend_registered(wanted)) {
    return fail(OPRT_ERR_NOT_SUPPORTED, "%s: backend %s is not built into this library", op,
                oprt_backend_string(wanted));
  }
  if (!backend_has_device(wanted)) {
    return fail(OPRT_ERR_NOT_SUPPORTED, "%s: backend %s has no device", op,
                oprt_backend_string(wanted));
  }
  *backend = wanted;
  return OPRT_SUCCESS;
}

void register_backend(oprt_backend_t backend, AvailabilityFn available) {
  if (!is_valid_backend(backend) || backend == OPRT_BACKEND_AUTO) die("backend", "AUTO or unknown");
  BackendRegistry& registry = backend_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  BackendSlot& slot = registry.slots[backend];
  if (slot.available != nullptr && backend != OPRT_BACKEND_CPU) {
    die("backend", oprt_backend_string(backend));
  }
  slot.available = available;
  slot.cached = -1;
}

void register_kernel(const char* op, oprt_backend_t backend, const void* kernel) {
  KernelRegistry& registry = kernel_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  if (!registry.kernels.emplace(std::make_pair(std::string(op), static_cast<int>(backend)), kernel)
           .second) {
    die("kernel", op);
  }
}

const void* find_kernel(const char* op, oprt_backend_t backend) {
  KernelRegistry& registry = kernel_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto it = registry.kernels.find(std::make_pair(std::string(op), static_cast<int>(backend)));
  return it == registry.kernels.end() ? nullptr : it->second;
}

void register_operator(const oprt_operator_t* op) {
  OperatorTable& table = operator_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  auto by_name = [](const oprt_operator_t* a, const char* name) {
    return std::strcmp(a->name, name) < 0;
  };
  auto it = std::lower_bound(table.ops.begin(), table.ops.end(), op->name, by_name);
  if (it != table.ops.end() && std::strcmp((*it)->name, op->name) == 0) die("operator", op->name);
  table.ops.insert(it, op);
}

Descriptor::Descriptor(const char* op_name, oprt_backend_t backend_kind)
    : op(op_name), backend(backend_kind) {}

Descriptor::~Descriptor() = default;

oprt_status_t find_backend_kernel(const char* op, oprt_backend_t requested,
                                  oprt_backend_t* backend, const void** kernel) {
  OPRT_RETURN_IF_ERROR(resolve_backend(op, requested, backend));
  *kernel = find_kernel(op, *backend);
  if (*kernel == nullptr) {
    return fail(OPRT_ERR_NOT_SUPPORTED, "%s: no %s kernel is built into this library", op,
                oprt_backend_string(*backend));
  }
  return OPRT_SUCCESS;
}

oprt_status_t publish(Descriptor* created, void** desc) {
  *desc = track(created);
  return succeed();
}

oprt_status_t fail_not_live(const char* op) {
  return fail(OPRT_ERR_INVALID_ARG, "%s: descriptor is null, destroyed or not a %s descriptor",
              op, op);
}

oprt_status_t descriptor_workspace_size(const char* op, const void* desc, size_t* bytes) {
  const LiveDescriptor<Descriptor> live(desc, op);
  if (live.get() == nullptr) return fail_not_live(op);
  if (bytes == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: bytes is null", op);
  *bytes = live->workspace_bytes;
  return succeed();
}

oprt_status_t destroy_descriptor(const char* op, void* desc) {
  if (!retire(desc, op)) return fail_not_live(op);
  return succeed();
}

void* track(Descriptor* desc) {
  HandleRegistry& registry = handle_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  uint32_t index;
  if (!registry.free_slots.empty()) {
    index = registry.free_slots.back();
    registry.free_slots.pop_back();
  } else {
    index = static_cast<uint32_t>(registry.slots.size());
    registry.slots.emplace_back();
  }
  HandleSlot& slot = registry.slots[index];
  slot.desc = desc;
  const uint64_t bits = static_cast<uint64_t>(slot.generation) << 32 | (uint64_t{index} + 1);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(bits));
}

Descriptor* acquire(const void* handle, const char* op) {
  HandleRegistry& registry = handle_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  HandleSlot* slot = slot_of(registry, handle);
  if (slot == nullptr || std::strcmp(slot->desc->op, op) != 0) return nullptr;
  ++slot->desc->in_use;
  return slot->desc;
}

void release(Descriptor* desc) {
  bool last = false;
  {
    HandleRegistry& registry = handle_registry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    last = --desc->in_use == 0 && desc->retired;
  }
  if (last) delete desc;
}

bool retire(const void* handle, const char* op) {
  Descriptor* desc = nullptr;
  {
    HandleRegistry& registry = handle_registry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    HandleSlot* slot = slot_of(registry, handle);
    if (slot == nullptr || std::strcmp(slot->desc->op, op) != 0) return false;
    desc = slot->desc;
    desc->retired = true;
    slot->desc = nullptr;
    ++slot->generation;
    registry.free_slots.push_back(static_cast<uint32_t>(slot - registry.slots.data()));
    if (desc->in_use > 0) desc = nullptr;  // the last release() deletes it
  }
  delete desc;
  return true;
}

}  // namespace oprt

using oprt::fail;
using oprt::succeed;

const char* oprt_status_string(oprt_status_t status) {
  switch (status) {
    case OPRT_SUCCESS: return "OPRT_SUCCESS";
    case OPRT_ERR_INVALID_ARG: return "OPRT_ERR_INVALID_ARG";
    case OPRT_ERR_UNSUPPORTED_DTYPE: return "OPRT_ERR_UNSUPPORTED_DTYPE";
    case OPRT_ERR_RUNTIME: return "OPRT_ERR_RUNTIME";
    case OPRT_ERR_INSUFFICIENT_WORKSPACE: return "OPRT_ERR_INSUFFICIENT_WORKSPACE";
    case OPRT_ERR_NOT_SUPPORTED: return "OPRT_ERR_NOT_SUPPORTED";
  }
  return "OPRT_ERR_UNKNOWN_STATUS";
}

const char* oprt_last_error_message(void) { return oprt::t_last_error; }

oprt_status_t oprt_set_backend(oprt_backend_t backend) {
  if (!oprt::is_valid_backend(backend)) {
    return fail(OPRT_ERR_INVALID_ARG, "set_backend: unknown backend %d", static_cast<int>(backend));
  }
  oprt::t_backend = backend;
  return succeed();
}

oprt_status_t oprt_get_backend(oprt_backend_t* backend) {
  if (backend == nullptr) return fail(OPRT_ERR_INVALID_ARG, "get_backend: backend is null");
  *backend = oprt::t_backend;
  return succeed();
}

const char* oprt_backend_string(oprt_backend_t backend) {
  switch (backend) {
    case OPRT_BACKEND_AUTO: return "auto";
    case OPRT_BACKEND_NVIDIA: return "nvidia";
    case OPRT_BACKEND_METAX: return "metax";
    case OPRT_BACKEND_CPU: return "cpu";
  }
  return "unknown";
}

int32_t oprt_backend_available(oprt_backend_t backend) {
  if (!oprt::is_valid_backend(backend)) return 0;
  // AUTO always resolves to something: at worst the cpu backend.
  if (backend == OPRT_BACKEND_AUTO) return 1;
  return oprt::backend_has_device(backend) ? 1 : 0;
}

size_t oprt_dtype_size(oprt_dtype_t dtype) {
  switch (dtype) {
    case OPRT_DTYPE_F16: return 2;
    case OPRT_DTYPE_F32: return 4;
    case OPRT_DTYPE_BF16: return 2;
  }
  return 0;
}

const oprt_operator_t* oprt_find_operator(const char* name) {
  if (name == nullptr) {
    fail(OPRT_ERR_INVALID_ARG, "find_operator: name is null");
    return nullptr;
  }
  oprt::OperatorTable& table = oprt::operator_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  for (const oprt_operator_t* op : table.ops) {
    if (std::strcmp(op->name, name) == 0) {
      succeed();
      return op;
    }
  }
  fail(OPRT_ERR_NOT_SUPPORTED, "find_operator: operator '%s' is not built into this library", name);
  return nullptr;
}

oprt_status_t oprt_descriptor_plan(const char* op, const void* desc, oprt_plan_t* plan) {
  if (op == nullptr) return fail(OPRT_ERR_INVALID_ARG, "descriptor_plan: op is null");
  const oprt_operator_t* entry = oprt_find_operator(op);
  if (entry == nullptr) {
    return fail(OPRT_ERR_INVALID_ARG,
                "descriptor_plan: operator '%s' is not built into this library", op);
  }
  const oprt::LiveDescriptor<oprt::Descriptor> live(desc, entry->name);
  if (live.get() == nullptr) return oprt::fail_not_live(entry->name);
  if (plan == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: plan is null", entry->name);
  *plan = oprt_plan_t{};
  plan->kind = entry->kind;
  live->describe(plan);
  return succeed();
}

int32_t oprt_operator_count(void) {
  oprt::OperatorTable& table = oprt::operator_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  return static_cast<int32_t>(table.ops.size());
}

const oprt_operator_t* oprt_operator_at(int32_t index) {
  oprt::OperatorTable& table = oprt::operator_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  if (index < 0 || static_cast<size_t>(index) >= table.ops.size()) {
    fail(OPRT_ERR_INVALID_ARG, "operator_at: index %d out of range for %zu operators", index,
         table.ops.size());
    return nullptr;
  }
  succeed();
  return table.ops[static_cast<size_t>(index)];
}
