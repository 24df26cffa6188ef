"""Compiler flags every oprt C++ target declares itself.

CXX_STANDARD_COPTS: oprt is C++17 (inline static constexpr members, if constexpr, fold
expressions). A toolchain's default dialect varies (a consumer's used -std=c++14, which
left _C.so with an undefined ReductionEntry::kParamDefaults), so the targets that compile
C++ name it rather than inherit it; a target's copts follow the toolchain's flags, so
they win.
"""

CXX_STANDARD_COPTS = ["-std=c++17"]
