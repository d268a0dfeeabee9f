"""User text made inert before it is put into markdown: what a params file, an inventory, a server (settings,
versions, error text) or a tool's output says is shown as the characters it holds, never as markup.

Why backslash escapes, not code spans: CommonMark lets any ASCII punctuation be backslash-escaped, and every
renderer these notebooks meet (Jupyter's marked, mistune in the reports, markdown-it, GitHub for the docs pages)
then shows the character itself, in a paragraph, a list item and a GFM table cell (an escaped ``|`` does not
split the cell). A code span cannot hold every value (a backtick needs a longer fence, a pipe still splits a
table cell) and shows prose in monospace. Only the characters that can start markup where the value lands are
escaped, so the generated docs pages stay readable as plain markdown: ``1.25`` and ``pg_test_fsync (local)``
keep their looks, while an image, a link, an autolink, raw HTML, an entity, emphasis, a code span, a table pipe,
strikethrough or math cannot form. A line break would end the list item a value sits in: one space instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from pglab.analysis.stats import CONFIDENCE, interval_words

#: characters that open or close inline markup anywhere in a line (``&`` an entity, ``$`` Jupyter's math); an
#: underscore between two letters or digits never does (CommonMark), so ``pg_test_fsync`` is left as it is
_INLINE = re.compile(r"([\\`*\[\]<>!&|~$@]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
#: what GFM and mistune turn into a link without any bracket: ``http://``, ``ftp://``, ``www.``
_AUTOLINK = re.compile(r"(?<=[A-Za-z0-9])(:)(?=//)|(?<=\b[wW]{3})(\.)")
#: what starts a block at the beginning of a line (a heading, a list item, a setext underline or a rule), not
#: what merely starts with the same character (``#1``, ``-3.5``, ``1.25``)
_BLOCK = re.compile(r"^(\s*)(?:(#{1,6}|[-+=]+)|(\d{1,9})([.)]))(?=\s|$)")
_NEWLINE = re.compile(r"\s*(?:\r\n|\r|\n)\s*")


def escape_text(value: object) -> str:
    """``value`` as markdown that renders as exactly its text (a line break as one space)."""
    text = _NEWLINE.sub(" ", str(value))
    text = _INLINE.sub(r"\\\1", text)
    text = _AUTOLINK.sub(lambda m: "\\" + m.group(0), text)
    return _BLOCK.sub(lambda m: m.group(1) + ("\\" + m.group(2) if m.group(2) else m.group(3) + "\\" + m.group(4)),
                      text, count=1)


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _num(value: object) -> str:
    x = _number(value)
    return "-" if math.isnan(x) else f"{x:.3g}"


def verdict_line(row: Mapping[str, object]) -> str:
    """One claim of comparison.csv as a markdown list item, as the notebooks and docs pages list it: the verdict,
    the numbers, the rule and the machine property beside it, then the note. Every field is escaped: notes and
    properties name targets, providers and hosts as the user wrote them (here, not in ``claims``: a collect stage
    imports that, and an edit to how text is shown must not re-measure)."""
    t, conf, shown = escape_text, _number(row.get("confidence")), ""
    if not math.isnan(_number(row.get("reproduced"))):
        words = interval_words(str(row.get("ci_method")), count(row),
                               confidence=CONFIDENCE if math.isnan(conf) else conf)
        shown = (f"reproduced {_num(row['reproduced'])} [{_num(row.get('ci_low'))}, {_num(row.get('ci_high'))}] "
                 f"({words}); ")
    prop = row.get("depends_on")
    machine = (f" Depends on: {t(prop)}; here {t(row.get('here'))}; the article: "
               f"{t(row.get('article') or 'not given')}." if isinstance(prop, str) and prop else "")
    under = row.get("emulated")
    machine += f" Made under an emulation: {t(under)}." if isinstance(under, str) and under else ""
    note = row.get("note")
    settle = row.get("settle")
    note = "; ".join(x for x in (note, f"to settle it: {settle}" if isinstance(settle, str) and settle else "")
                     if isinstance(x, str) and x)
    return (f"- **{t(row['claim'])}**: *{t(row['verdict'])}*. Article {_num(row.get('published'))}; {shown}"
            f"rule: {t(row.get('rule'))}.{machine}" + (f" ({t(note)})" if isinstance(note, str) and note else ""))


def count(row: Mapping[str, object]) -> float:
    """What an interval is over: runs for a verdict over runs (``over_runs``), else blocks."""
    key = "runs" if row.get("ci_method") == "t over runs" else "blocks"
    return _number(row.get(key))
