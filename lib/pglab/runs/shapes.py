"""The shapes of a run's records: pydantic models of ``manifest.json`` and each point's ``meta.json``, and the types
they share with ``campaign.json`` (``pglab.runs.campaign``). ``pglab.runs.record`` checks every record against them.

Why typed this far: every field the ledger (``pglab.ledger.rows``) or an analysis reads is a number, a string or
a flag the reader relies on, and a hand edit that puts a string, a negative duration or a JSON ``Infinity`` there
must be refused in one line naming the key, not crash a reader (``math.ceil(inf)``) or turn a figure silently
wrong. Numbers are strict (``"4.0"`` and ``true`` are no numbers, ``2.0`` is no count) and finite; what no reader
relies on stays open (``extra="allow"``), so every record pglab ever wrote still passes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, AllowInfNan, BaseModel, ConfigDict, Field, Strict

from pglab.runs.formats import FORMAT_VERSION

#: a plain id: one path component that names nothing but itself (no '/', no '..', no NUL, no newline)
PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: what a run's ``status`` can be (docs/running.md, "A run's status"): ``running`` until it ends
RunStatus = Literal["running", "complete", "partial", "failed", "interrupted", "killed", "cleanup_failed"]
#: what a point's ``status`` can be (``runs.store.Point``; ``interrupted``: set aside by a resume; ``beside_a_load``:
#: set aside, measured while another load took its share, and measured again, ``runs.sweep``)
PointStatus = Literal["running", "ok", "failed", "inconsistent", "interrupted", "beside_a_load"]

Count = Annotated[int, Strict(), Field(ge=0)]  # blocks, points, exit counts: a whole number, never 2.0 or "2"
PositiveCount = Annotated[int, Strict(), Field(gt=0)]
Integer = Annotated[int, Strict()]  # a seed, an exit code
Number = Annotated[float, Strict(), AllowInfNan(False)]  # finite; an int is a number too
Seconds = Annotated[float, Strict(), AllowInfNan(False), Field(ge=0)]  # a duration or a share: finite, not negative
Flag = Annotated[bool, Strict()]  # true or false, not "yes" or 1


def plain_id(value: str) -> str:
    """``value`` if it is a plain id (letters, digits, '.', '_', '-'; no '..'), else ValueError."""
    if not PLAIN_ID.fullmatch(value) or ".." in value:
        raise ValueError(f"{value!r} is not a plain id (letters, digits, '.', '_' and '-', no '..')")
    return value


PlainId = Annotated[str, AfterValidator(plain_id)]


def format_version(value: int) -> int:
    """``value`` unless it is newer than this pglab reads: a record from newer code is refused, never misread."""
    if value > FORMAT_VERSION:
        raise ValueError(f"format {value} is newer than this pglab reads (up to {FORMAT_VERSION}): update pglab")
    return value


FormatVersion = Annotated[PositiveCount, AfterValidator(format_version)]


class _Open(BaseModel):
    """Extra keys allowed: each manifest format added some, and unknown ones are reported, not refused."""

    model_config = ConfigDict(extra="allow")
    WHAT: ClassVar[str] = "run manifest"  # what a message calls a record that does not fit
    FINITE: ClassVar[bool] = True  # no NaN or Infinity anywhere in it (``record.check``)


class Bookkeeping(_Open):
    """What ``pglab cleanup`` reads of a run: its status, its process and what it started. Lenient (any status,
    any number): a run killed early, or a hand edit elsewhere in it, must not keep its servers running."""

    FINITE: ClassVar[bool] = False
    status: str
    study: PlainId | None = None
    run_id: PlainId | None = None
    pid: int | None = None
    control: dict[str, Any] | None = None
    inventory: str | None = None
    nodes: list[dict[str, Any]] = []
    processes: list[dict[str, Any]] = []
    workspaces: dict[str, str] = {}
    local_passfiles: dict[str, str] = {}
    boot_ids: dict[str, str | None] = {}
    leftovers: list[dict[str, Any]] = []


class Node(_Open):
    """A server the run started (``Node.describe``): what placement and cleanup read of it."""

    name: str
    host: str
    role: str
    port: int


class Topology(_Open):
    client: dict[str, Any] | None = None
    clients: dict[str, dict[str, Any]] | None = None


class HostFacts(_Open):
    """A host's facts (``Host.facts``): the ledger's machine key and ``pglab compare`` read these."""

    cores: PositiveCount | None = None
    mem_total_kb: Count | None = None
    cpu_model: str | None = None
    kernel: str | None = None
    os: str | None = None
    disk_tmp: str | None = None
    hostname: str | Integer | None = None  # ``Host.facts`` reads a hostname of digits as a number


class Adaptive(_Open):
    """A first look's record (``workloads.adaptive``): counts of blocks, and why the adding stopped."""

    added: list[PlainId] = []  # the points of added blocks
    first_look: Count | None = None
    blocks_added: Count | None = None
    blocks_finished: Count | None = None
    cut_short: Count | None = None
    max_blocks: Count | None = None
    stopped: str | None = None
    why: str | None = None


class Plan(_Open):
    points: list[PlainId] = []  # point folders: paths under the run folder
    adaptive: Adaptive | None = None
    baseline: str | None = None  # the configuration every block ran twice (the A/A): the baseline's one place
    blocks: Count | None = None  # blocks planned
    seed: Integer | None = None


class Parameters(_Open):
    """What is read of the parameters outside the study's own model: the ledger's seed and blocks, and the warm-up
    a format-1 point takes from its run (``formats.meta``)."""

    seed: Integer | None = None
    blocks: Count | None = None
    warmup_s: Seconds | None = None


class Points(_Open):
    """The manifest's tally of points (``RunStore``): what the ledger's ``points_total``/``points_failed`` hold."""

    total: Count | None = None
    ok: Count | None = None
    failed: Count | None = None


class CpuShare(_Open):
    """One attempt's CPU of pglab itself (``pglab_cpu``): what the ledger and the run summary add up."""

    cores: PositiveCount | None = None
    process_cpu_s: Seconds | None = None
    wall_s: Seconds | None = None
    share: Seconds | None = None


class PostgresBuild(_Open):
    """The build a run's server came from (``preflight.build_record``): the ledger's version and family."""

    version: str | None = None
    family: str | None = None
    major: Count | None = None


class RunRecord(Bookkeeping):
    """What the analyses, ``compare``, ``spread``, the ledger and resuming read of a run."""

    FINITE: ClassVar[bool] = True
    format_version: FormatVersion = 1
    status: RunStatus  # type: ignore[assignment]  (narrower than cleanup's)
    study: PlainId
    run_id: PlainId
    profile: str | None = None
    git_revision: str | None = None
    start: str | None = None
    end: str | None = None
    parameters: Parameters = Parameters()
    plan: Plan = Plan()
    nodes: list[Node] = []  # type: ignore[assignment]  (narrower than cleanup's)
    topology: Topology = Topology()
    hosts: dict[str, HostFacts] = {}
    tools: dict[str, Any] = {}
    packages: dict[str, Any] = {}
    points: Points = Points()
    systems: dict[str, dict[str, Any]] = {}
    resumes: list[dict[str, Any]] = []
    failed_points: list[str] = []
    wall_s: list[Seconds] | None = None  # each attempt's wall time (``runs.opening``)
    collect_s: list[Seconds] | None = None
    sweep_s: list[Seconds] | None = None
    measured_s: Seconds | None = None
    measurement_share: Seconds | None = None
    pglab_cpu: list[CpuShare] = []
    postgres_build: PostgresBuild | None = None
    # the article's machine imitated (pglab.nodes.emulation, Deployment.emulated): levels asked and measured
    emulation: dict[str, Any] = {}


class Command(_Open):
    """A command a point ran (``Point.record``): how long it took and how it exited."""

    duration_s: Seconds | None = None
    exit_code: Integer | None = None
    host: str | None = None


class Timing(_Open):
    """logical_replication's timing of a point: what its analysis reads of catching up."""

    catchup_s: Seconds | None = None
    confirmed_s: Seconds | None = None
    run_s: Seconds | None = None
    poll_s: Seconds | None = None
    slowest_check_s: Seconds | None = None
    caught_up: Flag | None = None
    checks: Count | None = None
    lag_samples: Count | None = None


class PointMeta(_Open):
    """A point's ``meta.json`` (``runs.store.Point``): what the sweep, resuming and the analyses read of it.

    A planned point carries its place in the design (``block``, ``group``, ``config``, ``copy`` and the study's
    factors, such as ``clients`` and ``kind``); a set-up step (``fsync``, ``setup``) has none of them."""

    WHAT: ClassVar[str] = "point's meta.json"

    format_version: FormatVersion = 1
    point: PlainId | None = None  # its folder's name (format 1 filled from the folder when absent)
    status: PointStatus
    start: str | None = None
    end: str | None = None
    error: str | None = None
    set_aside: str | None = None
    block: Count | None = None
    group: str | None = None
    config: str | None = None
    copy_: PositiveCount | None = Field(None, alias="copy")  # 2: the block's second baseline (the A/A)
    kind: str | None = None
    clients: Count | None = None
    flush: str | None = None  # an emulated flush ladder's level the point ran at (its label) ...
    flush_ms: Seconds | None = None  # ... and its latency, 0 for this machine's own disk
    warmup_s: Seconds | None = None  # the warm-up the analysis cuts from -P 1 progress
    steal: Number | None = None
    steal_flag: Flag | None = None
    load1: dict[str, Number | None] = {}
    measure_s: Seconds | None = None
    measured_s: Seconds | None = None
    setup_s: Seconds | None = None
    reset_catchup_s: Seconds | None = None
    timing: Timing | None = None
    commands: dict[str, Command] = Field(default_factory=dict)
