"""Suite-wide settings: caches (autotuning, model calibration) go to a temporary directory."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_polyfuse_cache(tmp_path_factory: pytest.TempPathFactory):
    mp = pytest.MonkeyPatch()
    mp.setenv("POLYFUSE_CACHE", str(tmp_path_factory.mktemp("polyfuse-cache")))
    yield
    mp.undo()
