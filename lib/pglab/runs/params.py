"""Study parameters: one YAML per study with profiles, validated whole before anything starts.

``params/<study>.yaml``::

    profile: quick            # the profile `make repro` / `dvc repro` runs
    inventory: params/hosts.yaml
    profiles:
      smoke: {...}            # seconds; CI, nbval and the notebook's defaults
      quick: {...}            # minutes on a 2-core machine
      paper: {...}            # the article's scale, for real hardware

papermill only warns about unknown parameters, so everything goes through a pydantic model with
``extra="forbid"``: an unknown key, a wrong type or an out-of-range value is reported with the
key's full path, all problems at once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pglab import emulated as emulation
from pglab import server_settings
from pglab.errors import ParameterError
from pglab.runs.bounds import Checked
from pglab.userfiles import kind, setting_problems, short, yaml_mapping

M = TypeVar("M", bound=BaseModel)
BUILD_NAME = re.compile(r"[0-9]{1,2}|[a-z]+-[0-9]{1,2}")  # "18", "embedded-18" (pglab.hosts.builds.resolve)


def build_name(v: Any) -> Any:
    """A field naming a PostgreSQL build: its shape only (the analysis reads it without the host layer)."""
    if v is not None and not BUILD_NAME.fullmatch(str(v)):
        raise ValueError("a PostgreSQL major such as 18, or a build id of params/postgres_builds.yaml such as "
                         "embedded-18")
    return v


def unique_items(v: list) -> list:
    """For list fields whose entries must not repeat (levels, systems, clients)."""
    if len(set(v)) != len(v):
        raise ValueError(f"duplicates in {v}")
    return v


def not_reserved(settings: dict, reserved: set[str], owner: str) -> dict:
    """Server settings a study (``owner``) sets itself must not come from a profile; every name and value must
    be written to postgresql.conf as itself (``userfiles.setting_problems``, the rules ``nodes.conf`` writes by:
    no newline, NUL or other control character)."""
    bad = setting_problems(settings) + server_settings.owned_problems(settings)
    if bad:
        raise ValueError("; ".join(bad))
    clash = sorted(reserved & {str(k).lower() for k in settings})  # the server reads PORT as port
    if clash:
        raise ValueError(f"{', '.join(clash)} are set by {owner}")
    return settings


class EmulateParams(Checked):
    """``emulate:`` the article's machine imitated on this one (``pglab.nodes.emulation``; docs/emulation.md)."""

    # flush levels: a preset (hdd_7200 ...), milliseconds, or own (this machine's disk); a study with a flush
    # ladder (synchronous_commit) measures each in turn and judges its claims at the last; the others take one
    flush_latency_ms: list[str | float] = Field(default_factory=list)
    flush_nodes: list[str] | None = Field(None, min_length=1)  # the nodes whose flushes are emulated; None: every
    # node; each a name of the study's nodes (``StudyParams.node_names``)
    one_disk: bool = False  # the emulated nodes of a host share one disk (flush one at a time between them)
    core_per_node: bool = False  # each node, with the clients run against it from its host, on a core of its own
    # a share of each node's CPU time (core_per_node) or of its host's (a cgroup quota, 0.1-1), or "calibrate": the
    # share that matches the study's calibration point of the article, searched before the measured blocks
    cpu_share: float | str | None = None
    # each node a machine of its own, scaled down: a CPU group per node at cpu_share of one core, not pinned (for
    # more nodes than cores: streaming_scale_out's 5, logical_replication's provider and subscriber)
    machine_per_node: bool = False

    @field_validator("cpu_share", mode="before")
    @classmethod
    def _share(cls, v: Any) -> float | str | None:
        if v is None or v == "calibrate":
            return v
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.1 <= v <= 1.0:
            raise ValueError("give 'calibrate' or a share of a core from 0.1 to 1 (a cgroup quota)")
        return float(v)

    @model_validator(mode="after")
    def _machines(self) -> EmulateParams:
        if self.machine_per_node and self.cpu_share is None:
            raise ValueError("machine_per_node: give cpu_share too (a machine per node is a CPU share of one core)")
        return self

    @field_validator("flush_latency_ms")
    @classmethod
    def _levels(cls, v: list[str | float]) -> list[str | float]:
        for level in v:
            emulation.latency_ms(level)  # a ValueError names the bad one
        return unique_items(v)

    def spec(self) -> emulation.Emulation:
        return emulation.Emulation(tuple(self.flush_latency_ms), tuple(self.flush_nodes) if self.flush_nodes
                                   is not None else None, self.one_disk, self.core_per_node, self.cpu_share,
                                   self.machine_per_node)


class StudyParams(Checked):
    """What every study's parameter model checks alike: list fields whose entries must not repeat
    (``UNIQUE``), and server settings the study sets itself (``RESERVED``, set by ``RESERVED_BY``),
    each reported at its own key as a field validator would."""

    UNIQUE: ClassVar[tuple[str, ...]] = ()
    # a campaign: this many independent runs, each on fresh servers with a seed drawn for it (pglab.app.campaign);
    # a verdict over runs needs 3 (pglab.analysis.over_runs)
    runs: PositiveInt = 1
    # the article's disk flush or a core per node, imitated (``EmulateParams``); None: this machine as it is
    emulate: EmulateParams | None = None
    # the servers' PostgreSQL build (params/postgres_builds.yaml): a major 13-18 (Debian's 15, else the registry
    # build of that major) or a build id such as embedded-15; None: each host's own bindir (params/hosts.yaml)
    postgres: str | int | None = None
    # settings that run a command or load code (archive_command, shared_preload_libraries...; pglab.server_settings)
    # that server_settings may give: refused unless named here, and then recorded in the run record and the report
    allow_command_settings: list[str] = Field(default_factory=list)
    FLUSH_LADDER: ClassVar[bool] = False  # whether the study measures several flush levels in one run
    RESERVED: ClassVar[set[str]] = set()
    BUILDS: ClassVar[tuple[str, ...]] = ("postgres",)  # fields that name a PostgreSQL build (builds.resolve)
    RESERVED_BY: ClassVar[str] = "the study itself"

    @field_validator("*")
    @classmethod
    def _shared_rules(cls, v: Any, info: ValidationInfo) -> Any:
        if info.field_name == "allow_command_settings":
            return unique_items(server_settings.allowed_names(v))
        if info.field_name in cls.UNIQUE and v is not None:
            return unique_items(v)
        if info.field_name == "server_settings":
            return not_reserved(v, cls.RESERVED, cls.RESERVED_BY)
        if info.field_name in cls.BUILDS:
            return build_name(v)  # which builds exist: runs.preflight.builds_named, before anything starts
        if info.field_name == "emulate" and v is not None and len(v.flush_latency_ms) > 1 and not cls.FLUSH_LADDER:
            raise ValueError(f"flush_latency_ms {v.flush_latency_ms}: this study measures one flush level a run "
                             "(a ladder of levels is synchronous_commit's); give one")
        return v

    @model_validator(mode="after")
    def _owned_by_the_study(self) -> StudyParams:
        bad = server_settings.code_problems(self.given_settings(), self.allow_command_settings)
        nodes = self.node_names()
        flush = self.emulate.flush_nodes if self.emulate else None
        if flush is not None and nodes is not None:
            bad += [f"emulate.flush_nodes: {n!r} is not a node of this study (its nodes: {', '.join(nodes)})"
                    for n in flush if n not in nodes]
        if bad:
            raise ValueError("; ".join(bad))
        return self

    def given_settings(self) -> dict[str, dict[str, Any]]:
        """{where in the profile: server settings it gives} (what ``pglab.runs.preflight`` checks by the build)."""
        return {"server_settings": getattr(self, "server_settings", None) or {}}

    def node_names(self) -> list[str] | None:
        """The names of the servers the study starts (what ``emulate.flush_nodes`` may name); None: not known."""
        return None

    def emulation(self) -> emulation.Emulation | None:
        return self.emulate.spec() if self.emulate else None


class AdaptiveParams(StudyParams):
    """A study whose collect takes a first look (``pglab.workloads.adaptive``): after ``blocks``, blocks of only
    what an open claim needs are added, up to ``max_blocks`` in all and none that would end past ``budget_s``
    seconds of sweep. ``max_blocks`` None: the planned blocks only, and then ``budget_s`` is refused: it limits
    only the adding, so alone it would be accepted and do nothing."""

    blocks: PositiveInt = 6  # blocks planned, and the first look's (>= 6: a 95% interval)
    max_blocks: PositiveInt | None = None
    budget_s: float | None = Field(None, gt=0)

    @field_validator("budget_s")
    @classmethod
    def _budget_needs_max_blocks(cls, v: float | None, info: ValidationInfo) -> float | None:
        if v is not None and "max_blocks" in info.data and info.data["max_blocks"] is None:
            raise ValueError(f"budget_s={v:g} is set without max_blocks: the budget only limits the blocks a "
                             "first look adds, up to max_blocks, so alone it would do nothing; set max_blocks "
                             "too, or drop budget_s")
        return v

    @model_validator(mode="after")
    def _first_look(self) -> AdaptiveParams:
        if self.max_blocks is not None and self.max_blocks < self.blocks:
            raise ValueError(f"max_blocks={self.max_blocks} is below blocks={self.blocks} (the first look)")
        return self


#: the tags pydantic puts after a union member's location ("flush_latency_ms.0.str")
UNION_MEMBERS = {"str", "int", "float", "bool", "list", "dict", "none", "literal"}


def validate(model: type[M], data: dict[str, Any], source: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems: dict[str, tuple[list[str], str]] = {}  # key -> (messages, what was given)
        for e in exc.errors():
            loc = [str(p) for p in e["loc"]]
            if loc and loc[-1] in UNION_MEMBERS:  # one value that is none of a union's types: one problem
                loc = loc[:-1]
            key = ".".join(loc)
            got = f" (got {short(e['input'])})" if e["type"] != "missing" and not isinstance(e["input"], dict) else ""
            problems.setdefault(key, ([], got))[0].append(short(e["msg"], 500))
        raise ParameterError(source, [f"{k}: {' or '.join(dict.fromkeys(m))}{got}" if k else
                                      f"{' or '.join(dict.fromkeys(m))}{got}"
                                      for k, (m, got) in problems.items()]) from None


def load_study_file(path: str | Path) -> dict[str, Any]:
    """A study's params file, its shape checked (a bad file is one message naming it, its line and column)."""
    data = yaml_mapping(path, "a study's params file (profile, inventory, profiles, slo)")
    # slo: `pglab slo`'s defaults for the study, checked there (pglab.app.slo_cli); no collect reads it
    problems = [f"{k}: unknown top-level key (expected profile, inventory, profiles, slo)"
                for k in data if k not in ("profile", "inventory", "profiles", "slo")]
    for key in ("profile", "inventory"):
        if key in data and not isinstance(data[key], str):
            problems.append(f"{key}: a YAML {kind(data[key])} where a name belongs (got {data[key]!r})")
    profiles = data.get("profiles")
    if not isinstance(profiles, dict) or not profiles:
        problems.append("profiles: missing or empty" if not profiles else
                        f"profiles: a YAML {kind(profiles)} where a mapping of profile names belongs")
    else:
        problems += [f"profiles.{name}: a YAML {kind(body)} where a mapping of parameters belongs"
                     for name, body in profiles.items() if body is not None and not isinstance(body, dict)]
    if problems:
        raise ParameterError(str(path), problems)
    return data


def profile_values(path: str | Path, profile: str | None = None) -> tuple[str, dict[str, Any], str | None]:
    """(profile name, its raw values, inventory path) from a study's params file."""
    data = load_study_file(path)
    name = profile or data.get("profile") or "quick"
    if name not in data["profiles"]:
        raise ParameterError(str(path), [f"profile: {name!r} is not one of {sorted(data['profiles'])}"])
    return name, dict(data["profiles"][name] or {}), data.get("inventory")
