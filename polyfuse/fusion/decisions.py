"""Planning decisions as records: why a group starts, how each member joined it, why a merge
was refused (naming the blocking edge), why independent groups stay apart.

Planning produces these; :mod:`polyfuse.report` renders them (``report.md``, ``plan.json``, the
CLI).  Each record's ``kind`` says what was decided, its fields say on what, so that nothing
downstream has to read a decision back from its wording.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar, Optional, Union


class Decision(enum.Enum):
    """What a note on a fused group records."""

    START = "starts a group"
    P1_MERGE = "P1 merge onto a group"
    P1_STEP = "P1 merge in the exhaustive search"
    P1_REBUILT = "P1 chain rebuilt anchored on each consumer"
    COMMON_CONSUMER = "common consumer"
    P3_MERGE = "P3 merge of identical code"
    HETERO = "heterogeneous horizontal fusion"
    SEARCHED = "grouping found by the exhaustive search"
    WAVEFRONT_SCHEDULE = "wavefront schedule"
    CERTIFICATE_SPLIT = "group split by the legality certificate or code generation"


class Anchor(enum.Enum):
    """Whose grid a P1 merge runs on."""

    PRODUCER = "anchored on the producer"
    CONSUMER = "anchored on the consumer"
    REBUILT = "the group rebuilt anchored on each consumer"


@dataclass(frozen=True)
class EdgeRef:
    """A dependence a decision names: ``kind L<src>->L<dst> on array`` at ``width``."""

    kind: str
    src: int
    dst: int
    array: str
    width: str
    #: the global witness, shown with the edge where the decision does not state it already
    witness: Optional[str] = None


@dataclass(frozen=True)
class GroupStart:
    """Launch ``launch`` opens a group (why: :attr:`FusionPlan.starts`)."""

    kind: ClassVar[Decision] = Decision.START
    launch: int
    kernel: str


@dataclass(frozen=True)
class P1Merge:
    """Local fusion merged ``launch`` onto the group of ``producers`` over ``edges``."""

    kind: ClassVar[Decision] = Decision.P1_MERGE
    launch: int
    kernel: str
    producers: tuple[int, ...]
    anchor: Anchor
    barrier: bool
    edges: tuple[EdgeRef, ...]


@dataclass(frozen=True)
class P1Step:
    """The exhaustive search merged ``launch`` into its P1 chain."""

    kind: ClassVar[Decision] = Decision.P1_STEP
    launch: int
    kernel: str
    anchor: Anchor
    barrier: bool


@dataclass(frozen=True)
class P1Rebuilt:
    """The exhaustive search's chain ``members``, rebuilt consumer first."""

    kind: ClassVar[Decision] = Decision.P1_REBUILT
    members: tuple[int, ...]


@dataclass(frozen=True)
class CommonConsumer:
    """``launch`` consumes several groups, which were fused together with it."""

    kind: ClassVar[Decision] = Decision.COMMON_CONSUMER
    launch: int


@dataclass(frozen=True)
class P3Merge:
    """P3 placed the copies ``joined`` with ``into`` (``mode``: vertical or horizontal); ``step``
    is the common launch step where the greedy planner states it."""

    kind: ClassVar[Decision] = Decision.P3_MERGE
    joined: tuple[int, ...]
    into: tuple[int, ...]
    mode: str
    step: Optional[int] = None


@dataclass(frozen=True)
class HeteroPlacement:
    """Heterogeneous horizontal fusion placed ``placed`` beside ``beside`` at ``step``."""

    kind: ClassVar[Decision] = Decision.HETERO
    placed: tuple[int, ...]
    beside: tuple[int, ...]
    step: int


@dataclass(frozen=True)
class Searched:
    """The exhaustive search's grouping: ``cost`` launches where greedy planning gave
    ``greedy``."""

    kind: ClassVar[Decision] = Decision.SEARCHED
    cost: int
    greedy: int


@dataclass(frozen=True)
class WavefrontSchedule:
    """Global fusion found the wavefront ``front`` (``steps`` wavefront steps, when counted)."""

    kind: ClassVar[Decision] = Decision.WAVEFRONT_SCHEDULE
    front: str
    steps: str = ""


@dataclass(frozen=True)
class CertificateSplit:
    """Group ``members`` was refused (its ``problems``) by the legality certificate or, where
    ``refused`` says so, by code generation; each member runs alone."""

    kind: ClassVar[Decision] = Decision.CERTIFICATE_SPLIT
    members: tuple[int, ...]
    problems: tuple[str, ...]
    refused: Refused = field(default_factory=lambda: Refused.CERTIFICATE)


GroupNote = Union[GroupStart, P1Merge, P1Step, P1Rebuilt, CommonConsumer, P3Merge,
                  HeteroPlacement, Searched, WavefrontSchedule, CertificateSplit]


class Refused(enum.Enum):
    """Why an edge between launches was not fused (``report.md``'s *why* column)."""

    GLOBAL = "global dependence (P2)"
    HOST_LOOPS = "different host loops enclose the launches (only one loop body is fused)"
    PLACEMENT = "placement"
    NO_REINDEXING = "no consistent re-indexing"
    PARTIAL_GROUPS = "partial work-groups"
    PRODUCERS = "its producers' group could not take it"
    ENDPOINTS = "endpoints placed in different groups"
    SEARCHED = "left apart by the exhaustive search"
    CERTIFICATE = "refused by the legality certificate"
    CODEGEN = "code generation cannot produce the fused group"
    SLOWER = "the fused kernel is slower than its launches apart"


@dataclass(frozen=True)
class Refusal:
    """Why a merge was refused: its ``kind``, the short ``summary`` the report's table shows
    and the ``detail`` that follows it (a witness, the failed check)."""

    kind: Refused
    summary: str
    detail: str = ""


class StartCause(enum.Enum):
    """Why a launch opens a group rather than joining its producers'."""

    BLOCKED = "blocked by an edge"
    CROSS_LOOP = "dependences cross host-loop iterations"
    JOINED_LATER = "independent, placed with later launches"
    JOINED = "independent, later launches joined it"
    ALONE = "independent, alone"


class P3Verdict(enum.Enum):
    """Why P3 did not join a group with another at its launch step."""

    LOOP_BODY = "different host-loop body"
    CODE = "P3 not identical (different code)"
    ORCHESTRATION = "same code but no common orchestration (grids, placement or re-indexing)"


@dataclass(frozen=True)
class StartReason:
    """Why a launch starts a group (:func:`polyfuse.fusion.explain.start_reasons`): the
    blocking ``edge`` and its ``refusal`` (``BLOCKED``), the crossing ``edge``
    (``CROSS_LOOP``), the launches ``joined`` with it, or, alone, its ``step`` and P3's
    verdict on each other group there (``others``: members, verdict)."""

    cause: StartCause
    edge: Optional[EdgeRef] = None
    refusal: Optional[Refusal] = None
    joined: tuple[int, ...] = ()
    step: int = 0
    others: tuple[tuple[tuple[int, ...], P3Verdict], ...] = ()


class Apart(enum.Enum):
    """Why two independent groups were not placed side by side."""

    INCOMPATIBLE = "incompatible launches"
    PLACEMENT = "the fused launch would run at the later one's place"
    NO_GRID = "no concatenated grid"
    BREAKS = "the fused launch would break a dependence or barrier placement"
    NOT_IN_VARIANT = "not fused in this variant"


@dataclass(frozen=True)
class ApartReason:
    """Independent groups ``a`` and ``b`` (members) left apart, and why."""

    a: tuple[int, ...]
    b: tuple[int, ...]
    kind: Apart
    detail: str = ""


__all__ = ["Anchor", "Apart", "ApartReason", "CertificateSplit", "CommonConsumer", "Decision",
           "EdgeRef", "GroupNote", "GroupStart", "HeteroPlacement", "P1Merge", "P1Rebuilt",
           "P1Step", "P3Merge", "P3Verdict", "Refusal", "Refused", "Searched", "StartCause",
           "StartReason", "WavefrontSchedule"]
