"""Strict types and upper bounds for every parameter model: a params file is input, not a program.

Why: pydantic's lax mode reads ``runs: "3"`` and ``runs: true`` as 3 and 1, and a count without a ceiling lets
``runs: 1000000000`` pass the preflight and then run for years. Every model of a params file derives from
``Checked``: strict types (no bool for a number, no string for an int), unknown keys refused, and each count
and duration held under the largest value a real study could need (``LIMITS``, by the field's name, so that a
new field is bounded the day it is added). A value past its bound is a ParameterError naming the key.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

DAY_S = 86_400
#: (field-name pattern, the largest value, what it is): the first that matches bounds the field
LIMITS: tuple[tuple[re.Pattern[str], float, str], ...] = tuple((re.compile(p), m, w) for p, m, w in (
    (r"seed", 2**63 - 1, "a 64-bit seed"),
    (r"runs", 100, "runs in a campaign"),
    (r"(.*_)?blocks", 1_000, "blocks"),
    (r".*_ms", 3_600_000, "an hour in milliseconds"),
    (r"duration_s|chunk_interval_s", 366 * DAY_S, "a year of simulated time"),
    (r"(.*_)?seconds|.*_s", DAY_S, "a day in seconds"),
    (r"(.*_)?clients|jobs|.*_threads", 10_000, "clients"),
    (r"scale", 100_000, "pgbench scale (1.5 TB)"),
    (r".*", 100_000_000, "a count"),
))


def limit(name: str) -> tuple[float, str]:
    """The bound of the field ``name`` and what it is."""
    for pattern, most, words in LIMITS:
        if pattern.fullmatch(name):
            return most, words
    return LIMITS[-1][1], LIMITS[-1][2]  # pragma: no cover - the last pattern matches every name


def check(name: str, value: Any) -> Any:
    """``value`` (a number, or a list of them) if within its field's bound; ValueError otherwise."""
    items = value if isinstance(value, list) else [value]
    for x in items:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            continue
        if isinstance(x, float) and not math.isfinite(x):
            raise ValueError(f"{x!r} is not a finite number")
        most, words = limit(name)
        if x > most:
            raise ValueError(f"{x:,} is past the largest {name} a study could need ({most:,.0f}: {words}); "
                             "is it a typo?")
    return value


class Checked(BaseModel):
    """A params model: strict types, no unknown key, every number under its bound."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*")
    @classmethod
    def _bounded(cls, v: Any, info: ValidationInfo) -> Any:
        return check(info.field_name or "", v)
