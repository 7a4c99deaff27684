"""A native abort (the device compiler's LLVM) in a kernel build is one line naming the stage,
the kernel and the signal; a device whose probe kernels fail is unusable with the reason."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from polyfuse.core.watchdog import WorkerCrashed, call_with_budget, stage


def _abort_in_build(progress: object = None) -> None:
    with stage("building OpenCL kernel 'poly' on some device"):
        os.abort()


def test_abort_in_a_build_names_stage_kernel_and_signal() -> None:
    with pytest.raises(WorkerCrashed) as info:
        call_with_budget(_abort_in_build)
    line = str(info.value)
    assert "\n" not in line and "'poly'" in line and "SIGABRT" in line
    assert info.value.signal == "SIGABRT" and "building OpenCL kernel" in info.value.stage


def test_a_device_failing_a_probe_kernel_is_unusable() -> None:
    from polyfuse.runtime import device as dv

    devices = dv.list_devices()
    if not devices:
        pytest.skip("no OpenCL device")
    good = dv._probe_kernels()
    wrong = replace(good[0], expected=good[0].expected + 1)
    dev = dv.get_device()
    assert dv.probe(dev, kernels=good[:1]).reason is None
    why = dv.probe(dev, kernels=(wrong,)).reason
    assert why is not None and "probe kernel 'vector4'" in why and "miscompiled" in why


def _device_or_skip() -> None:
    from polyfuse.runtime.device import list_devices

    if not list_devices():
        pytest.skip("no OpenCL device")


def test_roofline_skips_a_kernel_whose_build_aborts(tmp_path, monkeypatch, capfd) -> None:
    """The FLOP kernel's check aborts its worker: the point is skipped with the stage, the
    kernel and the signal, and the command completes."""
    import json

    from polyfuse.apps.cli import main
    from polyfuse.runtime.device import CRASH_HOOK

    _device_or_skip()
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(CRASH_HOOK, "poly")
    assert main(["roofline", "--quick", "--max-mib", "1", "--out", str(tmp_path / "rl")]) == 0
    skipped = json.loads((tmp_path / "rl" / "roofline.json").read_text())["skipped"]
    assert skipped and all("'poly'" in s and "SIGABRT" in s for s in skipped)
    out, err = capfd.readouterr()
    assert "peak  not measured" in out and "skipped flops degree 1: building OpenCL kernel " \
        "'poly'" in out
    assert "RuntimeWarning" not in err and "log-scaled" not in err  # no ceiling at zero


def test_session_construction_survives_an_abort_in_its_build(tmp_path, monkeypatch) -> None:
    """A native crash while a session's kernels are built is one PolyfuseError line; this
    process (a user's notebook) lives on, and a session that builds is checked once."""
    from polyfuse import InferenceSession
    from polyfuse.core.program import PolyfuseError
    from polyfuse.runtime import device as dv

    _device_or_skip()
    qkv = str(Path(__file__).resolve().parent.parent / "examples" / "models" / "bert_qkv.onnx")
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(dv.CRASH_HOOK, "fused_g0")
    with pytest.raises(PolyfuseError) as info:
        InferenceSession(qkv, _form="tiled")
    line = str(info.value)
    assert "\n" not in line and line.startswith("InferenceSession: ")
    assert "'fused_g0'" in line and "SIGABRT" in line
    monkeypatch.delenv(dv.CRASH_HOOK)
    dv._CHECKED.clear()  # checked in this cache, not by an earlier test
    InferenceSession(qkv, _form="tiled")
    dv._CHECKED.clear()  # a new process: the verdict is on disk, no worker is started

    def no_worker(*args: object, **kwargs: object) -> None:
        raise AssertionError("a worker was started for a checked source")

    monkeypatch.setattr(dv, "call_with_budget", no_worker)
    InferenceSession(qkv, _form="tiled")


def test_coarsen_tuner_skips_a_variant_whose_build_aborts(tmp_path, monkeypatch) -> None:
    """The thread-factor-2 variant's check aborts its worker: that variant is skipped with the
    stage, its kernel and the signal; the other is still verified and timed."""
    from polyfuse.codegen.coarsen import Factors
    from polyfuse.frontend.builder import ProgramBuilder
    from polyfuse.passes.coarsening_tuning import tune_coarsening
    from polyfuse.runtime.device import CRASH_HOOK

    _device_or_skip()
    b = ProgramBuilder("__kernel void k(__global const float *x, __global float *y)\n"
                       "{ const int i = get_global_id(0); y[i] = 2.0f * x[i]; }\n")
    b.buffer("x", 4 * 128)
    b.buffer("y", 4 * 128)
    b.launch("k", (128,), (16,), ["x", "y"])
    prog = b.build()
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(CRASH_HOOK, "k__t2_b1_L0")
    rep = tune_coarsening(prog, factors=[Factors.of((2,), (1,)), Factors.of((4,), (1,))],
                          repeat=2, rounds=1, use_cache=False)
    rows = {v.factors.label(1): v for v in rep.launches[0].variants}
    assert rows["t2_b1"].status == "failed" and rows["t2_b1"].reason.startswith("skipped: ")
    assert "'k__t2_b1_L0'" in rows["t2_b1"].reason and "SIGABRT" in rows["t2_b1"].reason
    assert rows["t4_b1"].status == "timed" and rows["t4_b1"].verified is True
    assert "skipped: " in rep.markdown()


def test_autotune_skips_variants_whose_build_aborts(tmp_path, monkeypatch) -> None:
    """Every orchestration variant's fused kernel aborts its check: each is skipped with the
    signal, and tuning says none verified instead of dying."""
    import polyfuse
    from polyfuse.passes import orchestration_tuning as at
    from polyfuse.runtime.device import CRASH_HOOK

    _device_or_skip()
    qkv = Path(__file__).resolve().parent.parent / "examples" / "qkv"
    program = polyfuse.load_opencl(str(qkv / "kernels.cl"), host=str(qkv / "host.c"))
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(CRASH_HOOK, "fused_g0")
    with pytest.raises(at.TuneError) as info:
        at.autotune(program, repeat=1, cache_dir=tmp_path / "tune")
    skipped = [r.error for r in info.value.table if r.error]
    assert skipped and all(e.startswith("skipped: ") and "SIGABRT" in e for e in skipped)


def test_a_worker_does_not_rerun_the_users_script(tmp_path: Path) -> None:
    """A research script with no ``if __name__ == "__main__"`` guard opens a session at top
    level: the worker that isolates its builds must not run the script again (spawn would,
    and the second session's worker then fails to start)."""
    import subprocess
    import sys

    (tmp_path / "jobs.py").write_text("def double(x, progress):\n    return 2 * x\n")
    (tmp_path / "script.py").write_text(
        "import jobs\nfrom polyfuse.core.watchdog import call_with_budget\n"
        "print('top level ran', flush=True)\n"
        "print('answer', call_with_budget(jobs.double, (21,), timeout=120))\n")
    (tmp_path / "guarded.py").write_text(
        "from polyfuse.core.watchdog import call_with_budget\n"
        "def triple(x, progress):\n    return 3 * x\n"
        "if __name__ == '__main__':\n"
        "    print('answer', call_with_budget(triple, (14,), timeout=120))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]))
    for script in ("script.py", "guarded.py"):  # the second job lives in the script itself
        out = subprocess.run([sys.executable, script], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.count("top level ran") == (script == "script.py")
        assert "answer 42" in out.stdout


def test_workers_of_a_module_run_as_a_program_from_several_threads(tmp_path: Path) -> None:
    """``python -m polyfuse.oracle.fuzz --jobs 4`` starts workers from four threads, each
    job a function of the module run as ``__main__``: every worker must get its job (the
    hidden ``__main__`` of one thread's start broke another's pickling)."""
    import subprocess
    import sys

    (tmp_path / "jobsmod.py").write_text(
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from polyfuse.core.watchdog import call_with_budget\n"
        "def square(x, progress):\n    return x * x\n"
        "if __name__ == '__main__':\n"
        "    with ThreadPoolExecutor(4) as pool:\n"
        "        got = list(pool.map(lambda x: call_with_budget(square, (x,), timeout=120),\n"
        "                            range(8)))\n"
        "    print('squares', got)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path), str(Path(__file__).resolve().parent.parent)]))
    out = subprocess.run([sys.executable, "-m", "jobsmod"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "squares [0, 1, 4, 9, 16, 25, 36, 49]" in out.stdout


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_a_worker_dies_with_its_parent(tmp_path: Path) -> None:
    """A command killed from outside (a timeout) must not leave its worker running: an orphan
    in a long isl computation would hold a core for minutes."""
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "jobs.py").write_text(
        "import os, time\n"
        "def linger(path, progress):\n"
        "    open(path, 'w').write(str(os.getpid()))\n"
        "    time.sleep(120)\n")
    pid_file = tmp_path / "worker.pid"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path), str(Path(__file__).resolve().parent.parent)]))
    parent = subprocess.Popen(
        [sys.executable, "-c", "import jobs; from polyfuse.core.watchdog import call_with_budget;"
         f" call_with_budget(jobs.linger, ({str(pid_file)!r},), timeout=300)"], env=env)
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and parent.poll() is None, "no worker started"
            time.sleep(0.2)
        worker = int(pid_file.read_text())
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30
        while Path(f"/proc/{worker}").exists():
            state = Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":  # dead, waiting for init to reap it
                break
            assert time.monotonic() < deadline, "the worker outlived its parent"
            time.sleep(0.2)
    finally:
        parent.kill()
