"""Code generation's decisions on a fused group, as records: where each fragment came from,
which fragments share their barriers, whether a wavefront runs the group, why post-fusion
optimizations were skipped.

:class:`~polyfuse.codegen.FusedKernel` carries them; :mod:`polyfuse.report` renders them after
the plan's own notes (``report.md``, ``plan.json``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Optional, Union


class Generated(enum.Enum):
    """What a code generation note records."""

    FRAGMENT = "fragment placed"
    PARTIAL = "fragment partly run"
    KEPT_APART = "fragment kept apart by code motion"
    CODE_MOTION = "fragments share their barriers"
    WAVEFRONT = "wavefront launch fusion"
    NO_WAVEFRONT = "wavefront launch fusion not applied"
    SKIPPED = "post-fusion optimizations skipped"


@dataclass(frozen=True)
class FragmentPlaced:
    """Fragment ``k`` (1-based) is launch ``launch`` of ``kernel`` (at ``loc``, file:line)."""

    kind: ClassVar[Generated] = Generated.FRAGMENT
    k: int
    launch: int
    kernel: str
    loc: Optional[str] = None


@dataclass(frozen=True)
class FragmentPartial:
    """Some work-items of fragment ``k``'s launch lie outside the re-indexing's range."""

    kind: ClassVar[Generated] = Generated.PARTIAL
    k: int
    launch: int


@dataclass(frozen=True)
class KeptApart:
    """Code motion left fragment ``k`` with its own barriers, ``why``."""

    kind: ClassVar[Generated] = Generated.KEPT_APART
    k: int
    why: str


@dataclass(frozen=True)
class CodeMotion:
    """Fragments ``fragments`` share ``barriers`` barriers, ``saved`` fewer than before."""

    kind: ClassVar[Generated] = Generated.CODE_MOTION
    fragments: tuple[int, ...]
    barriers: int
    saved: int


@dataclass(frozen=True)
class WavefrontLaunch:
    """The group runs one launch of ``slots`` fragments per wavefront step ``outer + inner``
    (wave kernel ``kernel``)."""

    kind: ClassVar[Generated] = Generated.WAVEFRONT
    slots: int
    outer: str
    inner: str
    kernel: str


@dataclass(frozen=True)
class NoWavefront:
    """The plan's wavefront schedule could not run as wavefront launches (``why``)."""

    kind: ClassVar[Generated] = Generated.NO_WAVEFRONT
    why: str


@dataclass(frozen=True)
class OptimizationsSkipped:
    """The post-fusion optimizations did not run on the kernel (``why``)."""

    kind: ClassVar[Generated] = Generated.SKIPPED
    why: str


KernelNote = Union[FragmentPlaced, FragmentPartial, KeptApart, CodeMotion, WavefrontLaunch,
                   NoWavefront, OptimizationsSkipped]

__all__ = ["CodeMotion", "FragmentPartial", "FragmentPlaced", "Generated", "KeptApart",
           "KernelNote", "NoWavefront", "OptimizationsSkipped", "WavefrontLaunch"]
