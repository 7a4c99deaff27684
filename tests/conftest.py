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
