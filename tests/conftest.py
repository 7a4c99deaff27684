"""Suite-wide settings: caches (autotuning, model calibration) go to a temporary directory, and
the tests known to take long are marked ``slow`` (``make test-fast`` skips them)."""

import pytest

#: Tests that take more than a few seconds on a 2-core machine (node-id prefixes).  A test can
#: also say it itself with ``@pytest.mark.slow``.
SLOW = (
    "tests/test_notebooks.py::test_notebook_executes",
    "tests/test_onnx_torch.py::",
    "tests/test_fusion_property.py::",
    "tests/test_uar_vs_bruteforce.py::",
    "tests/test_counts.py::test_examples_match_bruteforce",
    "tests/test_counts.py::test_oplib_kernels_match_bruteforce",
    "tests/test_counts.py::test_generated_nests_all_granularities",
    "tests/test_schedules.py::",
    "tests/test_onnx_cli.py::",
    "tests/test_readme.py::",
    "tests/test_cli.py::test_demo_fuses_bert_qkv_into_one_launch",
    "tests/test_cli.py::test_fuse_tune_reports_variants",
    "tests/test_cli.py::test_roofline_places_program_kernels",
    "tests/test_cli.py::test_fuse_writes_plan_source_report",
    "tests/test_onnx.py::test_model_matches_onnxruntime_fused_and_unfused",
    "tests/test_onnx_ops.py::test_operator_matches_onnxruntime",
    "tests/test_onnx_ops.py::test_mobilenet_block_fuses_and_verifies",
    "tests/test_onnx_ops.py::test_unet_style_block_fuses_and_verifies",
    "tests/test_onnx_ops.py::test_attention_block_with_einsum_fuses_and_verifies",
    "tests/test_onnx_ops.py::test_own_model_guide_commands_run",
    "tests/test_oracle.py::test_example_widths_by_execution",
    "tests/test_autotune.py::",
    "tests/test_uar.py::test_random_chains_against_bruteforce",
    "tests/test_codegen.py::test_code_motion_qkv_tiled_shares_barriers",
    "tests/test_codegen.py::test_planned_examples_verify",
    "tests/test_execute.py::test_examples_match_interpreter",
    "tests/test_autopar.py::test_generated_program_matches_gcc",
    "tests/test_session_cache.py::test_second_process_opens_the_session_from_the_cache",
    "tests/test_session_cache.py::test_run_says_when_it_starts_from_the_cache",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _isolated_polyfuse_cache(tmp_path_factory: pytest.TempPathFactory):
    mp = pytest.MonkeyPatch()
    mp.setenv("POLYFUSE_CACHE", str(tmp_path_factory.mktemp("polyfuse-cache")))
    yield
    mp.undo()
