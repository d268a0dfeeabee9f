"""A study report's takeaway: one paragraph in plain words, from the run's comparison table.

Why: the verdict table is exact but dense (a rule, an interval, a machine property and a note per claim); a
reader first wants what came out: how many of the article's claims held, which did not and by how much, which
could not be judged here and why, and what the run measured all the same. Verdicts made with part of the article's
machine imitated are said apart, as the tallies count them (``tally``). Everything comes from comparison.csv, the
manifest and (when no claim got a number) summary.csv, so the same run gives the same bytes.

Also here, because report.py keeps under 400 lines: the check for a verdict whose cause is a hardware difference
an emulation left (``hardware_gap``).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from pglab.analysis import tally

#: how a verdict made under an emulated disk says so (``analysis.hardware.emulated_flush``): the disk, its latency
_FLUSH = re.compile(r"emulated flush (\S+) \(([\d.]+) ms\)")
_HDD = re.compile(r"hdd_(\d+)(k?)\Z")
_NOT_SETTLED = "not resolvable here"
_NOT_HERE = "not measurable here"


def num(value: float) -> str:
    """A value as a reader wants it: 2 decimals below 10, 1 below 100, none above (the intervals are no finer)."""
    a = abs(value)
    return f"{value:,.0f}" if a >= 100 else f"{value:.1f}" if a >= 10 else f"{value:.2f}"


def _has(value: Any) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def nothing_reproduced(comparison: pd.DataFrame) -> bool:
    """True when no claim got a number: a chart of published against reproduced values would be empty."""
    return "reproduced" not in comparison or not comparison["reproduced"].notna().any()


def disk_words(name: str) -> str:
    """'hdd_7200' -> 'a 7,200 rpm hard disk'."""
    m = _HDD.match(name)
    return f"a {int(m.group(1)) * (1000 if m.group(2) else 1):,} rpm hard disk" if m else f"a {name} disk"


def emulation_words(emulated: str) -> str:
    """What an emulation imitated, in words ('emulated flush hdd_15k (4 ms) on source, external, probe ...')."""
    m = _FLUSH.search(emulated)
    if m:
        return (f"the article's slower disk imitated (every disk flush made to take {m.group(2)} ms, as on "
                f"{disk_words(m.group(1))})")
    if "core per node" in emulated:
        return "each server given a CPU core of its own, as if on machines of their own"
    return f"part of the article's machine imitated ({emulated})"


def hardware_gap(row: Mapping[str, Any], manifest: Mapping[str, Any]) -> str:
    """Why a verdict made under an emulated disk may come from hardware, not PostgreSQL: the nodes whose flushes
    were not slowed kept this machine's disk, far faster than the article's. '' when every node was emulated."""
    if not _FLUSH.search(tally.emulated(row)):
        return ""
    disks = (manifest.get("emulation") or {}).get("disks") or {}
    slowed = {n for d in disks.values() for n in d.get("nodes") or []}
    nodes = [str(n.get("name")) for n in manifest.get("nodes") or [] if isinstance(n, dict)]
    kept = [n for n in nodes if n not in slowed]
    if not kept or not slowed:
        return ""
    levels = [lv for d in disks.values() for lv in (d.get("levels") or {}).values()]
    # the own disk's rate as the run measured it (what the report's "Emulated" line says), else as named
    own = max((lv.get("measured_ops_s") or 0 for lv in levels if not lv.get("latency_ms")), default=0) \
        or max((lv.get("own_ops_s") or 0 for lv in levels), default=0)
    named = max((lv.get("named_ops_s") or 0 for lv in levels if lv.get("latency_ms")), default=0)
    speed = (f" (about {own:,.0f} flushes a second, {own / named:,.0f} times the article's {named:,.0f})"
             if own and named else "")
    return (f"the slow disk was imitated on {_nodes(sorted(slowed))} only, and {_nodes(kept)} kept the machine's "
            f"own disk{speed}")


def _nodes(names: list[str]) -> str:
    return ("node " if len(names) == 1 else "nodes ") + ", ".join(names)


def _claim(row: Mapping[str, Any]) -> str:
    """A claim and its numbers, as the takeaway lists it."""
    got, pub, v = row.get("reproduced"), row.get("published"), row.get("verdict")
    words = ""
    if _has(got):
        if v == "did not hold" and _has(pub):
            words = f"{num(got)} here, not the article's {num(pub)}"
        else:
            words = f"{num(got)} here" + (f"; the article {num(pub)}" if _has(pub) else "")
        if v == _NOT_SETTLED and _has(row.get("ci_low")) and _has(row.get("ci_high")):
            words += (f"; its interval, {num(row['ci_low'])} to {num(row['ci_high'])}, is neither wholly inside "
                      "the rule's range nor wholly outside it")
    return f"&ldquo;{html.escape(str(row.get('claim', '')))}&rdquo;" + (f" ({words})" if words else "")


def _listed(rows: list[Mapping[str, Any]]) -> str:
    said = [_claim(r) for r in rows]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def _unique(rows: list[Mapping[str, Any]], key: str) -> list[str]:
    return list(dict.fromkeys(_text(r.get(key)) for r in rows if _text(r.get(key))))


def _unjudged(rows: list[Mapping[str, Any]], everything: bool, total: int) -> str:
    """The claims not measurable here, grouped by the machine property they depend on, and what was measured (a
    sentence of its own: the last words of a section)."""
    out = []
    by_property: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_property.setdefault(_text(r.get("depends_on")), []).append(r)
    for prop, group in by_property.items():
        n = len(group)
        lead = (f"none of the article's {total} claims could be judged" if everything and len(by_property) == 1
                else f"{n} could not be judged")
        they = "they depend" if n > 1 else "it depends"
        if "fidelity" in prop:  # no way the article differs: an imitation of its machine that did not come close
            off = sorted({abs(int(x)) for h in _unique(group, "here") for x in re.findall(r"\(([+-]\d+)%\)", h)})
            by = f", off by {off[0]}-{off[-1]}%" if len(off) > 1 else f", off by {off[0]}%" if off else ""
            out.append(f"{lead}: {they} on an emulation of the article's machine, and at {'their' if n > 1 else 'its'}"
                       f" own points the emulated run did not come within the allowed error of the article's own "
                       f"numbers{by} (the report's fidelity table)")
        elif prop:
            here, article = _unique(group, "here"), _unique(group, "article")
            heads = {h.split(":", 1)[0] for h in here}  # long details of one kind: what they share says it
            detail = ("here: " + " or ".join(map(html.escape, here)) if len(here) <= 2 and
                      all(len(h) <= 160 for h in here) else f"here: {html.escape(heads.pop())}" if len(heads) == 1
                      else "")
            article = [a for a in article if not a.lower().startswith("the article")]  # not "the article's table"
            if article and len(article) <= 3 and sum(map(len, article)) <= 240:
                detail += ("; " if detail else "") + f"the article: {' or '.join(map(html.escape, article))}"
            out.append(f"{lead}: {they} on {html.escape(prop)}, where this run differs from the article"
                       + (f" ({detail})" if detail else ""))
        else:
            out.append(f"{lead}: the run lacked what {'they need' if n > 1 else 'it needs'}")
    measured = [r for r in rows if _has(r.get("reproduced"))]
    if not measured:
        return "; ".join(out) + f"; nothing could be measured for {'any of them' if len(rows) > 1 else 'it'}"
    rest = len(rows) - len(measured)
    return ("; ".join(out) + ". Measured all the same, not judged: " + _listed(measured)
            + (f"; nothing could be measured for the other {rest}" if rest else ""))


def _section(rows: list[Mapping[str, Any]], manifest: Mapping[str, Any], everything: bool, total: int) -> str:
    """One group's verdicts (this machine as it is, or one emulation): counts, claims and numbers."""
    parts = []
    for verdict, word in (("held", "held"), ("did not hold", "did not hold"), (_NOT_SETTLED, "not settled yet")):
        group = [r for r in rows if r.get("verdict") == verdict]
        if not group:
            continue
        text = f"{len(group)} {word}: {_listed(group)}"
        gaps = list(dict.fromkeys(g for g in (hardware_gap(r, manifest) for r in group) if g))
        if verdict == "did not hold" and gaps:
            text += (" &mdash; but the machine differs where " + ("they depend" if len(group) > 1 else "it depends")
                     + f" on it ({html.escape('; '.join(gaps))}): a difference of hardware, not a refutation")
        parts.append(text)
    unjudged = [r for r in rows if r.get("verdict") == _NOT_HERE]
    if unjudged:
        parts.append(_unjudged(unjudged, everything and len(unjudged) == len(rows), total))
    return "; ".join(parts)


def measured_instead(summary: pd.DataFrame | None) -> str:
    """What a run measured when no claim got a number: each target against the baseline, per metric (a study whose
    summary.csv has ratios to a baseline: cloud_providers); '' for any other table."""
    cols = {"title", "target", "ratio_to_baseline", "ratio_low", "ratio_high"}
    if summary is None or not cols <= set(summary.columns):
        return ""
    base = summary[summary.ratio_low.isna() & (summary.ratio_to_baseline == 1)].target.unique()
    rows = summary[summary.ratio_low.notna() & (summary.target != "A/A")]
    if len(base) != 1 or not len(rows):
        return ""
    said = []
    for target, group in rows.groupby("target", sort=False):
        n = int(group["n"].max()) if "n" in group else 0
        each = [f"{html.escape(str(r.title))} {num(r.ratio_to_baseline)}x ({num(r.ratio_low)} to {num(r.ratio_high)}"
                + ("; no clear difference" if r.ratio_low <= 1 <= r.ratio_high else "") + ")"
                for r in group.itertuples()]
        said.append(f"{html.escape(str(target))} against {html.escape(str(base[0]))} (the median ratio"
                    + (f" over {n} blocks" if n else "") + ", with its 95% interval): " + ", ".join(each))
    return "What the run measured instead: " + "; ".join(said) + "."


def paragraph(comparison: pd.DataFrame, manifest: Mapping[str, Any], summary: pd.DataFrame | None = None) -> str:
    """The takeaway: the verdicts on this machine as it is, then under each emulation (counted apart), with the
    numbers; when nothing got a number, what the run measured instead."""
    rows = comparison.to_dict("records")
    if not rows:
        return ""
    runs = int(comparison["runs"].max()) if "runs" in comparison and comparison["runs"].notna().any() else 1
    groups: dict[str, list[Mapping[str, Any]]] = {"": []}  # this machine as it is first, then each emulation
    for r in rows:
        groups.setdefault(tally.emulated(r), []).append(r)
    groups = {k: v for k, v in groups.items() if v}
    sentences = []
    for emulated, group in groups.items():
        text = _section(group, manifest, len(groups) == 1, len(rows))
        if not emulated:
            lead = "On the machine it ran on, as it is" if len(groups) > 1 else ""
        else:
            lead = f"With {html.escape(emulation_words(emulated))}, counted apart"
        sentences.append((f"{lead}, {text}" if lead else text[:1].upper() + text[1:]) + ".")
    if nothing_reproduced(comparison):
        sentences.append(measured_instead(summary))
    head = (f"In short ({runs} runs, " if runs > 1 else "In short (one run, ") + f"{len(rows)} claims):"
    return f"<p class=\"takeaway\" id=\"takeaway\"><b>{head}</b> " + " ".join(s for s in sentences if s) + "</p>"


_SENTENCE_END = re.compile(r"(?<=[a-z)\]])\. ")


def first_sentence(paragraph_html: str) -> str:
    """The takeaway's first sentence after its "In short (...):" head: what came of the article's claims."""
    body = re.sub(r"^<p[^>]*><b>[^<]*</b>\s*", "", paragraph_html).removesuffix("</p>")
    return _SENTENCE_END.split(body, maxsplit=1)[0].rstrip(".") + "."


def scope_words(comparison: pd.DataFrame, manifest: Mapping[str, Any]) -> str:
    """Where the verdicts come from, in a few words: runs, sittings, the machine and its emulation."""
    runs = int(comparison["runs"].max()) if "runs" in comparison and comparison["runs"].notna().any() else 1
    scopes = [s for s in comparison.get("scope", pd.Series(dtype=str)).dropna().astype(str).unique() if s]
    said = (manifest.get("emulation") or {}).get("said") if isinstance(manifest.get("emulation"), dict) else None
    return ", ".join(x for x in (f"{runs} run{'s' * (runs != 1)}", scopes[0] if scopes else "",
                                 "the article's machine emulated" if said else "the machine as it is")
                     if x)


def claimed(comparison: pd.DataFrame) -> str:
    """What the article claimed, in its claims' own words (they carry its numbers: "local is about 1.4x on")."""
    return "; ".join(html.escape(str(c)) for c in comparison["claim"])


def glance(sides: Mapping[str, tuple[pd.DataFrame, Mapping[str, Any]]]) -> str:
    """The index's opening: per study what the article claimed, then one sentence of what came of it, and from
    what (a DBA asked to tell each article's outcome from the index alone could not say what it had claimed)."""
    items = []
    for study, (comparison, manifest) in sides.items():
        text = paragraph(comparison, manifest)
        if text:
            items.append(f"<li><a href=\"{html.escape(study)}.html\"><b>{html.escape(study)}</b></a> "
                         f"({html.escape(scope_words(comparison, manifest))}). <i>The article claimed:</i> "
                         f"{claimed(comparison)}. <i>pglab found:</i> {first_sentence(text)}</li>")
    return f"<h2>At a glance</h2><ul class=\"glance\">{''.join(items)}</ul>" if items else ""
