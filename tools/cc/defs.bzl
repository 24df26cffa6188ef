"""Compiler flags oprt's C++ targets declare themselves.

CXX_STANDARD_COPTS: oprt is C++17 (inline static constexpr members, if constexpr, fold
expressions). A toolchain's default dialect varies (a consumer's used -std=c++14, which
left _C.so with an undefined ReductionEntry::kParamDefaults), so the targets that compile
C++ name it rather than inherit it; a target's copts follow the toolchain's flags, so
they win.
"""

CXX_STANDARD_COPTS = ["-std=c++17"]

# CPU_KERNEL_COPTS: the cpu backend's loops (ops/<op>/cpu) are written to vectorise:
# -O3 turns GCC's vectoriser fully on (at -O2 its cheapest model left every loop
# scalar), and -fno-trapping-math lets it compute both sides of a select on floats (the
# f16 conversions' selects stayed branches, which blocks vectorisation). No floating-
# point trap is ever enabled, and neither flag changes a result. -ffp-contract=off: no
# a * b + c becomes one fused multiply-add (one rounding instead of two), so the
# x86-64-v3 copies of OPRT_CPU_CLONES loops (runtime/core/convert_cpu.h) round every
# operation as the portable copies do.
CPU_KERNEL_COPTS = ["-O3", "-fno-trapping-math", "-ffp-contract=off"]
