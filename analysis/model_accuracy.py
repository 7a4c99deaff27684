"""How well the calibrated performance model predicts kernels it never saw, per device.

The model (:mod:`polyfuse.perf.model`) is fitted on generated micro-benchmarks only
(``CALIBRATION_KERNELS``; the script checks that no kernel evaluated here is among them).  It
is evaluated, through the steps of :func:`polyfuse.predict` with ``measure=True`` (the code
behind ``polyfuse predict --measure``: the program loaded, fused, predicted, measured per
launch), on

* **operators** at real sizes, whatever kernels the operator library produces for them: the
  products of BERT-base and GPT-2 (128×768×768, 128×768×3072, 128×3072×768), the batched
  attention product (12×128×64×128), Softmax and LayerNormalization over rows of 768 and 128,
  the convolutions of a ResNet bottleneck at 56×56 (1×1 256→64, 3×3 64→64, 1×1 64→256), a
  MobileNet depthwise 3×3 convolution, element-wise chains (bias + Gelu, Add + Relu, Sigmoid);
  all as independent nodes of one ONNX graph, so every run of it goes through all of them and
  their samples are interleaved;
* **blocks** at real sizes, unfused and fused: a GPT-2 MLP (seq 128: 768→3072, Gelu,
  3072→768, residual, LayerNorm), a ResNet bottleneck at 56×56 (convolutions, Relu, residual)
  and a MobileNet block (depthwise 3×3, Relu, pointwise 1×1);
* **examples** (``examples/*/{kernels.cl,host.c}``), unfused and fused;
* **real-size** models (``--real-size DIR``, the exports of ``analysis/export_real_size.py``:
  a BERT-base layer, a GPT-2 MLP, a ResNet bottleneck and a MobileNet block at their real
  sizes, whatever ``--quick`` says), in both kernel forms (tiled and blocked), unfused and
  fused: the launches a session chooses between.

**Ranking**: every choice the model makes between programs that compute the same thing —
fused or unfused (each example and block; each real-size model in each form), and a
real-size model's kernel form (unfused, as a session ranks them) and its best of the four
— is right when the program the model ranks first measures within 5 % of the measured best.
The study scores the program polyfuse's code runs as well: for fused or not the fusion pass's
(each group weighed by the model, those it cannot rank timed), for a kernel form the forms
the model leaves within the session's ``FORM_MARGIN`` timed (the model alone when one is left).

Measured: per launch, the median over ``--repeat`` rounds of its profiled time, the programs
of one choice in turn, round by round (two programs measured minutes apart on a shared machine
differed by 10-45 % with the same kernels: the ranking compared the moments, not the
programs); a round's sample is what ``polyfuse predict --measure`` measures, the median of the
program's runs after a warm-up, for at least 0.2 s (a launch of a microsecond measured over
few runs gives the scheduler's time, not the kernel's); predicted: the model's time of its
exact counts.  The figure of merit is the geomean of ``max(p/m, m/p)`` over launches, minus 1
("geomean error").

    .venv/bin/python analysis/model_accuracy.py [--device 0:0] [--quick] [--recalibrate]
        [--repeat 7] [--out DIR] [--real-size out/real_size] [--reuse MEASURED.json]

Writes DIR/model_accuracy_<device>.csv and .png (default DIR: analysis/results), prints the
per-launch table, the geomean error per group and overall, and the worst cases.  On a shared
machine the measured times carry other jobs' load: the spread column (IQR / median) says how
much.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from polyfuse.apps.prediction import LaunchPrediction  # noqa: E402
from polyfuse.perf import model as pm  # noqa: E402

EXAMPLES = ROOT / "examples"
#: the real-size exports of ``analysis/export_real_size.py`` the study runs (``--real-size``)
REAL_SIZE_MODELS = ("bert_layer", "gpt2_mlp", "resnet_bottleneck", "mobilenet_block")
#: the kernel forms a session chooses between on a CPU
FORMS = ("tiled", "blocked")
#: a choice is right when the program ranked first measures within this of the best
RANK_TOLERANCE = 1.05
#: host values of examples whose sizes come from argv
EXAMPLE_PARAMS: dict[str, dict[str, int]] = {"elementwise_chain": {"n": 1 << 20},
                                             "runtime_offset": {"m": 64, "n": 1 << 20},
                                             "lstm2": {"steps": 6}}


@dataclass
class Row:
    """One launch: predicted against measured seconds (per instance)."""

    group: str
    program: str
    launch: LaunchPrediction

    @property
    def name(self) -> str:
        return f"{self.program}: {self.launch.kernel}#{self.launch.launch}"

    @property
    def ratio(self) -> float:
        return self.launch.predicted_s / (self.launch.measured_s or float("nan"))


# ----------------------------------------------------------------------------------------------
# ONNX graphs at real sizes
# ----------------------------------------------------------------------------------------------


class Graph:
    """A small ONNX graph builder: float32 inputs, nodes, outputs."""

    def __init__(self, name: str):
        self.name = name
        self.inputs: list[Any] = []
        self.nodes: list[Any] = []
        self.outputs: list[str] = []
        self.inits: list[Any] = []
        self.n = 0

    def input(self, shape: tuple[int, ...]) -> str:
        from onnx import TensorProto, helper

        name = f"in{len(self.inputs)}"
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def weight(self, shape: tuple[int, ...]) -> str:
        import numpy as np
        from onnx import numpy_helper

        name = f"w{len(self.inits)}"
        rng = np.random.default_rng(len(self.inits))
        arr = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(self, op: str, ins: list[str], label: str = "", **attrs: Any) -> str:
        from onnx import helper

        self.n += 1
        out = f"t{self.n}"
        name = re.sub(r"[^A-Za-z0-9]+", "_", label or f"{op}{self.n}").strip("_")
        self.nodes.append(helper.make_node(op, ins, [out], name=name, **attrs))
        return out

    def output(self, name: str) -> None:
        self.outputs.append(name)

    def save(self, path: Path) -> Path:
        """The model with its outputs typed by ONNX's shape inference."""
        import onnx
        from onnx import helper

        graph = helper.make_graph(self.nodes, self.name, self.inputs, [], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
        known = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
        model.graph.output.extend(known[o] for o in self.outputs)
        onnx.save(model, str(path))
        return path


def operators(quick: bool) -> Graph:
    """Every operator case as an independent node (module docstring)."""
    g = Graph("operators")
    s = 2 if quick else 1  # --quick halves the sequence / spatial sizes

    def mm(m: int, k: int, n: int) -> None:
        g.output(g.node("MatMul", [g.input((m // s, k)), g.weight((k, n))],
                        f"MatMul {m // s}x{k}x{n}"))

    mm(128, 768, 768)
    mm(128, 768, 3072)
    mm(128, 3072, 768)
    g.output(g.node("MatMul", [g.input((12, 128 // s, 64)), g.input((12, 64, 128 // s))],
                    f"batched MatMul 12x{128 // s}x64x{128 // s}"))
    g.output(g.node("Softmax", [g.input((12, 128 // s, 128))], "Softmax rows of 128", axis=-1))
    g.output(g.node("Softmax", [g.input((128 // s, 768))], "Softmax rows of 768", axis=-1))
    for rows, cols in ((128 // s, 768), (12 * 128 // s, 128)):
        g.output(g.node("LayerNormalization", [g.input((rows, cols)), g.weight((cols,)),
                                               g.weight((cols,))],
                        f"LayerNorm rows of {cols}", axis=-1))
    hw = 56 // s
    g.output(g.node("Conv", [g.input((1, 256, hw, hw)), g.weight((64, 256, 1, 1))],
                    f"Conv 1x1 256-64 at {hw}"))
    g.output(g.node("Conv", [g.input((1, 64, hw, hw)), g.weight((64, 64, 3, 3))],
                    f"Conv 3x3 64-64 at {hw}", pads=[1, 1, 1, 1]))
    g.output(g.node("Conv", [g.input((1, 64, hw, hw)), g.weight((256, 64, 1, 1))],
                    f"Conv 1x1 64-256 at {hw}"))
    g.output(g.node("Conv", [g.input((1, 128, hw, hw)), g.weight((128, 1, 3, 3))],
                    f"depthwise Conv 3x3 128 at {hw}", pads=[1, 1, 1, 1], group=128))
    x = g.input((128 // s, 3072))
    g.output(g.node("Gelu", [g.node("Add", [x, g.weight((3072,))], "bias Add 3072")],
                    "Gelu 3072"))
    y = g.input((1, 256, hw, hw))
    g.output(g.node("Relu", [g.node("Add", [y, g.input((1, 256, hw, hw))], "residual Add")],
                    "residual Relu"))
    g.output(g.node("Sigmoid", [g.input((128 // s, 3072))], "Sigmoid 3072"))
    return g


def gpt2_mlp(quick: bool) -> Graph:
    g = Graph("gpt2_mlp")
    seq = 64 if quick else 128
    x = g.input((seq, 768))
    h = g.node("Add", [g.node("MatMul", [x, g.weight((768, 3072))]), g.weight((3072,))])
    h = g.node("Gelu", [h])
    h = g.node("Add", [g.node("MatMul", [h, g.weight((3072, 768))]), g.weight((768,))])
    h = g.node("Add", [h, x])
    g.output(g.node("LayerNormalization", [h, g.weight((768,)), g.weight((768,))], axis=-1))
    return g


def resnet_bottleneck(quick: bool) -> Graph:
    g = Graph("resnet_bottleneck")
    hw = 28 if quick else 56
    x = g.input((1, 256, hw, hw))
    h = g.node("Relu", [g.node("Conv", [x, g.weight((64, 256, 1, 1)), g.weight((64,))])])
    h = g.node("Relu", [g.node("Conv", [h, g.weight((64, 64, 3, 3)), g.weight((64,))],
                               pads=[1, 1, 1, 1])])
    h = g.node("Conv", [h, g.weight((256, 64, 1, 1)), g.weight((256,))])
    g.output(g.node("Relu", [g.node("Add", [h, x])]))
    return g


def mobilenet_block(quick: bool) -> Graph:
    g = Graph("mobilenet_block")
    hw = 28 if quick else 56
    x = g.input((1, 128, hw, hw))
    h = g.node("Relu", [g.node("Conv", [x, g.weight((128, 1, 3, 3)), g.weight((128,))],
                               pads=[1, 1, 1, 1], group=128)])
    g.output(g.node("Relu", [g.node("Conv", [h, g.weight((128, 128, 1, 1)),
                                             g.weight((128,))])]))
    return g


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------


def evaluate(device: str, cal: pm.Calibration, quick: bool, repeat: int,
             say: Callable[[str], None], only: Optional[set[str]] = None,
             reuse: Optional[dict[str, dict[str, list[Any]]]] = None,
             real_size: Optional[Path] = None) -> list[Row]:
    """Every case predicted and measured, the programs of a choice together (``reuse``: measured
    times of an earlier run, by program and launch id, instead of measuring again: for trying
    model changes;
    ``real_size``: the directory of the real-size exports, :data:`REAL_SIZE_MODELS`)."""
    from polyfuse.apps.prediction import load_source
    from polyfuse.perf.launches import measure_launches, predict_program

    rows: list[Row] = []
    calibrated = set(cal.calibration_kernels)

    def predicted(source: Any, kw: dict[str, Any]) -> tuple[Any, dict[str, int],
                                                         list[LaunchPrediction]]:
        """The program ``predict`` would measure, its integer sizes and its predictions."""
        params = kw.get("params")
        ints = {k: int(v) for k, v in (params or {}).items()}
        program = load_source(source, host=kw.get("host"), params=params, device=device,
                              form=kw.get("form"))
        if kw.get("fused"):
            from polyfuse.passes.pipeline import fuse_program

            program = fuse_program(program, params=ints, device=device).fused.program
        return program, ints, list(predict_program(program, cal, params=ints))

    def run(group: str, cases: list[tuple[str, Any, dict[str, Any]]]) -> None:
        """The programs of one choice, predicted, then measured together: ``repeat`` rounds,
        each one run of every program in turn (the load of other jobs hits them alike, so
        the ranking compares them, not the moments they were measured at)."""
        if only and group not in only:
            return
        built: dict[str, tuple[Any, dict[str, int], list[LaunchPrediction]]] = {}
        for name, source, kw in cases:
            try:
                built[name] = predicted(source, kw)
            except Exception as err:  # noqa: BLE001 - one case failing must not stop the study
                say(f"  {name}: skipped ({type(err).__name__}: {str(err)[:100]})")
        t0 = time.perf_counter()
        samples: dict[str, dict[int, list[float]]] = {n: {} for n in built}
        for _ in range(0 if reuse is not None else repeat):
            for name, (program, ints, launches) in list(built.items()):
                try:
                    got = measure_launches(program, launches, params=ints, device=device,
                                           repeat=1)
                except Exception as err:  # noqa: BLE001
                    say(f"  {name}: not measured ({type(err).__name__}: {str(err)[:100]})")
                    del built[name]
                    continue
                for lp in got:
                    if lp.measured_s:
                        samples[name].setdefault(lp.launch, []).append(lp.measured_s)
        for name, (_program, _ints, launches) in built.items():
            if reuse is not None:
                # a launch whose kernel changed since (a fusion the model now decides
                # otherwise) was not measured: its id names another kernel (the third field)
                old = reuse.get(name, {})
                measured = [dataclasses.replace(lp, measured_s=old[str(lp.launch)][0],
                                                spread=old[str(lp.launch)][1])
                            for lp in launches if str(lp.launch) in old
                            and old[str(lp.launch)][2:3] in ([], [lp.kernel])]
            else:
                measured = []
                for lp in launches:
                    s = samples[name].get(lp.launch)
                    if s:
                        med = statistics.median(s)
                        q = statistics.quantiles(s, n=4) if len(s) > 1 else [med, med, med]
                        measured.append(dataclasses.replace(
                            lp, measured_s=med, spread=(q[2] - q[0]) / med))
            seen = {lp.kernel for lp in launches} & calibrated
            assert not seen, f"evaluated a calibration kernel: {seen}"
            rows.extend(Row(group, name, lp) for lp in measured)
            err = pm.geomean_error([(lp.predicted_s, lp.measured_s or 0.0) for lp in measured]) \
                if measured else None
            say(f"  {name}: {len(launches)} launches, geomean error "
                f"{'-' if err is None else f'{err:.0%}'}")
        say(f"    ({time.perf_counter() - t0:.0f} s measuring)")

    with tempfile.TemporaryDirectory(prefix="polyfuse-accuracy-") as tmp:
        say("operators at real sizes:")
        run("operators", [("operators", operators(quick).save(Path(tmp) / "operators.onnx"),
                           {})])
        say("blocks at real sizes, unfused and fused:")
        for make in (gpt2_mlp, resnet_bottleneck, mobilenet_block):
            path = make(quick).save(Path(tmp) / f"{make.__name__}.onnx")
            run("blocks", [(f"{make.__name__} [{'fused' if fused else 'unfused'}]", path,
                            {"fused": fused}) for fused in (False, True)])
    say("examples, unfused and fused:")
    for d in sorted(p.parent.name for p in EXAMPLES.glob("*/host.c")):
        params = EXAMPLE_PARAMS.get(d)
        run("examples", [(f"{d} [{'fused' if fused else 'unfused'}]", EXAMPLES / d / "kernels.cl",
                          {"host": str(EXAMPLES / d / "host.c"), "params": params,
                           "fused": fused}) for fused in (False, True)])
    if real_size is not None:
        say("real-size models, both kernel forms, unfused and fused:")
        for model in REAL_SIZE_MODELS:
            path = real_size / f"{model}.onnx"
            if not path.exists():
                say(f"  {path}: not there (analysis/export_real_size.py writes it)")
                continue
            run("real-size", [(f"{model} {form} [{'fused' if fused else 'unfused'}]", path,
                               {"fused": fused, "form": form})
                              for form in FORMS for fused in (False, True)])
    return rows


def program_times(rows: list[Row]) -> dict[str, tuple[float, float]]:
    """Per program: (predicted, measured) seconds of one run, every launch instance."""
    out: dict[str, tuple[float, float]] = {}
    for r in rows:
        p, m = out.get(r.program, (0.0, 0.0))
        n = r.launch.count
        out[r.program] = (p + n * r.launch.predicted_s, m + n * (r.launch.measured_s or 0.0))
    return out


@dataclass(frozen=True)
class Choice:
    """Programs computing the same thing, as the model and the measurement rank them, and the
    one polyfuse's code runs (``code_pick``; ``decided``: what chose it)."""

    what: str
    programs: tuple[str, ...]
    predicted: tuple[float, ...]
    measured: tuple[float, ...]
    code_pick: int = 0
    decided: str = "the model"

    @property
    def picked(self) -> str:
        return self.programs[min(range(len(self.programs)), key=self.predicted.__getitem__)]

    @property
    def loss(self) -> float:
        """The measured time of the model's pick over the measured best."""
        i = min(range(len(self.programs)), key=self.predicted.__getitem__)
        return self.measured[i] / min(self.measured)

    @property
    def right(self) -> bool:
        return self.loss <= RANK_TOLERANCE

    @property
    def code_loss(self) -> float:
        """The measured time of the program the code runs over the measured best."""
        return self.measured[self.code_pick] / min(self.measured)

    @property
    def code_right(self) -> bool:
        return self.code_loss <= RANK_TOLERANCE


def choices(rows: list[Row]) -> list[Choice]:
    """Every choice of the module docstring that the measured programs allow, with the program
    the code runs: the fusion pass's (``[fused]``: each group weighed by the model, the close
    ones timed, :mod:`polyfuse.passes.group_weighing`) for fused or not; for a kernel form,
    the session's rule (:func:`polyfuse.apps.session._choose_form`): the forms predicted
    within ``FORM_MARGIN`` of the fastest are built and timed, the model decides alone when
    one is left."""
    from polyfuse.apps.session import FORM_MARGIN

    times = program_times(rows)
    out = []

    def choice(what: str, names: list[str], pick: Optional[Callable[[list[float],
               list[float]], tuple[int, str]]] = None) -> None:
        if len(names) > 1 and all(n in times for n in names):
            pred = [times[n][0] for n in names]
            meas = [times[n][1] for n in names]
            i, how = pick(pred, meas) if pick else (len(names) - 1, "the fusion pass")
            out.append(Choice(what, tuple(names), tuple(pred), tuple(meas), i, how))

    def forms(unfused: list[float]) -> list[int]:
        return [k for k, p in enumerate(unfused) if p <= FORM_MARGIN * min(unfused)]

    def form_pick(pred: list[float], meas: list[float]) -> tuple[int, str]:
        left = forms(pred)
        if len(left) == 1:
            return left[0], "the model"
        return min(left, key=meas.__getitem__), "timing"

    bases = sorted({p.rsplit(" [", 1)[0] for p in times})
    for b in bases:
        choice(f"{b}: fused or not", [f"{b} [unfused]", f"{b} [fused]"])
    for model in REAL_SIZE_MODELS:
        unfused = [f"{model} {f} [unfused]" for f in FORMS]
        choice(f"{model}: kernel form", unfused, form_pick)
        if not all(n in times for n in unfused):
            continue

        def both_pick(pred: list[float], meas: list[float], unfused: list[str] = unfused
                      ) -> tuple[int, str]:
            left = forms([times[n][0] for n in unfused])
            fused = [2 * k + 1 for k in left]  # programs ordered (form, unfused / fused)
            if len(fused) == 1:
                return fused[0], "the model and the fusion pass"
            return min(fused, key=meas.__getitem__), "timing"

        choice(f"{model}: form and fusion", [f"{model} {f} [{u}]" for f in FORMS
                                             for u in ("unfused", "fused")], both_pick)
    return out


def geomean(rows: list[Row]) -> float:
    return pm.geomean_error([(r.launch.predicted_s, r.launch.measured_s or 0.0) for r in rows])


def write_csv(rows: list[Row], path: Path) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["group", "program", "kernel", "launch", "count", "predicted_us",
                    "measured_us", "error", "measured_spread"])
        for r in rows:
            lp = r.launch
            w.writerow([r.group, r.program, lp.kernel, lp.launch, lp.count,
                        f"{lp.predicted_s * 1e6:.3f}", f"{(lp.measured_s or 0) * 1e6:.3f}",
                        f"{lp.error:.4f}", f"{lp.spread or 0:.3f}"])


def plot(rows: list[Row], cal: pm.Calibration, path: Path, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    markers = {"operators": ("o", "tab:blue"), "blocks": ("s", "tab:green"),
               "examples": ("^", "tab:orange"), "real-size": ("D", "tab:red")}
    vals: list[float] = []
    for g, (mk, col) in markers.items():
        pts = [r for r in rows if r.group == g]
        if pts:
            xs = [(r.launch.measured_s or 0) * 1e6 for r in pts]
            ys = [r.launch.predicted_s * 1e6 for r in pts]
            vals += xs + ys
            ax.plot(xs, ys, mk, color=col, alpha=0.8,
                    label=f"{g} ({len(pts)}): {geomean(pts):.0%}")
    cs = [s for s in cal.samples if s.get("fitted")]
    if cs:
        xs = [s["measured"] * 1e6 for s in cs]
        ys = [s["fitted"] * 1e6 for s in cs]
        vals += xs + ys
        ax.plot(xs, ys, "x", color="gray", alpha=0.6,
                label=f"calibration fit ({len(cs)}): {cal.fit_geomean_error:.0%}")
    lo, hi = min(v for v in vals if v > 0) / 2, max(vals) * 2
    ax.plot([lo, hi], [lo, hi], "k-", linewidth=1)
    ax.plot([lo, hi], [2 * lo, 2 * hi], "k:", linewidth=0.8)
    ax.plot([lo, hi], [lo / 2, hi / 2], "k:", linewidth=0.8, label="×2 / ÷2")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured (us, median of profiled runs)")
    ax.set_ylabel("predicted (us)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="P:D as `polyfuse devices` lists")
    parser.add_argument("--quick", action="store_true", help="halved sizes, fewer repeats")
    parser.add_argument("--recalibrate", action="store_true",
                        help="measure the calibration again (and cache it)")
    parser.add_argument("--calibration", type=Path, help="use this calibration JSON")
    parser.add_argument("--only", action="append",
                        choices=["operators", "blocks", "examples", "real-size"],
                        help="only these groups (repeatable)")
    parser.add_argument("--real-size", type=Path, metavar="DIR",
                        help="also the real-size exports in DIR (analysis/export_real_size.py)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--reuse", type=Path, metavar="MEASURED.json",
                        help="the measured times an earlier run wrote, instead of measuring")
    args = parser.parse_args(argv)
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    from polyfuse.runtime.device import get_device

    t0 = time.perf_counter()
    dev = get_device(args.device)
    if args.calibration:
        cal = pm.Calibration.load(path=args.calibration)
    else:
        cal = pm.Calibration.for_device(dev, recalibrate=args.recalibrate, progress=say)
    say(cal.summary())
    repeat = args.repeat or (3 if args.quick else 7)
    reuse = json.loads(args.reuse.read_text()) if args.reuse else None
    rows = evaluate(args.device, cal, args.quick, repeat, say, set(args.only or ()), reuse,
                    args.real_size)

    args.out.mkdir(parents=True, exist_ok=True)
    tag = re.sub(r"[^0-9a-z]+", "_", (args.device or "default").lower())
    csv_path = args.out / f"model_accuracy_{tag}.csv"
    png_path = args.out / f"model_accuracy_{tag}.png"
    write_csv(rows, csv_path)
    measured: dict[str, dict[str, list[Any]]] = {}
    for r in rows:
        measured.setdefault(r.program, {})[str(r.launch.launch)] = [r.launch.measured_s or 0.0,
                                                                    r.launch.spread or 0.0,
                                                                    r.launch.kernel]
    (args.out / f"model_accuracy_{tag}_measured.json").write_text(json.dumps(measured, indent=1))

    print(f"device: {dev.name.strip()} ({args.device or 'default'}); calibration p = {cal.p:g}, "
          f"fit geomean error {cal.fit_geomean_error:.1%} over {len(cal.samples)} "
          f"micro-benchmark launches")
    print()
    print(f"{'group':9s} {'launch':58s} {'pred us':>10s} {'meas us':>10s} {'p/m':>6s} "
          f"{'spread':>7s}")
    for r in rows:
        lp = r.launch
        print(f"{r.group:9s} {r.name[:58]:58s} {lp.predicted_s * 1e6:10.1f} "
              f"{(lp.measured_s or 0) * 1e6:10.1f} {r.ratio:6.2f} {lp.spread or 0:7.2f}")
    print()
    for g in ("operators", "blocks", "examples", "real-size"):
        sel = [r for r in rows if r.group == g]
        if sel:
            within = sum(1 for r in sel if 0.5 <= r.ratio <= 2.0)
            print(f"{g}: geomean error {geomean(sel):.1%} over {len(sel)} launches "
                  f"(within 2x: {within}/{len(sel)})")
    if not rows:
        print("nothing measured")
        return 1
    ge = geomean(rows)
    spreads = [r.launch.spread or 0.0 for r in rows]
    print(f"all: geomean error {ge:.1%} over {len(rows)} launches; median measured spread "
          f"(IQR/median) {statistics.median(spreads):.2f}")
    print("worst:")
    for r in sorted(rows, key=lambda r: -(r.launch.error or 0))[:6]:
        print(f"  {r.name[:70]:70s} p/m = {r.ratio:.2f}")
    made = choices(rows)
    if made:
        print(f"ranking: the model's first is the measured best or within "
              f"{RANK_TOLERANCE - 1:.0%} of it in {sum(c.right for c in made)} of {len(made)} "
              f"choices")
        for c in made:
            print(f"  {'ok   ' if c.right else 'WRONG'} {c.what[:40]:40s} picked "
                  f"{c.picked[:36]:36s} measured {c.loss:.2f}x the best")
        print(f"the choice the code makes (the model decides, timing confirms when close): the "
              f"measured best or within {RANK_TOLERANCE - 1:.0%} of it in "
              f"{sum(c.code_right for c in made)} of {len(made)} choices")
        for c in made:
            print(f"  {'ok   ' if c.code_right else 'WRONG'} {c.what[:40]:40s} runs "
                  f"{c.programs[c.code_pick][:36]:36s} measured {c.code_loss:.2f}x the best "
                  f"({c.decided})")
    plot(rows, cal, png_path, f"{dev.name.strip()}: geomean error {ge:.0%} over {len(rows)} "
                              f"launches never calibrated on")
    print(f"wrote {csv_path}")
    print(f"wrote {png_path}")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
