// The cpu backend's worker pool (parallel.h).
#include "runtime/core/parallel.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>

#include "runtime/core/core.h"

namespace oprt {
namespace detail {
namespace {

using Task = void (*)(void* context, int64_t piece);

constexpr auto kSpinBeforeSleep = std::chrono::microseconds(50);

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

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
    remaining_.store(pieces, std::memory_order_relaxed);
    ++generation_;
    wake_.notify_all();
    run_claimed(lock);
    lock.unlock();
    // The caller's core would idle now, so it spins on the last pieces for a
    // while before sleeping: on the CI VM a condition variable's wake-up takes
    // 8-18 us, as long as a piece of 2^20 elements takes to run.
    const auto give_up = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    while (remaining_.load(std::memory_order_acquire) != 0 &&
           std::chrono::steady_clock::now() < give_up) {
      spin_pause();
    }
    lock.lock();
    done_.wait(lock, [&] { return remaining_.load(std::memory_order_relaxed) == 0; });
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
      if (remaining_.fetch_sub(1, std::memory_order_release) == 1) done_.notify_all();
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
  std::atomic<int64_t> remaining_{0};
};

// The process's pool, made on first use. Calls find it with one atomic load;
// pool_mutex serialises its making and the fork handlers, so none of them sees
// a pool half made.
std::mutex pool_mutex;
std::atomic<WorkerPool*> pool{nullptr};

// In the child of a fork the workers do not exist: it drops the parent's pool
// (left allocated: its threads' state went with them) and makes its own. A call
// that loaded the pointer before the fork holds or waits for the pool's use_,
// which the prepare handler takes too, so fork() waits for that call.
void lock_pool_for_fork() {
  pool_mutex.lock();
  if (WorkerPool* const current = pool.load(std::memory_order_relaxed)) current->lock_for_fork();
}
void unlock_pool_in_parent() {
  if (WorkerPool* const current = pool.load(std::memory_order_relaxed)) {
    current->unlock_after_fork();
  }
  pool_mutex.unlock();
}
void drop_pool_in_child() {
  pool.store(nullptr, std::memory_order_relaxed);
  pool_mutex.unlock();
}

WorkerPool& make_pool() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  // Once per process image: a forked child inherits the handlers (and this flag).
  static const bool fork_handlers_installed =
      pthread_atfork(lock_pool_for_fork, unlock_pool_in_parent, drop_pool_in_child) == 0;
  (void)fork_handlers_installed;
  WorkerPool* current = pool.load(std::memory_order_relaxed);
  if (current == nullptr) {
    current = new WorkerPool(cpu_threads() - 1);
    pool.store(current, std::memory_order_release);
  }
  return *current;
}

WorkerPool& the_pool() {
  WorkerPool* const current = pool.load(std::memory_order_acquire);
  return current != nullptr ? *current : make_pool();
}

// The runner oprt_set_cpu_runner installed; null for the pool. A call reads
// each function once; the two may come from consecutive runners, which both
// stay valid (api.h).
std::atomic<int32_t (*)()> runner_threads{nullptr};
std::atomic<void (*)(int64_t, Task, void*)> runner_run{nullptr};

// A forked child runs its pieces on the library's own threads: a host's pool
// need not survive fork() (GNU OpenMP's does not: in a child of a process that
// ran torch ops on its threads, the next torch op on them never returns).
void drop_runner_in_child() {
  runner_run.store(nullptr, std::memory_order_relaxed);
  runner_threads.store(nullptr, std::memory_order_relaxed);
}

}  // namespace

void run_pieces(int64_t pieces, Task task, void* context) {
  if (const auto run = runner_run.load(std::memory_order_acquire)) {
    run(pieces, task, context);
    return;
  }
  if (the_pool().try_run(pieces, task, context)) return;
  for (int64_t piece = 0; piece < pieces; ++piece) task(context, piece);
}

}  // namespace detail

int cpu_threads() {
  // Read once: every cpu execute asks, and the environment does not change under it.
  static const int requested = [] {
    const char* text = std::getenv("OPRT_CPU_THREADS");
    return text != nullptr ? std::atoi(text) : 0;
  }();
  if (requested > 0) return requested;
  if (const auto threads = detail::runner_threads.load(std::memory_order_acquire)) {
    return std::max<int32_t>(1, threads());
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace oprt

oprt_status_t oprt_set_cpu_runner(const oprt_cpu_runner_t* runner) {
  if (runner != nullptr && (runner->threads == nullptr || runner->run == nullptr)) {
    return oprt::fail(OPRT_ERR_INVALID_ARG, "set_cpu_runner: threads and run must both be set");
  }
  static const bool child_handler_installed =
      pthread_atfork(nullptr, nullptr, oprt::detail::drop_runner_in_child) == 0;
  (void)child_handler_installed;
  oprt::detail::runner_threads.store(runner != nullptr ? runner->threads : nullptr,
                                     std::memory_order_release);
  oprt::detail::runner_run.store(runner != nullptr ? runner->run : nullptr,
                                 std::memory_order_release);
  return oprt::succeed();
}
