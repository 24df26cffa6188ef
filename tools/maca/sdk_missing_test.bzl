"""sdk_missing_test: //tools/maca:mxcc, analysed for the metax platform, fails naming MACA_PATH."""

load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts")

def _sdk_missing_test_impl(ctx):
    env = analysistest.begin(ctx)
    asserts.expect_failure(env, "MACA SDK not found: MACA_PATH ")
    asserts.expect_failure(env, "; set MACA_PATH to the MetaX SDK root (the directory holding " +
                                "mxgpu_llvm/bin/mxcc) to build --config=metax")
    return analysistest.end(env)

sdk_missing_test = analysistest.make(
    _sdk_missing_test_impl,
    expect_failure = True,
    config_settings = {"//command_line_option:platforms": str(Label("//tools/platforms:linux_metax"))},
)
