// Tensor-view checks and memory-layout questions shared by every operator.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "runtime/core/core.h"

namespace oprt {
namespace {

// |x| for a stride; the caller has rejected INT64_MIN.
int64_t magnitude(int64_t x) { return x < 0 ? -x : x; }

}  // namespace

oprt_status_t check_view(const char* op, const char* role, const oprt_tensor_view_t* view) {
  if (view == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: %s view is null", op, role);
  if (view->ndim < 0 || view->ndim > OPRT_MAX_DIMS) {
    return fail(OPRT_ERR_INVALID_ARG, "%s: %s has ndim %d; expected 0..%d", op, role,
                static_cast<int>(view->ndim), OPRT_MAX_DIMS);
  }
  for (int d = 0; d < view->ndim; ++d) {
    if (view->shape[d] < 0) {
      return fail(OPRT_ERR_INVALID_ARG, "%s: %s has negative extent %" PRId64 " at dim %d", op,
                  role, view->shape[d], d);
    }
    if (view->strides[d] == INT64_MIN) {
      return fail(OPRT_ERR_INVALID_ARG, "%s: %s has stride INT64_MIN at dim %d", op, role, d);
    }
  }
  if (!is_valid_dtype(view->dtype)) {
    return fail(OPRT_ERR_UNSUPPORTED_DTYPE, "%s: %s has unknown dtype %d", op, role,
                static_cast<int>(view->dtype));
  }
  int64_t count = 1;
  bool empty = false;
  for (int d = 0; d < view->ndim; ++d) {
    empty = empty || view->shape[d] == 0;
    if (__builtin_mul_overflow(count, view->shape[d], &count)) {
      return fail(OPRT_ERR_INVALID_ARG, "%s: %s of shape %s has more elements than int64 holds",
                  op, role, shape_string(*view));
    }
  }
  if (empty) return OPRT_SUCCESS;
  // Kernels address elements as base + sum(index * stride) and bytes as that
  // times the element size; both must stay representable.
  int64_t reach = 0;
  for (int d = 0; d < view->ndim; ++d) {
    int64_t term = 0;
    if (__builtin_mul_overflow(view->shape[d] - 1, magnitude(view->strides[d]), &term) ||
        __builtin_add_overflow(reach, term, &reach)) {
      reach = -1;
      break;
    }
  }
  int64_t reach_bytes = 0;
  if (reach < 0 ||
      __builtin_mul_overflow(reach, static_cast<int64_t>(oprt_dtype_size(view->dtype)),
                             &reach_bytes)) {
    return fail(OPRT_ERR_INVALID_ARG, "%s: %s of shape %s has strides whose offsets overflow int64",
                op, role, shape_string(*view));
  }
  if (view->data == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: %s data is null", op, role);
  return OPRT_SUCCESS;
}

int64_t numel(const oprt_tensor_view_t& view) {
  // An empty view's other extents may multiply past int64 (check_view only
  // bounds non-empty ones), so a zero extent answers first.
  for (int d = 0; d < view.ndim; ++d) {
    if (view.shape[d] == 0) return 0;
  }
  int64_t count = 1;
  for (int d = 0; d < view.ndim; ++d) count *= view.shape[d];
  return count;
}

oprt_tensor_view_t layout_of_checked(const oprt_tensor_view_t& view) {
  oprt_tensor_view_t result = view;
  if (numel(view) == 0) {
    for (int d = 0; d < view.ndim; ++d) result.strides[d] = 0;
  }
  return result;
}

void span(const oprt_tensor_view_t& view, int64_t* lo, int64_t* hi) {
  if (numel(view) == 0) {
    *lo = 0;
    *hi = -1;
    return;
  }
  *lo = 0;
  *hi = 0;
  for (int d = 0; d < view.ndim; ++d) {
    const int64_t last = (view.shape[d] - 1) * view.strides[d];
    (last < 0 ? *lo : *hi) += last;
  }
}

bool has_internal_overlap(const oprt_tensor_view_t& view) {
  if (numel(view) <= 1) return false;
  int64_t strides[OPRT_MAX_DIMS];
  int64_t extents[OPRT_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < view.ndim; ++d) {
    if (view.shape[d] == 1) continue;
    if (view.strides[d] == 0) return true;  // exact: two indices, one element
    strides[n] = magnitude(view.strides[d]);
    extents[n] = view.shape[d];
    ++n;
  }
  // Sorted by stride, a layout is certainly overlap-free when every stride
  // steps past everything the smaller dims reach. Layouts that interleave
  // without colliding (rare) are reported as overlapping: safe, not exact.
  int order[OPRT_MAX_DIMS];
  for (int i = 0; i < n; ++i) order[i] = i;
  std::sort(order, order + n, [&](int a, int b) { return strides[a] < strides[b]; });
  int64_t reach = 0;
  for (int i = 0; i < n; ++i) {
    const int d = order[i];
    if (strides[d] <= reach) return true;
    reach += (extents[d] - 1) * strides[d];
  }
  return false;
}

Overlap overlap(const oprt_tensor_view_t& out, const oprt_tensor_view_t& in) {
  if (numel(out) == 0 || numel(in) == 0) return Overlap::kNone;
  int64_t out_lo, out_hi, in_lo, in_hi;
  span(out, &out_lo, &out_hi);
  span(in, &in_lo, &in_hi);
  const auto out_base = reinterpret_cast<intptr_t>(out.data);
  const auto in_base = reinterpret_cast<intptr_t>(in.data);
  const auto out_size = static_cast<intptr_t>(oprt_dtype_size(out.dtype));
  const auto in_size = static_cast<intptr_t>(oprt_dtype_size(in.dtype));
  const intptr_t out_first = out_base + out_lo * out_size;
  const intptr_t out_end = out_base + (out_hi + 1) * out_size;
  const intptr_t in_first = in_base + in_lo * in_size;
  const intptr_t in_end = in_base + (in_hi + 1) * in_size;
  if (in_end <= out_first || out_end <= in_first) return Overlap::kNone;
  if (in.data != out.data || in.dtype != out.dtype || in.ndim > out.ndim) return Overlap::kPartial;
  // Exact means: read element i of in exactly where element i of out is
  // written, over out's shape with in right-aligned (a broadcast dim never is).
  const int lead = out.ndim - in.ndim;
  for (int d = 0; d < out.ndim; ++d) {
    if (out.shape[d] == 1) continue;
    if (d < lead) return Overlap::kPartial;
    const int in_d = d - lead;
    if (in.shape[in_d] != out.shape[d] || in.strides[in_d] != out.strides[d]) {
      return Overlap::kPartial;
    }
  }
  return Overlap::kExact;
}

const char* shape_string(const oprt_tensor_view_t& view) {
  // A few buffers in rotation so one message can format several shapes.
  constexpr int kBuffers = 4;
  constexpr size_t kCapacity = 8 + OPRT_MAX_DIMS * 22;
  thread_local char buffers[kBuffers][kCapacity];
  thread_local int next = 0;
  char* text = buffers[next];
  next = (next + 1) % kBuffers;
  if (view.ndim < 0 || view.ndim > OPRT_MAX_DIMS) {
    std::snprintf(text, kCapacity, "<ndim %d>", static_cast<int>(view.ndim));
    return text;
  }
  size_t used = 0;
  text[used++] = '[';
  for (int d = 0; d < view.ndim; ++d) {
    used += static_cast<size_t>(std::snprintf(text + used, kCapacity - used, "%s%" PRId64,
                                              d == 0 ? "" : ", ", view.shape[d]));
  }
  std::snprintf(text + used, kCapacity - used, "]");
  return text;
}

}  // namespace oprt
