// The cpu backend's worker pool (parallel.h).
#include "runtime/core/parallel.h"

#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <system_error>
#include <vector>

namespace oprt {
namespace detail {
namespace {

using Task = void (*)(void* context, int64_t piece);

// Workers wait for a job, then claim its pieces one at a time, as the caller
// does; the caller returns once every piece has run. One call uses the pool at
// a time (use_); the pool is never destroyed, so no exit path waits on it.
class WorkerPool {
 public:
  explicit WorkerPool(int workers) {
    for (int i = 0; i < workers; ++i) {
      try {
        std::thread(&WorkerPool::work, this).detach();
      } catch (const std::system_error&) {
        break;  // fewer workers: the caller claims the pieces they would have
      }
    }
  }

  // False, running nothing, when another call uses the pool.
  bool try_run(int64_t pieces, Task task, void* context) {
    std::unique_lock<std::mutex> use(use_, std::try_to_lock);
    if (!use.owns_lock()) return false;
    std::unique_lock<std::mutex> lock(mutex_);
    task_ = task;
    context_ = context;
    pieces_ = pieces;
    next_ = 0;
    remaining_ = pieces;
    ++generation_;
    wake_.notify_all();
    run_claimed(lock);
    done_.wait(lock, [&] { return remaining_ == 0; });
    return true;
  }

  // fork(): held across it, so the parent's pool is idle and consistent.
  void lock_for_fork() {
    use_.lock();
    mutex_.lock();
  }
  void unlock_after_fork() {
    mutex_.unlock();
    use_.unlock();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    uint64_t seen = generation_;
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      run_claimed(lock);
    }
  }

  // Claims and runs pieces of the current job until none is left; mutex_ held
  // on entry and exit, released while a piece runs.
  void run_claimed(std::unique_lock<std::mutex>& lock) {
    while (next_ < pieces_) {
      const int64_t piece = next_++;
      const Task task = task_;
      void* const context = context_;
      lock.unlock();
      task(context, piece);
      lock.lock();
      if (--remaining_ == 0) done_.notify_all();
    }
  }

  std::mutex use_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;
  Task task_ = nullptr;
  void* context_ = nullptr;
  int64_t pieces_ = 0;
  int64_t next_ = 0;
  int64_t remaining_ = 0;
};

// The process's pool, made on first use; pool_mutex guards the pointer.
std::mutex pool_mutex;
WorkerPool* pool = nullptr;

// In the child of a fork the workers do not exist: it drops the parent's pool
// (left allocated: its threads' state went with them) and makes its own.
void lock_pool_for_fork() {
  pool_mutex.lock();
  if (pool != nullptr) pool->lock_for_fork();
}
void unlock_pool_in_parent() {
  if (pool != nullptr) pool->unlock_after_fork();
  pool_mutex.unlock();
}
void drop_pool_in_child() {
  pool = nullptr;
  pool_mutex.unlock();
}

WorkerPool& the_pool() {
  static const bool fork_handlers_installed =
      pthread_atfork(lock_pool_for_fork, unlock_pool_in_parent, drop_pool_in_child) == 0;
  (void)fork_handlers_installed;
  std::lock_guard<std::mutex> lock(pool_mutex);
  if (pool == nullptr) pool = new WorkerPool(cpu_threads() - 1);
  return *pool;
}

}  // namespace

void run_pieces(int64_t pieces, Task task, void* context) {
  if (the_pool().try_run(pieces, task, context)) return;
  for (int64_t piece = 0; piece < pieces; ++piece) task(context, piece);
}

}  // namespace detail
}  // namespace oprt
