"""``polyfuse fuse`` writes the same plan.json, report.md, fused.cl and fused_host.c as recorded
in tests/golden/digests.json for every bundled example and model (see tests/golden/regenerate.py:
a change of the pipeline's structure must not change what it writes)."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("golden", ROOT / "tests" / "golden" /
                                               "regenerate.py")
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)


@pytest.mark.slow
def test_outputs_match_golden_digests(tmp_path):
    recorded = json.loads(golden.DIGESTS.read_text())
    if recorded["device"] != golden.device_name():
        pytest.skip(f"digests made on {recorded['device']}; planning reads the device's limits")
    digests = golden.produce(tmp_path)
    assert set(digests) == set(recorded["files"]), "the set of written files changed"
    changed = [k for k in digests if digests[k] != recorded["files"][k]]
    assert not changed, (f"outputs changed: {changed}; outputs in {tmp_path} (diff against "
                         "`python tests/golden/regenerate.py --out DIR` on main)")
    assert any(k.endswith("fused_host.c") for k in digests)
