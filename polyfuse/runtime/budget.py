"""Size guards: estimate what running a program costs before running it, refuse beyond budget.

Running (``--verify``, ``polyfuse run``, timing) allocates every root buffer several times over
(seeded initial contents, a host mirror, the device buffer — on a CPU device that is host memory
too — and the final contents), and a verification keeps the reference run's results while the
candidate runs.  A size of 10⁹ elements read from ``--param`` would otherwise end in a numpy
``MemoryError`` or a machine swapping for hours.  :func:`check_run_budget` evaluates the buffer
sizes and the launched work-items at the given parameters, without allocating or unrolling
anything large, and raises :class:`~polyfuse.core.program.PolyfuseError` naming the largest buffers
when the estimate exceeds the budget:

* memory: ``POLYFUSE_MEMORY_BUDGET`` (bytes, or with a ``K``/``M``/``G`` suffix) when set, else
  half of the memory the kernel reports available (``MemAvailable``), else half the physical
  memory;
* work: ``POLYFUSE_WORK_BUDGET`` work-item instances (default 2·10¹⁰, minutes on a CPU device)
  and at most ``POLYFUSE_LAUNCH_BUDGET`` launch instances (default 10⁶).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from polyfuse.core.program import PolyfuseError, Program, eval_host_int

#: copies of each root buffer alive during one run (initial, mirror, device buffer, result)
COPIES_PER_RUN = 4
DEFAULT_WORK_BUDGET = 2 * 10**10
DEFAULT_LAUNCH_BUDGET = 10**6


@dataclass(frozen=True)
class RunEstimate:
    """Bytes of the root buffers, work-item and launch instances of one execution."""

    buffer_bytes: dict[str, int]
    work_items: int
    launches: int

    @property
    def total_bytes(self) -> int:
        return sum(self.buffer_bytes.values())


def _parse_bytes(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)i?[bB]?\s*", text)
    if not m:
        raise PolyfuseError(f"POLYFUSE_MEMORY_BUDGET={text!r} is not a size (e.g. 4G)")
    scale = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


def available_memory() -> int:
    """Bytes of memory a run may still take on this machine (``MemAvailable`` or physical)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


def memory_budget() -> int:
    """The memory budget of one run or verification, in bytes (module doc)."""
    env = os.environ.get("POLYFUSE_MEMORY_BUDGET")
    return _parse_bytes(env) if env else available_memory() // 2


def _env_int(name: str, default: int) -> int:
    try:
        return int(float(os.environ.get(name, default)))
    except ValueError:
        raise PolyfuseError(f"{name}={os.environ[name]!r} is not a number") from None


def _trips(lp: Any, env: Mapping[str, Any]) -> Optional[int]:
    """Trip count of a host loop under ``env``; None when a bound needs an outer iterator."""
    try:
        lower = eval_host_int(lp.lower, env, "lower bound")
        upper = eval_host_int(lp.upper, env, "upper bound")
    except PolyfuseError:
        return None
    step = lp.step or 1
    return max(0, -(-(upper - lower) // step)) if step > 0 else None


def estimate_run(program: Program, params: Optional[Mapping[str, Any]] = None) -> RunEstimate:
    """Root buffer sizes and work done by one execution of ``program`` at ``params``.

    Host loops are not unrolled: a launch's instances are the product of its loops' trip counts
    (a bound that depends on an outer iterator is taken at the outer loop's first values, which
    is exact for rectangular nests).  Sizes that cannot be evaluated (missing parameters) are
    left to the executor, which names the missing value.
    """
    env = dict(params or {})
    sizes: dict[str, int] = {}
    for name, buf in program.buffers.items():
        if program.root(name)[0] != name or buf.size is None:
            continue
        try:
            sizes[name] = max(0, eval_host_int(buf.size, env, f"size of buffer {name!r}"))
        except PolyfuseError:
            continue
    work = launches = 0
    for launch in program.launches:
        inst_env = dict(env)
        count = 1
        for lp in launch.loops:
            trips = _trips(lp, inst_env)
            if trips is None:
                break
            count *= trips
            try:
                inst_env[lp.iterator] = eval_host_int(lp.lower, inst_env, "lower bound")
            except PolyfuseError:
                break
        items = 1
        for g in launch.global_size:
            try:
                items *= max(0, eval_host_int(g, inst_env, "global size"))
            except PolyfuseError:
                items = 0
                break
        launches += count
        work += count * items
    return RunEstimate(sizes, work, launches)


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**28 else f"{n / 2**20:.3g} MiB"


def check_run_budget(program: Program, params: Optional[Mapping[str, Any]] = None, *,
                     runs: int = 1, what: str = "running") -> RunEstimate:
    """Refuse (:class:`PolyfuseError`) to run ``program`` when the estimate exceeds the budget.

    ``runs`` is how many executions keep their buffers alive at once (2 for a verification:
    the reference's results stay while the candidate runs).
    """
    est = estimate_run(program, params)
    need = est.total_bytes * COPIES_PER_RUN * max(1, runs)
    budget = memory_budget()
    where = program.files[0] if program.files else program.name
    if need > budget:
        big = sorted(est.buffer_bytes.items(), key=lambda kv: -kv[1])[:3]
        names = ", ".join(f"{n} {_gib(b)}" for n, b in big)
        raise PolyfuseError(f"{what} needs about {_gib(need)} of memory (buffers {names}; "
                            f"{COPIES_PER_RUN * max(1, runs)} copies each) but the budget on "
                            f"this machine is {_gib(budget)}: use smaller sizes (--param) or "
                            "set POLYFUSE_MEMORY_BUDGET", where)
    max_work = _env_int("POLYFUSE_WORK_BUDGET", DEFAULT_WORK_BUDGET)
    if est.work_items * max(1, runs) > max_work:
        raise PolyfuseError(f"{what} launches {est.work_items:.3g} work-items per run, beyond "
                            f"the budget of {max_work:.3g} (POLYFUSE_WORK_BUDGET): use smaller "
                            "sizes (--param)", where)
    max_launches = _env_int("POLYFUSE_LAUNCH_BUDGET", DEFAULT_LAUNCH_BUDGET)
    if est.launches * max(1, runs) > max_launches:
        raise PolyfuseError(f"{what} executes {est.launches} kernel launches per run, beyond "
                            f"the budget of {max_launches} (POLYFUSE_LAUNCH_BUDGET)", where)
    return est


#: the values tried for each free parameter, small ones first (powers of two and odd sizes, so
#: divisibility by work-group sizes and remainders both occur)
SMALL_VALUES = (64, 128, 96, 32, 256, 100, 48, 16, 200, 512, 17, 8, 1024, 4, 2, 1, 3)
#: instances tried before giving up
MAX_INSTANCE_TRIES = 120


def _legal_instance(program: Program, params: Mapping[str, int]) -> Optional[str]:
    """Why ``params`` is not a runnable instance of ``program`` (None: it is): outside the
    parameter context, a buffer of no bytes, a launch that never runs or runs an empty or
    non-uniform NDRange, or beyond the run budget."""
    import islpy as isl

    from polyfuse.core.program import Launch, host_instances

    ctx = isl.Set(program.context)
    names = [ctx.get_dim_name(isl.dim_type.param, i) for i in range(ctx.dim(isl.dim_type.param))]
    fix = ctx
    for name in names:
        if name in params:
            fix = fix.intersect(isl.Set(f"[{name}] -> {{ : {name} = {params[name]} }}")
                                .align_params(fix.get_space()))
    if fix.is_empty():
        return "outside the parameter context"
    try:
        for name, buf in program.buffers.items():
            if buf.size is not None and program.root(name)[0] == name \
                    and eval_host_int(buf.size, params, "size") <= 0:
                return f"buffer {name} is empty"
        estimate = estimate_run(program, params)
        if estimate.launches > 10_000:
            return "too many launches"
        seen = set()
        for op, _, env in host_instances(program, params):
            if not isinstance(op, Launch):
                continue
            seen.add(op.id)
            wd = op.work_dim
            gs = [eval_host_int(x, env, "global size") for x in op.global_size[:wd]]
            ls = [eval_host_int(x, env, "local size") for x in op.local_size[:wd]] \
                if op.local_size else []
            if any(g <= 0 for g in gs) or any(v <= 0 for v in ls) \
                    or any(g % v for g, v in zip(gs, ls)):
                return f"launch {op.id} has global size {gs}, local size {ls}"
        if seen != {op.id for op in program.launches}:
            return "a launch does not run"
        check_run_budget(program, params, runs=2, what="verification")
    except PolyfuseError as err:
        return err.message
    return None


def small_instance(program: Program, params: Optional[Mapping[str, Any]] = None
                   ) -> dict[str, int]:
    """Small values for the parameters ``params`` leave free such that every launch runs, on a
    non-empty uniform NDRange, within the parameter context and the run budget: the instance
    a symbolic program is verified at.  Raises when none of the tried values fits."""
    import random

    fixed = dict(params or {})
    free = [p for p in program.params if p not in fixed]
    if not free:
        return {}
    rng = random.Random(0)
    tries = [dict.fromkeys(free, v) for v in SMALL_VALUES]
    tries += [{p: rng.choice(SMALL_VALUES) for p in free}
              for _ in range(MAX_INSTANCE_TRIES - len(tries))] if len(free) > 1 else []
    why = ""
    for values in tries:
        why = _legal_instance(program, {**fixed, **values}) or ""
        if not why:
            return values
    where = program.files[0] if program.files else program.name
    raise PolyfuseError(f"no small instance of {', '.join(free)} to verify at (last tried "
                        f"{values}: {why}); give the sizes with --param or --args", where)


__all__ = ["RunEstimate", "available_memory", "check_run_budget", "estimate_run",
           "memory_budget", "small_instance"]
