"""The default device is chosen by a speed probe that represents real work among the working ones,
cached per device, and explained by ``polyfuse devices``; ``PYOPENCL_CTX`` still wins."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _devices(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "PYOPENCL_CTX"}
    full.update({"POLYFUSE_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT), **env})
    return subprocess.run([sys.executable, "-m", "polyfuse", "devices"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=full)


def test_default_device_is_measured_cached_and_explained(tmp_path):
    r = _devices(tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    line = next(ln for ln in lines if ln.startswith("default:"))
    usable = [ln.split()[0] for ln in lines if ln[:1].isdigit() and "  yes" in ln]
    assert line.split()[1] in usable  # names one of the usable ids
    # both figures of every usable device, and the rule that combines them
    speed = {ln.split()[0]: ln for ln in lines if " speed: " in ln}
    assert sorted(speed) == sorted(usable)
    for text in speed.values():
        assert re.search(r"product 128x768x768 [\d.]+ ms, 16 launches [\d.]+ ms, "
                         r"estimated layer [\d.]+ ms$", text), text
    assert "12 x a 128x768x768 blocked MatMul + a chain of 16" in next(
        ln for ln in lines if ln.startswith("rule:"))
    cache = json.loads((tmp_path / "device_speed.json").read_text())
    assert len(cache) == len(usable)
    assert all(set(v) == {"product", "chain"} for v in cache.values())
    if len(usable) > 1:
        assert "lowest estimated layer time" in line
        # the second run reuses the measurement: same choice, same figures
        again = _devices(tmp_path).stdout.splitlines()
        assert next(ln for ln in again if ln.startswith("default:")) == line
        assert [ln for ln in again if " speed: " in ln] == list(speed.values())
    else:
        assert "only device" in line


def test_pyopencl_ctx_wins(tmp_path):
    r = _devices(tmp_path, PYOPENCL_CTX="0:0")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("default:"))
    assert line.startswith("default: 0:0 ") and "(from PYOPENCL_CTX" in line


def test_rule_minimizes_the_estimated_layer_time():
    """The score is 12 products and one launch chain (a BERT-base layer): a GPU wins on its
    products despite slow launches, unless measured slower; between CPU devices the faster
    product wins over the faster launches; a device whose probe failed only as a last resort."""
    from polyfuse.runtime.device import DEFAULT_RULE, DeviceSpeed, choose_default

    def measure(speeds):
        return lambda devs: [speeds[d] for d in devs]

    speeds = {"pocl": DeviceSpeed(product=1.5e-3, chain=20e-6),
              "gpu": DeviceSpeed(product=0.05e-3, chain=0.5e-3),
              "basic": DeviceSpeed(product=2.0e-3, chain=10e-6),
              "broken": None}
    assert speeds["pocl"].score == 12 * 1.5e-3 + 20e-6
    assert choose_default(["pocl", "gpu"], measure(speeds)) == (
        1, [speeds["pocl"], speeds["gpu"]])
    speeds["gpu"] = DeviceSpeed(product=1.6e-3, chain=0.5e-3)  # measured slower: the CPU
    assert choose_default(["pocl", "gpu"], measure(speeds))[0] == 0
    assert choose_default(["basic", "pocl"], measure(speeds))[0] == 1  # launches lose
    assert choose_default(["broken", "basic"], measure(speeds))[0] == 1
    assert choose_default(["broken"], measure(speeds))[0] == 0
    assert "a GPU unless measurement says" in DEFAULT_RULE and "PYOPENCL_CTX" in DEFAULT_RULE


def test_speed_figures_are_cached_under_the_stable_key(tmp_path, monkeypatch):
    """Measured once per device under ``stable_device_key`` (not the key with PoCL's free
    memory in it): a cached entry is used without measuring, a missing one is measured and
    stored, a failed one is neither stored nor fatal."""
    from polyfuse.runtime import device as dv

    class Fake:
        def __init__(self, name):
            self.name = name

    monkeypatch.setattr(dv, "stable_device_key", lambda d: f"PoCL|{d.name}|3.1")
    monkeypatch.setattr(dv, "_SPEEDS", {})
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    (tmp_path / "device_speed.json").write_text(json.dumps(
        {f"PoCL|a|3.1|speed {dv._SPEED_VERSION}": {"product": 2e-3, "chain": 1e-5}}))
    asked = []

    def measure(devs, timeout):
        asked.append([d.name for d in devs])
        return [None if d.name == "c" else dv.DeviceSpeed(1e-3, 2e-5) for d in devs]

    monkeypatch.setattr(dv, "_measure_speeds", measure)
    a, b, c = Fake("a"), Fake("b"), Fake("c")
    assert dv.device_speeds([a, b, c]) == [dv.DeviceSpeed(2e-3, 1e-5),
                                           dv.DeviceSpeed(1e-3, 2e-5), None]
    assert asked == [["b", "c"]]  # together, the cached one not again
    table = json.loads((tmp_path / "device_speed.json").read_text())
    assert sorted(table) == [f"PoCL|{n}|3.1|speed {dv._SPEED_VERSION}" for n in "ab"]
    monkeypatch.setattr(dv, "_SPEEDS", {})
    assert dv.device_speeds([b])[0] == dv.DeviceSpeed(1e-3, 2e-5)  # from disk
    assert asked == [["b", "c"]]


def test_a_model_runs_where_its_own_mix_is_fastest(monkeypatch):
    """``device_for_work`` weighs the measured devices by the work's own FLOPs and launches:
    a few small launches go to the device that launches fastest, a real-size product to the
    one whose products are fastest; with fewer than two measured devices the default stands."""
    from polyfuse.runtime import device as dv

    m, k, n = dv.PRODUCT_SHAPE
    probe_flops = 2 * m * k * n

    class Device:
        def __init__(self, name, type=2):  # noqa: A002 - cl.Device's attribute
            self.name, self.type = name, type

    pthread, basic, gpu = Device("pthread"), Device("basic"), Device("gpu", 4)
    monkeypatch.setattr(dv, "get_device", lambda spec=None: pthread)
    monkeypatch.setattr(dv, "_CANDIDATES", [
        (pthread, dv.DeviceSpeed(product=0.63e-3, chain=0.09e-3)),
        (basic, dv.DeviceSpeed(product=1.17e-3, chain=0.02e-3))])
    small, why = dv.device_for_work(1e6, 9)
    assert small is basic and "9 launches" in why and "basic 0.0" in why
    assert dv.device_for_work(12 * probe_flops, 29)[0] is pthread
    # the estimate is linear in both: a product's FLOPs at the probe's rate, launches at the
    # chain's
    speed = dv.DeviceSpeed(product=1e-3, chain=16e-6)
    assert speed.estimate(3 * probe_flops, 32) == 3e-3 + 32e-6
    monkeypatch.setattr(dv, "_CANDIDATES", dv._CANDIDATES[:1])
    assert dv.device_for_work(1e6, 9) is None
    # a GPU default is kept: only devices of the default's type compete
    monkeypatch.setattr(dv, "get_device", lambda spec=None: gpu)
    monkeypatch.setattr(dv, "_CANDIDATES", [
        (gpu, dv.DeviceSpeed(product=0.05e-3, chain=0.5e-3)),
        (basic, dv.DeviceSpeed(product=1.17e-3, chain=0.02e-3))])
    assert dv.device_for_work(1e6, 9) is None


def test_model_work_counts_products_from_shape_inference(tmp_path):
    """FLOPs of MatMul (batched), Gemm (transA) and Conv (grouped), two per multiply-add, and
    the nodes that launch (not Reshape or Constant)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    from polyfuse.frontend.onnx import model_work

    def init(name, shape):
        return numpy_helper.from_array(np.zeros(shape, np.float32), name)

    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),            # 2x8x16 @ 16x32
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Reshape", ["r", "s"], ["r2"]),            # 16 x 32
             helper.make_node("Gemm", ["r2", "w2"], ["g"], transA=1),    # (32x16)^T @ 32x8
             helper.make_node("Reshape", ["g", "s4"], ["img"]),          # 1x2x8x8
             helper.make_node("Conv", ["img", "wc"], ["c"], group=2, pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes, "work", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 16])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 6, 8, 8])],
        [init("w1", (16, 32)), init("w2", (32, 8)),
         numpy_helper.from_array(np.array([32, 16], np.int64), "s"),
         numpy_helper.from_array(np.array([1, 2, 8, 8], np.int64), "s4"),
         init("wc", (6, 1, 3, 3))])
    path = tmp_path / "work.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    flops, launches = model_work(path)
    matmul = 2 * (2 * 8 * 32) * 16
    gemm = 2 * (16 * 8) * 32  # transA: K is A's 32 rows
    conv = 2 * (1 * 6 * 8 * 8) * (1 * 3 * 3)  # 2 groups: one input channel per output
    assert flops == matmul + gemm + conv and launches == 4


def test_a_session_without_a_device_runs_its_model_where_it_is_estimated_fastest(monkeypatch):
    """``InferenceSession`` without ``device`` (and no ``PYOPENCL_CTX``) weighs the devices by
    the model's own work and says so; a device named anywhere is taken as named."""
    import polyfuse
    from polyfuse.frontend.onnx import model_work
    from polyfuse.runtime import device as dv

    model = str(ROOT / "examples" / "models" / "bert_qkv.onnx")
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    chosen = dv.device_for_work(*model_work(model))
    sess = polyfuse.InferenceSession(model)
    if chosen is None:  # one working device: the default
        assert sess.device_choice == "" and sess.device == dv.get_device(None)
    else:
        assert sess.device == chosen[0]
        assert sess.device_choice.startswith("lowest estimated time of this model")
    monkeypatch.setenv("PYOPENCL_CTX", dv.device_spec(dv.get_device(None)))
    assert polyfuse.InferenceSession(model).device_choice == ""


def test_model_work_reads_a_dimension_inference_left_unknown_off_the_other_operand():
    """The TorchScript export of the causal attention block leaves a batch dimension of its
    second product unknown to ONNX's shape inference, and the U-Net block an input channel
    count: both count the FLOPs their dynamo exports (shapes all known) count."""
    from polyfuse.frontend.onnx import model_work

    models = ROOT / "examples" / "models"
    for name in ("torch_causal_attention", "torch_unet_up"):
        ts, dynamo = (model_work(models / f"{name}_{kind}.onnx") for kind in ("ts", "dynamo"))
        assert ts is not None and dynamo is not None and ts[0] == dynamo[0] > 0


def _pocl_affinity(taskset: bool = False, **env: str) -> str:
    """``POCL_AFFINITY`` as a fresh process sees it after importing the runtime."""
    full = {k: v for k, v in os.environ.items() if k != "POCL_AFFINITY"}
    full.update({"PYTHONPATH": str(ROOT), **env})
    code = "import os, polyfuse.runtime.device; print(os.environ.get('POCL_AFFINITY', '-'))"
    cmd = [sys.executable, "-c", code]
    if taskset:  # confined to its first CPU only
        cmd = [sys.executable, "-c", "import os, subprocess, sys; os.sched_setaffinity(0, {0});"
               f" sys.exit(subprocess.call({cmd!r}))"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=full, check=True).stdout.strip()


def test_pocl_pthread_workers_are_pinned_unless_the_user_says_otherwise():
    """Unpinned, PoCL's ``pthread`` workers can share one CPU for a whole process (a ResNet
    stem 1.28 ms against 0.72 pinned); a user's setting and a confined process are left as
    they are."""
    everywhere = os.sched_getaffinity(0) == set(range(os.cpu_count() or 0))
    assert _pocl_affinity() == ("1" if everywhere else "-")
    assert _pocl_affinity(POCL_AFFINITY="0") == "0"
    if (os.cpu_count() or 0) > 1 and everywhere:
        assert _pocl_affinity(taskset=True) == "-"
