// The descriptor cache behind ort.<op> and ort.<op>_ (see descriptor_cache.h).
#include "runtime/python/descriptor_cache.h"

#include <pthread.h>

#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace oprt_python {
namespace {

constexpr size_t kDefaultCapacity = 256;

struct Key {
  int32_t op = 0;
  int32_t backend = 0;
  int32_t num_operands = 0;
  int32_t num_params = 0;
  Operand operands[kMaxOperands];
  double params[kMaxParams] = {};

  bool operator==(const Key& other) const {
    if (op != other.op || backend != other.backend || num_operands != other.num_operands ||
        num_params != other.num_params) {
      return false;
    }
    for (int i = 0; i < num_operands; ++i) {
      const Operand& a = operands[i];
      const Operand& b = other.operands[i];
      if (a.device != b.device || a.dtype != b.dtype || a.ndim != b.ndim) return false;
      for (int d = 0; d < a.ndim; ++d) {
        if (a.shape[d] != b.shape[d] || a.strides[d] != b.strides[d]) return false;
      }
    }
    // Bitwise, so -0.0 and 0.0 (or two NaNs) are different keys rather than a wrong hit.
    return std::memcmp(params, other.params, sizeof(double) * num_params) == 0;
  }
};

struct KeyHash {
  size_t operator()(const Key& key) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields that take part in ==
    auto mix = [&h](uint64_t value) {
      h ^= value;
      h *= 1099511628211ull;
    };
    mix(static_cast<uint64_t>(key.op) << 32 | static_cast<uint32_t>(key.backend));
    for (int i = 0; i < key.num_operands; ++i) {
      const Operand& operand = key.operands[i];
      mix(static_cast<uint64_t>(operand.device));
      mix(static_cast<uint64_t>(operand.dtype) << 32 | static_cast<uint32_t>(operand.ndim));
      for (int d = 0; d < operand.ndim; ++d) {
        mix(static_cast<uint64_t>(operand.shape[d]));
        mix(static_cast<uint64_t>(operand.strides[d]));
      }
    }
    for (int i = 0; i < key.num_params; ++i) {
      uint64_t bits;
      std::memcpy(&bits, &key.params[i], sizeof(bits));
      mix(bits);
    }
    return static_cast<size_t>(h);
  }
};

// A created descriptor; destroyed when the cache has dropped it and no call
// still executes it.
struct CachedDescriptor {
  const oprt_operator_t* op = nullptr;
  void* desc = nullptr;
  size_t workspace_size = 0;
  ~CachedDescriptor() {
    if (desc != nullptr) op->destroy(desc);
  }
};

class DescriptorCache {
 public:
  std::shared_ptr<CachedDescriptor> find(const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  // Inserts created unless another thread inserted the same key meanwhile;
  // returns the entry the call should use.
  std::shared_ptr<CachedDescriptor> insert(const Key& key,
                                           std::shared_ptr<CachedDescriptor> created) {
    std::shared_ptr<CachedDescriptor> evicted;  // destroyed after the lock is released
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) return it->second->second;
    if (capacity_ == 0) return created;
    if (order_.size() >= capacity_) {
      evicted = std::move(order_.back().second);
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    order_.emplace_front(key, created);
    index_.emplace(key, order_.begin());
    return created;
  }

  void clear() {
    std::list<Entry> dropped;
    std::lock_guard<std::mutex> lock(mutex_);
    index_.clear();
    dropped.swap(order_);
  }

  void set_capacity(size_t capacity) {
    std::list<Entry> dropped;
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = capacity;
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      dropped.splice(dropped.begin(), order_, std::prev(order_.end()));
    }
  }

  CacheInfo info() {
    std::lock_guard<std::mutex> lock(mutex_);
    return CacheInfo{order_.size(), capacity_, hits_, misses_};
  }

  // fork() copies a mutex in whatever state another thread left it: hold it
  // across the fork so both processes start with it unlocked and the map whole.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

 private:
  using Entry = std::pair<Key, std::shared_ptr<CachedDescriptor>>;
  std::mutex mutex_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
  size_t capacity_ = kDefaultCapacity;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

// Leaked on purpose: calls may still run while the interpreter finalises.
DescriptorCache& cache() {
  static DescriptorCache* instance = new DescriptorCache();
  return *instance;
}

std::vector<const oprt_operator_t*>& operator_table() {
  static std::vector<const oprt_operator_t*> table;
  return table;
}

}  // namespace

const oprt_operator_t* operator_at(int32_t index) {
  const auto& table = operator_table();
  if (index < 0 || static_cast<size_t>(index) >= table.size()) return nullptr;
  return table[static_cast<size_t>(index)];
}

void load_operator_table() {
  auto& table = operator_table();
  if (!table.empty()) return;
  for (int32_t i = 0; i < oprt_operator_count(); ++i) table.push_back(oprt_operator_at(i));
  static bool fork_handlers_installed = false;
  if (!fork_handlers_installed) {
    fork_handlers_installed = true;
    pthread_atfork([] { cache().lock_for_fork(); }, [] { cache().unlock_after_fork(); },
                   [] { cache().unlock_after_fork(); });
  }
}

CallResult execute_cached(const Call& call) {
  CallResult result;
  const oprt_operator_t* op = operator_at(call.op_index);
  Key key;
  key.op = call.op_index;
  key.backend = call.backend;
  key.num_operands = call.num_operands;
  key.num_params = call.num_params;
  std::memcpy(key.operands, call.operands, sizeof(Operand) * call.num_operands);
  std::memcpy(key.params, call.params, sizeof(double) * call.num_params);
  std::shared_ptr<CachedDescriptor> entry = cache().find(key);
  if (entry == nullptr) {
    oprt_tensor_view_t views[kMaxOperands];
    const oprt_tensor_view_t* input_views[kMaxOperands - 1];
    for (int i = 0; i < key.num_operands; ++i) {
      const Operand& operand = key.operands[i];
      views[i].data = operand.data;
      views[i].dtype = static_cast<oprt_dtype_t>(operand.dtype);
      views[i].ndim = operand.ndim;
      std::memcpy(views[i].shape, operand.shape, sizeof(operand.shape));
      std::memcpy(views[i].strides, operand.strides, sizeof(operand.strides));
      if (i > 0) input_views[i - 1] = &views[i];
    }
    auto created = std::make_shared<CachedDescriptor>();
    created->op = op;
    result.status = op->create(&created->desc, static_cast<oprt_backend_t>(key.backend),
                               &views[0], input_views, key.params);
    if (result.status == OPRT_SUCCESS) {
      result.status = op->get_workspace_size(created->desc, &created->workspace_size);
    }
    if (result.status != OPRT_SUCCESS) {
      result.message = oprt_last_error_message();
      return result;
    }
    entry = cache().insert(key, std::move(created));
  }
  if (call.workspace_size < entry->workspace_size) {
    result.needed_workspace = entry->workspace_size;
    return result;
  }
  const void* input_ptrs[kMaxOperands - 1];
  for (int i = 1; i < key.num_operands; ++i) input_ptrs[i - 1] = key.operands[i].data;
  result.status = op->execute(entry->desc, call.workspace, call.workspace_size,
                              key.operands[0].data, input_ptrs, call.stream);
  if (result.status != OPRT_SUCCESS) result.message = oprt_last_error_message();
  return result;
}

bool within_storage(const Operand& operand, int64_t storage_offset, int64_t storage_nbytes) {
  for (int d = 0; d < operand.ndim; ++d) {
    if (operand.shape[d] == 0) return true;  // nothing is addressed
  }
  int64_t lo = storage_offset, hi = storage_offset;
  for (int d = 0; d < operand.ndim; ++d) {
    int64_t last = 0;
    if (__builtin_mul_overflow(operand.shape[d] - 1, operand.strides[d], &last) ||
        __builtin_add_overflow(last < 0 ? lo : hi, last, last < 0 ? &lo : &hi)) {
      return false;
    }
  }
  const auto item = static_cast<int64_t>(oprt_dtype_size(static_cast<oprt_dtype_t>(operand.dtype)));
  int64_t end_bytes = 0;
  return lo >= 0 && !__builtin_mul_overflow(hi + 1, item, &end_bytes) &&
         end_bytes <= storage_nbytes;
}

bool same_layout(const Operand& a, const Operand& b) {
  if (a.dtype != b.dtype || a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.shape[d] != b.shape[d] || a.strides[d] != b.strides[d]) return false;
  }
  return true;
}

CacheInfo cache_info() { return cache().info(); }
void cache_clear() { cache().clear(); }
void cache_set_capacity(size_t capacity) { cache().set_capacity(capacity); }

}  // namespace oprt_python
