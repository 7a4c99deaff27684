"""Fusion plans: which launches run together, and how each is re-indexed (immutable records).

A :class:`FusionPlan` partitions the program's launches into :class:`FusedGroup` s.  Each member
of a group is a :class:`Fragment`: one original launch placed into the fused kernel by a
*re-indexing*, an isl map from fused work-items to the original launch's work-items::

    { F[h..., g0.., l0..] -> L<id>[h..., g0.., l0..] }

(single-valued and injective; its domain is the set of fused work-items that run the fragment).
Code generation substitutes the fragment's work-item functions by the map's expressions and
guards the fragment by the domain; a ``barrier_before`` fragment is preceded by a work-group
barrier (a block-level edge to an earlier fragment).

The plan holds planning decisions only.  What code generation makes of it (kernel names, the
launched NDRanges, optimizations) is :class:`polyfuse.codegen.FusedProgram`'s, and the
verification summary is the pipeline's (:class:`polyfuse.passes.pipeline.FuseResult`); ``plan.json``
(docs/interfaces.md) is assembled from the three by :func:`polyfuse.report.plan_json`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

import islpy as isl

from polyfuse.fusion.decisions import ApartReason, GroupNote, Refusal, StartReason

if TYPE_CHECKING:  # records of lower layers, for annotations only
    from polyfuse.core.program import Program
    from polyfuse.uar import UAR

ORCHESTRATIONS = ("single", "vertical", "horizontal", "hybrid")


@dataclass(frozen=True)
class Fragment:
    """One original launch inside a fused kernel."""

    launch: int
    kernel: str
    #: fused work-item -> original work-item (see module docstring)
    reindex: isl.Map
    #: a work-group barrier separates this fragment from the previous one (block-level edge)
    barrier_before: bool = False
    #: the map's isl text (``plan.json``).  Kept as first printed: isl may print a map read
    #: back from its text differently, and a plan read from a cache must write the same file
    reindex_text: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reindex_text", str(self.reindex))

    def __reduce__(self) -> tuple[Any, ...]:
        # islpy cannot pickle a map whose input and output dims share names (F[g0] -> L1[g0])
        return _fragment, (self.launch, self.kernel, self.reindex_text, self.barrier_before)


def _fragment(launch: int, kernel: str, text: str, barrier_before: bool) -> Fragment:
    """A pickled :class:`Fragment`, its map read from its text and the text kept."""
    frag = Fragment(launch, kernel, isl.Map(text), barrier_before)
    object.__setattr__(frag, "reindex_text", text)
    return frag


@dataclass(frozen=True)
class FusedGroup:
    """Launches that run as one kernel launch (per host-loop instance)."""

    id: int
    members: tuple[int, ...]  # launch ids, in execution order
    orchestration: str  # one of ORCHESTRATIONS
    fragments: tuple[Fragment, ...]
    #: launch step assigned by global fusion (groups run in step order)
    step: int = 0
    #: the fused NDRange the re-indexings place the fragments on (global and local size;
    #: code generation launches it as :class:`polyfuse.codegen.FusedKernel` says)
    global_size: Optional[tuple[Any, ...]] = None
    local_size: Optional[tuple[int, ...]] = None
    #: why members were (not) merged: one record per decision (polyfuse.fusion.decisions)
    notes: tuple[GroupNote, ...] = ()
    #: the isl schedule of the group's instances (host-loop iterations -> time), as text
    schedule: Optional[str] = None


@dataclass(frozen=True)
class BlockedFusion:
    """An edge that prevented two launches from fusing, with its width and witness."""

    src: int
    dst: int
    array: str
    kind: str
    width: str
    reason: Refusal
    witness: Optional[dict[str, Any]] = None


@dataclass(frozen=True)
class FusionPlan:
    """The plan for a whole program (see module docstring)."""

    program: Program
    uar: UAR
    groups: tuple[FusedGroup, ...]
    #: kernel launches executed before and after fusion (host loops unrolled; code generation
    #: may lower ``launches_after`` further by wavefronts: FusedProgram.launches_after)
    launches_before: int
    launches_after: int
    blocked: tuple[BlockedFusion, ...] = ()
    #: the isl schedule tree computed by global fusion (groups G<id>, host ops H<id>), as text
    schedule: Optional[str] = None
    #: launch id -> why it starts a group in local fusion (polyfuse.fusion.explain)
    starts: dict[int, StartReason] = field(default_factory=dict)
    #: every pair of independent groups left apart, with why (fusion.hetero)
    apart: tuple[ApartReason, ...] = ()

    def group_frames(self, names: Optional[Mapping[int, str]] = None) -> dict[int, str]:
        """Launch id -> the frame its fused group is drawn in (groups of several launches;
        ``names`` gives a group's kernel name where code generation chose one)."""
        return {m: f"group {g.id} ({g.orchestration})"
                   + (f": {names[g.id]}" if names and g.id in names else "")
                for g in self.groups if len(g.members) > 1 for m in g.members}

    def to_svg(self, path: Union[str, os.PathLike, None] = None,
               names: Optional[Mapping[int, str]] = None) -> str:
        """The launches and their dependences with a frame per fused group, as SVG (also
        written to ``path``): which launches became one kernel, and the edges left between."""
        from polyfuse.report.display import uar_to_svg, write_text

        return write_text(uar_to_svg(self.uar, launches_only=True,
                                     clusters=self.group_frames(names)), path)

    def to_dot(self, path: Union[str, os.PathLike, None] = None,
               names: Optional[Mapping[int, str]] = None) -> str:
        """:meth:`to_svg`'s drawing as Graphviz DOT (also written to ``path``)."""
        from polyfuse.report.display import uar_to_dot, write_text

        return write_text(uar_to_dot(self.uar, launches_only=True,
                                     clusters=self.group_frames(names)), path)
