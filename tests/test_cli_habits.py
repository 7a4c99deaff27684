"""What a new user expects of the command line: global options anywhere, ``--version``, a way to
make inputs, devices that say when they cannot be used, quiet batches, readable reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from polyfuse.apps import cli
from polyfuse.report.tables import short_condition

ROOT = Path(__file__).resolve().parent.parent
QKV = ROOT / "examples" / "models" / "bert_qkv.onnx"
STENCIL = ROOT / "examples" / "stencil3" / "kernels.cl"


def run_cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polyfuse", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("where", ["before", "after"])
def test_global_options_before_or_after_the_subcommand(where: str):
    opts = ["--device", "7:3", "-q", "--debug"]
    argv = opts + ["analyze", "k.cl"] if where == "before" else ["analyze", "k.cl"] + opts
    args = cli.build_parser().parse_args(argv)
    assert (args.device, args.quiet, args.debug) == ("7:3", True, True)
    plain = cli.build_parser().parse_args(["analyze", "k.cl"])
    assert (plain.device, plain.quiet, plain.debug) == (None, False, False)


@pytest.mark.slow
def test_device_after_the_subcommand_selects_the_device():
    r = run_cli("run", QKV, "--random", "--save", "/dev/null", "--device", "9:9")
    assert r.returncode == 1 and "9:9" in r.stderr and "Traceback" not in r.stderr


def test_version(capsys: pytest.CaptureFixture):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    from polyfuse import __version__

    assert capsys.readouterr().out.startswith(f"polyfuse {__version__}")


@pytest.mark.slow
def test_inputs_lists_and_writes_random_inputs_that_run_accepts(tmp_path: Path):
    r = run_cli("inputs", QKV, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"name": "X", "shape": [1, 32, 64], "dtype": "float32"}]
    npz = tmp_path / "sub" / "in.npz"
    r = run_cli("inputs", QKV, "--random", "--save", npz, "--seed", "3")
    assert r.returncode == 0 and "X" in r.stdout and "polyfuse run" in r.stderr
    with np.load(npz) as data:
        x = data["X"]
    assert x.shape == (1, 32, 64) and x.dtype == np.float32 and np.abs(x).max() <= 1
    out1, out2 = tmp_path / "o1.npz", tmp_path / "o2.npz"
    assert run_cli("run", QKV, "--inputs", npz, "--save", out1, "-q").returncode == 0
    r = run_cli("-q", "run", QKV, "--random", "--seed", "3", "--save", out2)
    assert r.returncode == 0 and r.stderr == ""
    with np.load(out1) as a, np.load(out2) as b:
        assert set(a.files) == {"Q", "K", "V"}
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name])
    assert run_cli("inputs", QKV, "--save", npz).returncode == 2  # --save needs --random


def test_devices_marks_an_unusable_device(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture):
    from polyfuse.runtime import device

    monkeypatch.setattr(device, "probe_device",
                        lambda dev: "unknown target CPU 'generic'")
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "no: unknown target CPU 'generic'" in out and "default: none usable" in out
    assert cli.main(["devices", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(not r["usable"] and not r["default"] for r in rows)
    assert rows[0]["reason"] == "unknown target CPU 'generic'"


def test_devices_lists_the_usable_default(capsys: pytest.CaptureFixture):
    assert cli.main(["devices", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sum(r["default"] for r in rows) == 1
    assert all(r["usable"] for r in rows if r["default"])


@pytest.mark.slow
def test_fuse_verify_without_host_sizes_buffers_from_params(tmp_path: Path):
    r = run_cli("fuse", STENCIL, "--out", tmp_path / "a", "--verify")
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()[-1]
    assert "--param produce_gs0=" in err and "--param n=" in err and "Traceback" not in r.stderr
    r = run_cli("fuse", STENCIL, "--out", tmp_path / "b", "--verify", "-q", "--param", "n=200",
                "--param", "produce_gs0=256", "--param", "stencil3_gs0=256")
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "b" / "plan.json").read_text())
    assert plan["verified"]["ok"] is True


def test_size_buffers_is_exactly_what_the_kernels_touch():
    import polyfuse
    from polyfuse.passes.pipeline import size_buffers

    program = polyfuse.load_opencl(str(STENCIL))
    sized = size_buffers(program, {"n": 100, "produce_gs0": 64, "stencil3_gs0": 128})
    # produce writes b[i] for i < min(n, 64); stencil3 reads b[i-1..i+1] for i < min(n, 128)
    assert int(sized.buffers["x"].size) == 64 * 4
    assert int(sized.buffers["b"].size) == 100 * 4
    assert int(sized.buffers["y"].size) == 100 * 4


@pytest.mark.slow
def test_quiet_batch_prints_no_progress(tmp_path: Path):
    r = run_cli("fuse", QKV, "--out", tmp_path, "--no-timing", "-q")
    assert r.returncode == 0 and r.stderr == "" and "bert_qkv" in r.stdout


@pytest.mark.slow
def test_demo_report_has_summary_legend_and_no_repeated_fragment_lines(tmp_path: Path):
    r = run_cli("demo", "--out", tmp_path, "-q")
    assert r.returncode == 0, r.stderr
    report = (tmp_path / "report.md").read_text()
    assert report.index("## Summary") < report.index("## Legend") < report.index("## Groups")
    assert "12 ONNX ops became 9 kernel launch(es), 3 alias(es)" in report
    assert "fragment 1: launch #1" not in report
    assert "anchored on the producer" in report.split("## Legend")[1].split("## Groups")[0]
    header, row = r.stdout.splitlines()[0], r.stdout.splitlines()[2]
    assert "ONNX ops" in header and row.split()[1] == "12"


def test_analyze_lists_every_operation_and_short_conditions(capsys: pytest.CaptureFixture):
    ex = ROOT / "examples" / "runtime_offset"
    assert cli.main(["analyze", str(ex / "kernels.cl"), "--host", str(ex / "host.c"), "-q"]) == 0
    out = capsys.readouterr().out
    table = out.split("\n\n")[1].splitlines()[2:]
    ids = [int(line.split()[0]) for line in table]
    assert ids == list(range(len(ids)))  # host operations too: no gaps in the ids
    edge_ids = {int(x) for pair in
                (line.split()[0].split("->") for line in out.split("\n\n")[2].splitlines()[2:])
                for x in pair}
    assert edge_ids <= set(ids)
    cond = [line for line in out.splitlines() if "thread when" in line][0]
    assert "{" not in cond and "floor" not in cond
    assert "thread when (m < 0 and n <= -m) or (m > 0 and n <= m) or m = 0" in cond
    assert short_condition("[n] -> { : n >= 1 and n >= 0 }") == "n > 0"


def test_run_prints_outputs_and_time_and_saves_only_when_asked(tmp_path: Path):
    r = run_cli("run", QKV, "--random", "-q")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["output", "shape", "dtype", "min", "mean", "max"]
    rows = {ln.split()[0]: ln.split() for ln in lines[2:5]}
    assert set(rows) == {"Q", "K", "V"} and rows["Q"][1:3] == ["1x4x32x16", "float32"]
    lo, mean, hi = map(float, rows["Q"][3:6])
    assert -1.5 < lo <= mean <= hi < 2
    assert lines[5].startswith("time: ") and " ms for one run (1 kernel launch" in lines[5]
    assert not list(tmp_path.iterdir())
    r = run_cli("run", QKV, "--random", "--save", tmp_path / "out.npz")
    assert r.returncode == 0 and (tmp_path / "out.npz").is_file() and "wrote Q, K, V" in r.stderr


def test_progress_is_one_line_per_stage_when_stderr_is_no_terminal(
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    from polyfuse.apps import batch

    with batch._bar(2, quiet=False) as bar:
        for stage in ("bert_qkv: building the UAR", "bert_qkv: building the UAR",
                      "bert_qkv: done"):
            bar.set_postfix_str(stage)
        bar.update(1)
        bar.set_postfix_str("mlp: planning fusion")
    err = capsys.readouterr().err
    assert "\r" not in err
    assert err.splitlines() == ["polyfuse: [0/2] bert_qkv: building the UAR",
                                "polyfuse: [0/2] bert_qkv: done",
                                "polyfuse: [1/2] mlp: planning fusion"]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with batch._bar(1, quiet=True) as bar:  # a terminal gets tqdm's bar
        assert type(bar).__name__ == "tqdm"


def test_bad_device_is_rejected_before_any_work(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture):
    def must_not_run(args: object) -> int:
        raise AssertionError("the command ran with a bad --device")

    monkeypatch.setattr(cli, "cmd_fuse", must_not_run)
    monkeypatch.setenv("PYOPENCL_CTX", "")  # main() sets it from --device: undone after
    assert cli.main(["fuse", str(QKV), "--out", "/nonexistent/out", "--device", "9:9"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "invalid OpenCL device '9:9'" in err[0]
    from polyfuse.runtime.device import list_devices

    first_id, _, first = list_devices()[0]
    assert f"devices: {first_id} {first.name.strip()} (OpenCL " in err[0]


def test_devices_tell_two_installs_of_one_driver_apart(capsys: pytest.CaptureFixture):
    assert cli.main(["devices", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    for r in rows:
        assert r["platform_version"].startswith("OpenCL ") and "  " not in r["platform_version"]
        assert Path(r["icd_library"]).is_file()
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["id", "platform", "version", "library"]
    default = next(r for r in rows if r["default"])
    assert (f"default: {default['id']} {default['device']}, {default['platform_version']} ("
            in out)


def test_one_wording_of_the_default_device_rule():
    """The rule `polyfuse devices` prints is the one the docs state, word for word; --help
    points to it instead of paraphrasing it."""
    import re

    from polyfuse.runtime.device import DEFAULT_RULE

    for doc in ("README.md", "docs/interfaces.md", "docs/gpu.md"):
        text = re.sub(r"\s+", " ", (ROOT / doc).read_text())
        assert DEFAULT_RULE in text, doc
        assert "`polyfuse devices` prints on its `rule:` line" in text, doc
    help_text = re.sub(r"\s+", " ", cli.build_parser().format_help())
    assert "else the default rule `polyfuse devices` prints" in help_text
    assert "first usable" not in help_text and "first working" not in help_text
