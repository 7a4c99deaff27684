"""Sessions start from the disk cache: a second process opens a model's session without fusing
it again, from the evaluated program and the device binary the first one kept; ``cache=False``
neither reads nor writes; a binary the driver rejects is built from source instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import polyfuse
from polyfuse.core import cache
from polyfuse.core.program import PolyfuseError
from polyfuse.frontend.builder import ProgramBuilder, local
from polyfuse.frontend.opencl import parse_kernels
from polyfuse.runtime.device import build_program, get_context
from polyfuse.runtime.execute import CompiledProgram, ProgramImage

ROOT = Path(__file__).resolve().parent.parent
MODEL = str(ROOT / "examples" / "models" / "resnext_block.onnx")

#: opens a session in a fresh interpreter and reports what it found, as JSON
_OPEN = """
import json, sys, time
import numpy as np
import polyfuse
t0 = time.perf_counter()
sess = polyfuse.InferenceSession(sys.argv[1])
seconds = time.perf_counter() - t0
feeds = {i.name: np.linspace(-1, 1, int(np.prod(i.shape)), dtype=np.float32).reshape(i.shape)
         for i in sess.get_inputs()}
out = sess.run(None, feeds)[0]
print(json.dumps({"cached": sess.cached, "seconds": seconds, "form": sess.form_choice["form"],
                  "out": out.ravel()[:64].tolist()}))
"""


@pytest.fixture(scope="module")
def cq() -> tuple:
    try:
        return get_context()
    except PolyfuseError as err:  # pragma: no cover - no OpenCL device
        pytest.skip(str(err))


def _open_in_new_process(cache_dir: Path) -> dict:
    env = {**os.environ, "POLYFUSE_CACHE": str(cache_dir)}
    res = subprocess.run([sys.executable, "-c", _OPEN, MODEL], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def test_second_process_opens_the_session_from_the_cache(tmp_path: Path, monkeypatch) -> None:
    first = _open_in_new_process(tmp_path / "cache")
    second = _open_in_new_process(tmp_path / "cache")
    assert not first["cached"] and second["cached"]
    assert second["form"] == first["form"]  # the variant choice is kept, not measured again
    assert second["out"] == first["out"]
    assert second["seconds"] < first["seconds"] / 3
    # cache=False neither uses the entry nor writes one of its own
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    assert polyfuse.InferenceSession(MODEL, _form=first["form"], cache=False).cached is False
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "empty"))
    polyfuse.InferenceSession(MODEL, _form=first["form"], cache=False)
    assert not any(p.name in ("session", "form", "binaries", "work")
                   for p in (tmp_path / "empty").glob("*"))


def test_run_says_when_it_starts_from_the_cache(tmp_path: Path) -> None:
    env = {**os.environ, "POLYFUSE_CACHE": str(tmp_path)}
    model = str(ROOT / "examples" / "models" / "torch_conv_ts.onnx")

    def run(*extra: str) -> subprocess.CompletedProcess:
        res = subprocess.run([sys.executable, "-m", "polyfuse", "run", model, "--random",
                              *extra], env=env, cwd=ROOT, capture_output=True, text=True,
                             timeout=900)
        assert res.returncode == 0, res.stderr
        return res

    first, second, fresh = run(), run(), run("--no-cache")
    assert "from the cache" not in first.stderr and "from the cache" in second.stderr
    assert "from the cache" not in fresh.stderr
    table = [ln for ln in first.stdout.splitlines() if not ln.startswith("time:")]
    assert table == [ln for ln in second.stdout.splitlines() if not ln.startswith("time:")]


SOURCE = """__kernel void scale(__global float *x, const int a, __local float *tmp) {
    size_t i = get_global_id(0);
    tmp[get_local_id(0)] = x[i] * a;
    x[i] = tmp[get_local_id(0)];
}"""


def _program() -> polyfuse.Program:
    b = ProgramBuilder(parse_kernels(SOURCE), name="scale")
    x = b.buffer("x", 64 * 4)
    b.write(x)
    b.launch("scale", (64,), (16,), {"x": x, "a": 3, "tmp": local(16 * 4)})
    b.read(x)
    return b.build()


def test_an_image_runs_like_its_program(cq: tuple, tmp_path: Path, monkeypatch) -> None:
    """What a session keeps (ProgramImage) sets the program up again with no symbolic work."""
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    ctx, queue = cq
    ex = CompiledProgram(_program(), ctx=ctx, queue=queue)
    ex.reset()
    want = ex.execute().buffers["x"]
    cache.store_record("session", "k" * 64, *ex.image.to_record())
    meta, arrays = cache.load_record("session", "k" * 64)
    again = CompiledProgram.from_image(ProgramImage.from_record(meta, arrays), ctx=ctx,
                                       queue=queue)
    again.reset()
    got = again.execute().buffers["x"]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, ex.initial["x"].view(np.float32) * 3.0)
    assert again.launch_count == ex.launch_count == 1


def test_a_rejected_binary_is_built_from_source(cq: tuple, tmp_path: Path, monkeypatch) -> None:
    from polyfuse.runtime import device

    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    monkeypatch.setattr(device, "driver_keeps_binaries", lambda dev: True)  # a driver that does
    ctx, _queue = cq
    src = SOURCE.replace("scale", "scale_binary_test")
    key = device._binary_key(ctx, src, ())
    cache.store_blob("binaries", key, b"not a binary")
    prog = build_program(ctx, src, binary_cache=True)
    assert prog.kernel_names == "scale_binary_test"
    assert cache.load_blob("binaries", key) != b"not a binary"  # the driver's own, kept


def test_pocl_is_never_asked_for_its_binaries(cq: tuple, tmp_path: Path, monkeypatch) -> None:
    """PoCL keeps its own kernel cache, and its ``basic`` device leaks a reference on every
    kernel whose binary is asked for: after about 128 of them in a process, every launch
    loaded its kernel's shared object again (a 13-launch model 20x slower).  A session's
    build asks no PoCL device for binaries, and none lands in the disk cache."""
    from polyfuse.runtime import device

    ctx, _queue = cq
    if device.driver_keeps_binaries(ctx.devices[0]):
        pytest.skip("the device's driver is not PoCL")
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    asked = []
    monkeypatch.setattr(device, "_store_binaries", lambda *a: asked.append(a))
    src = SOURCE.replace("scale", "scale_pocl_binary")
    assert build_program(ctx, src, binary_cache=True).kernel_names == "scale_pocl_binary"
    assert not asked and cache.load_blob("binaries", device._binary_key(ctx, src, ())) is None
