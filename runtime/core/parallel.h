// The cpu backend's threads: parallel_for splits a range of independent work
// items (elements, rows) across the machine's cores for one call.
//
// The pieces run on the host's threads when it installs a runner
// (oprt_set_cpu_runner: the Python module runs them on torch's intra-op
// threads), else on a pool of worker threads started on first use and kept
// (starting threads for each call cost about as much as the work of a call on
// 2^20 elements). The pool is safe against what a Python program does: a call
// that finds it busy (another thread's call, or a piece calling parallel_for)
// runs its pieces itself; fork() waits until no call uses it, and the child
// starts a pool of its own when it first needs one. Work is split only where
// each piece gets at least `min_items_per_thread` items.
#ifndef OPERATOR_RUNTIME_CORE_PARALLEL_H_
#define OPERATOR_RUNTIME_CORE_PARALLEL_H_

#include <algorithm>
#include <cstdint>

namespace oprt {

// Threads a cpu call may use: OPRT_CPU_THREADS when set to a positive number
// (read at the first call), else those of the runner installed with oprt_set_cpu_runner, else the cores
// this process may run on.
int cpu_threads();

namespace detail {

// Runs task(context, piece) for every piece in [0, pieces), on the installed
// runner's threads, or else on the pool's workers and the caller; returns when
// all have run.
void run_pieces(int64_t pieces, void (*task)(void* context, int64_t piece), void* context);

}  // namespace detail

// Calls fn(begin, end) on consecutive, disjoint pieces covering [0, count), at
// most cpu_threads() of them, at once where workers are free. Pieces depend only
// on count, min_items_per_thread and the thread count, so results that combine
// per-piece values in piece order are deterministic for a machine.
template <class Fn>
void parallel_for(int64_t count, int64_t min_items_per_thread, Fn fn) {
  const int64_t most = std::max<int64_t>(1, count / std::max<int64_t>(1, min_items_per_thread));
  const int64_t pieces = std::min<int64_t>(cpu_threads(), most);
  if (pieces <= 1) {
    if (count > 0) fn(int64_t{0}, count);
    return;
  }
  struct Split {
    Fn* fn;
    int64_t count, pieces;
  } split{&fn, count, pieces};
  detail::run_pieces(pieces, [](void* context, int64_t piece) {
    const Split& s = *static_cast<const Split*>(context);
    (*s.fn)(s.count * piece / s.pieces, s.count * (piece + 1) / s.pieces);
  }, &split);
}

// Elements a thread takes at least: below that, starting it costs more than it saves.
constexpr int64_t kMinElementsPerThread = int64_t{1} << 16;

// parallel_for over `rows` rows of `row_elements` elements each: a thread takes
// whole rows, at least kMinElementsPerThread elements' worth.
template <class Fn>
void parallel_for_rows(int64_t rows, int64_t row_elements, Fn fn) {
  const int64_t rows_per_thread =
      std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, row_elements));
  parallel_for(rows, rows_per_thread, fn);
}

}  // namespace oprt

#endif  // OPERATOR_RUNTIME_CORE_PARALLEL_H_
