"""``polyfuse predict``: the calibrated model's time of every launch of a program or model, and,
when asked, the measured time beside it.

The counts are exact (:func:`polyfuse.perf.counts.count_program`, barvinok), the costs those of
the device's calibration (:meth:`polyfuse.perf.model.Calibration.for_device`, measured once per
device and cached); the prediction of a launch is the model's time of its feature vector
(docs/performance.md).  Measuring (``measure=True``) builds the program once, warms it up,
runs it ``repeat`` times and more while its runs took less than a fraction of a second
(:func:`polyfuse.perf.launches.measure_launches`), and takes, per launch, the median of its
profiled time over the runs: every run goes through every launch, so the launches' samples
are interleaved and a burst of load from other jobs hits all of them alike.  The program is
first run once in a worker process (:func:`polyfuse.runtime.execute.precheck_programs`), so a
device compiler that aborts costs an error naming the kernel, not the caller's process.

Times are per instance: a launch inside a host loop runs ``count`` times per execution, and its
``predicted_s`` / ``measured_s`` are the mean of one instance.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from polyfuse.core.program import Launch, PolyfuseError, Program
from polyfuse.perf.launches import (
    SHOWN_COUNTS,
    LaunchPrediction,
    measure_launches,
    predict_program,
)
from polyfuse.perf.model import Calibration, geomean_error

Progress = Optional[Callable[[str], None]]
#: what :func:`predict` accepts: a loaded program, an ONNX file or an OpenCL C file (with host)
Source = Union[Program, str, os.PathLike]

@dataclass(frozen=True)
class Prediction:
    """Every launch of one program on one device, with the calibration used."""

    program: str
    device: str
    device_key: str
    calibration: str
    fused: bool
    launches: tuple[LaunchPrediction, ...]
    #: an ONNX model's kernel form and how it was chosen; "" for OpenCL C programs
    form: str = ""
    #: what was decided for the user (a local size the host leaves to the device)
    notes: tuple[str, ...] = ()

    @property
    def measured(self) -> bool:
        return any(lp.measured_s is not None for lp in self.launches)

    @property
    def predicted_s(self) -> float:
        """Predicted seconds of one execution (every instance of every launch)."""
        return sum(lp.predicted_s * lp.count for lp in self.launches)

    @property
    def measured_s(self) -> Optional[float]:
        if not self.measured:
            return None
        return sum((lp.measured_s or 0.0) * lp.count for lp in self.launches)

    @property
    def geomean_error(self) -> Optional[float]:
        """Geomean of ``max(p/m, m/p)`` over the measured launches, minus 1."""
        pairs = [(lp.predicted_s, lp.measured_s) for lp in self.launches
                 if lp.measured_s is not None]
        return geomean_error(pairs) if pairs else None

    def to_dict(self) -> dict[str, Any]:
        return {"program": self.program, "device": self.device, "device_key": self.device_key,
                "calibration": self.calibration, "fused": self.fused, "form": self.form,
                "notes": list(self.notes),
                "predicted_s": self.predicted_s, "measured_s": self.measured_s,
                "geomean_error": self.geomean_error,
                "launches": [lp.to_dict() for lp in self.launches]}

    def table(self) -> str:
        """The per-launch table a person reads (times in microseconds)."""
        head = ["launch", "kernel", "count", "flops/sg", "gmem bytes", "local acc", "barriers",
                "work-items", "predicted us"]
        if self.measured:
            head += ["measured us", "spread", "error"]
        rows = []
        for lp in self.launches:
            c = lp.counts()
            row = [str(lp.launch), lp.kernel, str(lp.count)] + \
                [_num(c[k]) for k in SHOWN_COUNTS] + [f"{lp.predicted_s * 1e6:.1f}"]
            if self.measured:
                row += ["-" if lp.measured_s is None else f"{lp.measured_s * 1e6:.1f}",
                        "-" if lp.spread is None else f"{lp.spread:.2f}",
                        "-" if lp.error is None else f"{lp.error:.0%}"]
            rows.append(row)
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                 for r in [head, *rows]]
        lines.insert(1, "  ".join("-" * w for w in widths))
        total = f"total: predicted {self.predicted_s * 1e6:.1f} us"
        if self.measured:
            total += (f", measured {self.measured_s * 1e6:.1f} us; geomean error "  # type: ignore[operator]
                      f"{self.geomean_error:.0%} over {len(self.launches)} launches")
        lines += ["", f"{self.program} on {self.device} ({'fused' if self.fused else 'unfused'})"
                  + (f"; kernel form {self.form}" if self.form else ""),
                  total, *self.notes, f"calibration: {self.calibration}"]
        return "\n".join(lines)


def _num(v: float) -> str:
    if v == 0:
        return "0"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{unit}"
    return f"{v:.3g}"


def load_source(source: Source, *, host: Optional[Union[str, Sequence[str]]] = None,
                params: Optional[Mapping[str, Union[int, float]]] = None,
                device: Any = None, form: Optional[str] = None) -> Program:
    """The program of ``source``: a :class:`Program` as is, an ``.onnx`` file (kernels tiled
    for ``device``, of the kernel ``form`` of :data:`~polyfuse.core.program.KERNEL_VARIANTS`,
    by default the one a session runs, :func:`model_form`), or OpenCL C file(s) with their
    ``host`` program."""
    if isinstance(source, Program):
        return source
    path = Path(os.fspath(source))
    if not path.exists():
        raise PolyfuseError(f"{path}: no such file")
    if path.suffix.lower() == ".onnx":
        if host:
            raise PolyfuseError(f"{path}: an ONNX model takes no host program")
        from polyfuse.frontend.onnx import load_onnx
        from polyfuse.runtime.device import device_target

        ints = {k: int(v) for k, v in (params or {}).items()}
        form = form or model_form(path, ints, device)[0]
        return load_onnx(str(path), params=ints,
                         target=device_target(device).with_variant(form))
    if form:
        raise PolyfuseError(f"{path}: a kernel form applies to an ONNX model only")
    check_opencl_sources([path], host)
    from polyfuse.frontend.host import load_opencl

    hosts = [host] if isinstance(host, str) else list(host)
    return load_opencl([str(path)], host=hosts, params=dict(params or {}), check_params=True)


def check_opencl_sources(kernels: Sequence[Union[str, os.PathLike]],
                         host: Optional[Union[str, Sequence[str]]]) -> None:
    """Raise :class:`PolyfuseError` unless ``kernels`` (none: the host reads its kernels'
    source itself) are existing OpenCL C files and there is a ``host`` that launches them."""
    for k in kernels:
        path = Path(os.fspath(k))
        if not path.exists():
            raise PolyfuseError(f"{path}: no such file")
        if path.suffix.lower() not in (".cl", ".c", ".h", ".cpp"):
            raise PolyfuseError(f"{path}: not an ONNX model (.onnx) nor OpenCL C (.cl)")
    if not host:
        where = f"{os.fspath(kernels[0])}: " if kernels else ""
        raise PolyfuseError(f"{where}predicting needs the launches: give the host program "
                            "(--host HOST.c)")


#: a launch whose host leaves the local size to the implementation (NULL) is predicted and
#: measured at the widest work-group along dimension 0 that divides its global size, at most
#: this many work-items and the device's limit (1 along the other dimensions): a count needs
#: one, and the program then runs with the work-groups it was predicted for
NULL_LOCAL_WIDTH = 256


def explicit_local_sizes(program: Program, params: Mapping[str, int], device: Any = None
                         ) -> tuple[Program, list[str]]:
    """``program`` with a concrete local size for each launch whose host passes NULL and whose
    global size is known (:data:`NULL_LOCAL_WIDTH`), and one line per launch changed.  OpenCL
    leaves that size to the implementation, so a kernel launched that way is correct with any
    size that divides the global size."""
    import dataclasses

    import sympy

    from polyfuse.core.islutil import int_symbol
    from polyfuse.runtime.device import DeviceLimits, get_device

    if all(op.local_size is not None for op in program.launches):
        return program, []
    limit = min(NULL_LOCAL_WIDTH, DeviceLimits.from_device(get_device(device)).max_work_group_size)
    subs = {int_symbol(k): v for k, v in params.items()}
    subs.update({sympy.Symbol(k): v for k, v in params.items()})
    notes: list[str] = []
    ops = []
    for op in program.ops:
        if isinstance(op, Launch) and op.local_size is None:
            sizes = [sympy.sympify(g).subs(subs) for g in op.global_size]
            if all(g.is_Integer and int(g) > 0 for g in sizes):
                first = int(sizes[0])
                width = max(w for w in range(1, min(limit, first) + 1) if first % w == 0)
                local = (width,) + (1,) * (len(sizes) - 1)
                op = dataclasses.replace(op, local_size=tuple(sympy.Integer(v) for v in local))
                notes.append(f"launch {op.id} ({op.kernel}): the host leaves the local size to "
                             f"the device; predicted and measured at {local}")
        ops.append(op)
    return dataclasses.replace(program, ops=tuple(ops)), notes


def model_form(path: Union[str, os.PathLike], params: Mapping[str, int], device: Any = None
               ) -> tuple[str, str]:
    """The kernel form an :class:`~polyfuse.apps.session.InferenceSession` of the ONNX model
    ``path`` runs on ``device``, and how that is known
    (:func:`~polyfuse.apps.session.session_form`): what ``predict`` predicts by default is
    what the user's session runs, not a form it never picks (at real size on a CPU, the
    ``tiled`` products are tens of times slower than the ``blocked`` ones a session runs)."""
    from polyfuse.apps.session import session_form

    return session_form(os.fspath(path), params, device)


def predict(source: Source, device: Any = None, *, host: Optional[Union[str, Sequence[str]]] = None,
            params: Optional[Mapping[str, Union[int, float]]] = None, fused: bool = False,
            measure: bool = False, repeat: int = 7, calibration: Optional[Calibration] = None,
            recalibrate: bool = False, progress: Progress = None,
            form: Optional[str] = None) -> Prediction:
    """Predicted (and with ``measure`` measured) seconds of every launch of ``source``.

    ``source``: a :class:`~polyfuse.core.program.Program`, an ONNX model file or an OpenCL C
    file with its ``host`` program; ``params`` fix sizes the host reads at run time (or an ONNX
    model's dynamic dimensions); ``fused`` predicts the fused program (the plan ``polyfuse fuse``
    makes) instead; ``form`` picks an ONNX model's kernel form (``tiled``, ``blocked``, ...:
    :data:`~polyfuse.core.program.KERNEL_VARIANTS`; default: the form a session of the model
    runs, :func:`model_form`, named in :attr:`Prediction.form`).  ``device`` is a
    ``"P:D"`` spec as ``polyfuse devices`` lists (default: the default device); its
    calibration is measured once and cached (``recalibrate``: measured again).  Raises
    :class:`PolyfuseError` on input it cannot load, sizes it cannot count, a program the
    device cannot run.
    """
    from polyfuse.runtime.device import get_device

    say = progress or (lambda _m: None)
    dev = get_device(device)
    ints = {k: int(v) for k, v in (params or {}).items() if float(v).is_integer()}
    form_note = ""
    if not isinstance(source, Program) and os.fspath(source).lower().endswith(".onnx"):
        how = "asked for"
        if not form:
            form, how = model_form(source, ints, device)
        form_note = f"{form} ({how})"
    program = load_source(source, host=host, params=params, device=device, form=form)
    program, null_local = explicit_local_sizes(program, ints, device)
    for note in null_local:
        say(note)
    if fused:
        from polyfuse.passes.pipeline import fuse_program

        say(f"fusing {program.name}")
        program = fuse_program(program, params=ints, device=device,
                               progress=progress).fused.program
    if calibration is None:
        calibration = Calibration.for_device(dev, recalibrate=recalibrate, progress=progress)
    say(f"calibration of {calibration.device}: {calibration.path}")
    launches = predict_program(program, calibration, params=ints, progress=progress)
    if measure:
        launches = measure_launches(program, launches, params=ints, device=device,
                                    repeat=repeat, progress=progress)
    return Prediction(program.name, dev.name.strip(), calibration.device_key,
                      str(calibration.path), fused, tuple(launches), form_note,
                      tuple(null_local))


__all__ = ["NULL_LOCAL_WIDTH", "LaunchPrediction", "Prediction", "check_opencl_sources",
           "explicit_local_sizes", "load_source", "measure_launches", "model_form", "predict",
           "predict_program"]
