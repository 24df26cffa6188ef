#!/usr/bin/env bash
# Runs oprt's tests on a GPU host that has no Bazel.
# Needs: Python >= 3.10 with torch, pytest and pip, a CUDA driver; to build a binding
# (see below) also torch's C++ headers, pybind11 and a C++17 compiler.
# usage: run_tests.sh [--ops="copy softmax"] [--backends="cpu nvidia metax tilelang"] [-- extra pytest args]
# Runs each operator's case table per backend and the cross-operator tests, printing
# pytest's summary for each and a total. Backend metax runs from
# liboperator_runtime_metax_compat.so (the metax sources compiled by nvcc, on this
# NVIDIA GPU); every other backend from liboperator_runtime.so, whose package is the
# bundled wheel for this host's Python when wheels/ has one (bundle_cp312_torch2_11:
# pip-installed under build/wheel, the package a user installs), else a binding built
# here against the library. The metax-compat binding is always built here. Each
# library's package is set up once and the cross-operator tests run once per library;
# the line "package for <library>: ..." says which. Backend tilelang needs TileLang
# importable (and CUDA_HOME set to the toolkit it compiles with); it runs once per
# style in $OPRT_TILELANG_STYLES (default "eager lazy"). Every Python process it starts
# has native_backtrace.c preloaded (built here with $CC, else cc): a crash prints the
# native stack beside faulthandler's Python one.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ops=$(sed -n 's/^    "\(.*\)",$/\1/p' "$here/ops/registry.bzl" 2>/dev/null)
backends="cpu nvidia"
while [ $# -gt 0 ]; do
  case "$1" in
    --ops=*) ops=${1#--ops=} ;;
    --backends=*) backends=${1#--backends=} ;;
    --) shift; break ;;
    *) echo "run_tests.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
python=${PYTHON:-python3}
cd "$here" || exit 1

if [ ! -f build/native_backtrace.so ]; then
  mkdir -p build && ${CC:-cc} -O1 -shared -fPIC -o build/native_backtrace.so native_backtrace.c ||
    echo "run_tests.sh: native_backtrace.c did not build; crashes will show Python frames only" >&2
fi
[ -f build/native_backtrace.so ] && export LD_PRELOAD="$here/build/native_backtrace.so${LD_PRELOAD:+:$LD_PRELOAD}"

read -r ext python_tag torch_release < <("$python" -c \
  'import re, sys, sysconfig, torch; print(sysconfig.get_config_var("EXT_SUFFIX"), "cp%d%d" % sys.version_info[:2], re.match(r"\d+\.\d+", torch.__version__).group())') || exit 1
wheel=$(ls wheels/oprt-*-"$python_tag"-"$python_tag"-*.whl 2>/dev/null | head -1)

library_of() {
  if [ "$1" = metax ]; then echo liboperator_runtime_metax_compat.so; else echo liboperator_runtime.so; fi
}

# Sets package_root to the folder whose operator_runtime runs on lib/$1: the bundled
# wheel, installed once, or python/ with _C built against lib/$1 (once) and linked in.
use_library() {
  if [ "$1" = liboperator_runtime.so ] && [ -n "$wheel" ]; then
    if [ ! -d build/wheel ]; then
      "$python" -m pip install -q --no-deps --no-index --no-compile --disable-pip-version-check \
        --target build/wheel "$wheel" || return 1
    fi
    echo "run_tests.sh: package for $1: the wheel $wheel, installed in build/wheel"
    package_root="$here/build/wheel"
    return
  fi
  local built="build/${1%.so}/_C$ext"
  if [ ! -f "$built" ]; then
    echo "run_tests.sh: building operator_runtime._C$ext against lib/$1"
    read -r pybind_include python_include torch_dir cxx11_abi < <("$python" -c \
      'import os, pybind11, sysconfig, torch; print(pybind11.get_include(), sysconfig.get_paths()["include"], os.path.dirname(torch.__file__), int(torch._C._GLIBCXX_USE_CXX11_ABI))') || return 1
    mkdir -p "$(dirname "$built")"
    # pybind11's own headers come before torch's bundled copy; the torch kernels
    # build against this host's torch (its headers, libc10 and libtorch_cpu), with
    # OpenMP, whose runtime torch has loaded, to run the cpu backend on its threads.
    ${CXX:-c++} -O2 -std=c++17 -shared -fPIC -fvisibility=hidden -fopenmp -D_GLIBCXX_USE_CXX11_ABI="$cxx11_abi" \
      -I include -I . -isystem "$pybind_include" -isystem "$python_include" -isystem "$torch_dir/include" \
      runtime/python/module.cc runtime/python/cached_call.cc runtime/python/descriptor_cache.cc \
      runtime/python/torch_kernels.cc -L lib -l:"$1" -L "$torch_dir/lib" -lc10 -ltorch_cpu \
      -Wl,-rpath,"$here/lib" -Wl,-rpath,"$torch_dir/lib" -o "$built" || return 1
  fi
  ln -sfn "$here/$built" "python/operator_runtime/_C$ext"
  # What the package's import-time check compares torch with (as Bazel's venv writes it).
  printf 'PYTHON_TAG = "%s"\nTORCH_RELEASE = "%s"\n' "$python_tag" "$torch_release" \
    > python/operator_runtime/_build_info.py
  echo "run_tests.sh: package for $1: python/ with $built"
  package_root="$here/python"
}

outer_pythonpath=${PYTHONPATH:-}
failed=0
summary=()
run_table() {  # op backend label
  echo "=== $1 on $3"
  "$python" python/operator_runtime_testing/op_test_main.py --op="$1" --backend="$2" "${pytest_args[@]}"
  local rc=$?
  summary+=("$1/$3: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")")
  [ $rc -eq 0 ] || failed=1
}
pytest_args=("$@")
libraries=$(for backend in $backends; do library_of "$backend"; done | awk '!seen[$0]++')
for library in $libraries; do
  use_library "$library" || exit 1
  export PYTHONPATH="$package_root:$here/python:$here${outer_pythonpath:+:$outer_pythonpath}"
  for op in $ops; do
    for backend in $backends; do
      [ "$(library_of "$backend")" = "$library" ] || continue
      if [ "$backend" = tilelang ]; then
        for style in ${OPRT_TILELANG_STYLES:-eager lazy}; do
          OPRT_TILELANG_STYLE=$style run_table "$op" tilelang "tilelang-$style"
        done
      else
        run_table "$op" "$backend" "$backend ($library)"
      fi
    done
  done
  echo "=== cross-operator tests ($library)"
  "$python" -m pytest -q tests "$@"
  rc=$?
  summary+=("tests/ ($library): $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")")
  [ $rc -eq 0 ] || failed=1
done

printf '\n=== summary\n'; printf '%s\n' "${summary[@]}"
exit $failed
