// The cpu backend's threads: parallel_for splits a range of independent work
// items (elements, rows) across the machine's cores for one call.
//
// Threads are started for the call and joined before it returns: nothing
// outlives the call, so a forked child, a thread calling in parallel or a
// library unloaded in between never finds a pool in a bad state. Starting a
// thread costs tens of microseconds, so work is split only where each thread
// gets at least `min_items_per_thread` items; smaller calls run on the caller.
#ifndef OPERATOR_RUNTIME_CORE_PARALLEL_H_
#define OPERATOR_RUNTIME_CORE_PARALLEL_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <vector>

namespace oprt {

// Threads a cpu call may use: OPRT_CPU_THREADS when set to a positive number,
// else the cores this process may run on.
inline int cpu_threads() {
  if (const char* text = std::getenv("OPRT_CPU_THREADS")) {
    const int requested = std::atoi(text);
    if (requested > 0) return requested;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Calls fn(begin, end) on consecutive, disjoint pieces covering [0, count),
// on up to cpu_threads() threads (the caller runs the first piece). Pieces
// depend only on count, min_items_per_thread and the thread count, so results
// that combine per-piece values in piece order are deterministic for a machine.
// If the system refuses a thread, its piece runs on the caller instead.
template <class Fn>
void parallel_for(int64_t count, int64_t min_items_per_thread, Fn fn) {
  const int64_t most = std::max<int64_t>(1, count / std::max<int64_t>(1, min_items_per_thread));
  const int64_t pieces = std::min<int64_t>(cpu_threads(), most);
  if (pieces <= 1) {
    if (count > 0) fn(int64_t{0}, count);
    return;
  }
  const auto piece_begin = [&](int64_t piece) { return count * piece / pieces; };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(pieces - 1));
  for (int64_t piece = 1; piece < pieces; ++piece) {
    const int64_t begin = piece_begin(piece), end = piece_begin(piece + 1);
    try {
      threads.emplace_back([&fn, begin, end] { fn(begin, end); });
    } catch (const std::system_error&) {
      fn(begin, end);
    }
  }
  fn(int64_t{0}, piece_begin(1));
  for (std::thread& thread : threads) thread.join();
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
