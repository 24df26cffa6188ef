"""runtime_shared_library: a C library of the runtime that exports only the oprt_* symbols."""

load("@rules_cc//cc:defs.bzl", "cc_binary")

def runtime_shared_library(name, deps, **kwargs):
    """Declares `name` (lib<something>.so), linking deps, exporting what exports.lds keeps.

    Args:
      name: the library's file name.
      deps: the core, operators and backends to link.
      **kwargs: passed to cc_binary (target_compatible_with, visibility, ...).
    """
    cc_binary(
        name = name,
        additional_linker_inputs = ["//runtime:exports.lds"],
        linkopts = ["-Wl,--version-script=$(location //runtime:exports.lds)"],
        linkshared = True,
        deps = deps,
        **kwargs
    )
