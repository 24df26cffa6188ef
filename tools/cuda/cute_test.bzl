"""Analysis tests of --@//tools/cuda:cute without CUTLASS headers (no fetch, no GPU)."""

load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts")

_NO_HEADERS = {
    str(Label("//tools/cuda:cute_headers")): str(Label("//tools/cuda:no_cute_headers")),
}

def _on_fails_impl(ctx):
    env = analysistest.begin(ctx)
    asserts.expect_failure(
        env,
        "--@//tools/cuda:cute=on needs the CUTLASS headers, but //tools/cuda:no_cute_headers " +
        "provides no cute/tensor.hpp",
    )
    return analysistest.end(env)

cute_on_without_headers_test = analysistest.make(
    _on_fails_impl,
    expect_failure = True,
    config_settings = dict(_NO_HEADERS, **{str(Label("//tools/cuda:cute")): "on"}),
)

def _auto_is_plain_impl(ctx):
    env = analysistest.begin(ctx)
    defines = analysistest.target_under_test(env)[CcInfo].compilation_context.defines.to_list()
    asserts.equals(env, [], defines)
    return analysistest.end(env)

cute_auto_without_headers_test = analysistest.make(
    _auto_is_plain_impl,
    config_settings = dict(_NO_HEADERS, **{str(Label("//tools/cuda:cute")): "auto"}),
)
