"""One finding per cause.

A template line inside a loop renders as many lines as the loop runs: one misspelt keyword in
the backend loop of an Ingress library is 2,000 identical findings at 2,000 Ingresses, and
HAProxy reports the same word again. A reader wants one finding that says where the cause is
and how far it reaches. Two steps, after finalization has filtered, sorted and de-duplicated:

1. **Same rule, same template line** — findings of one rule, phase and severity whose rendered
   lines all come from one template line (and that name the same object, if any) become one
   diagnostic: the first in report order, with :class:`~controller.diagnostics.Occurrences`
   carrying how many rendered lines it stands for and the first few of them.
   Outputs not rendered because of one root cause (``E1008 … root cause: …``) are one
   finding too, listing the outputs.
2. **Schema and HAProxy about the same words** — our schema stage and ``haproxy -c`` often
   see the same mistake on the same rendered line (``unknown keyword 'balanse'``). Two such
   findings — same rendered line, a quoted word in common — are one: the more severe stays
   (on a tie, HAProxy's error — the verdict — or our warning, which names the option and
   carries a fix), with the schema's columns, and the lines of both are counted. HAProxy prints some warnings without a line (``unexpected
   character 'x' after the timer value '2sx'``); such a message joins the schema finding that
   quotes the same distinctive word (one with a digit or punctuation in it).

Nothing here changes a verdict: a merged finding keeps the highest severity of its parts, and
protected findings (HAProxy's errors) are never dropped in favour of a weaker one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from controller.diagnostics import Diagnostic, Location, Occurrences, Phase, Severity

__all__ = ["SHOWN_OCCURRENCES", "collapse"]

SHOWN_OCCURRENCES = 5
"""How many rendered locations a collapsed finding lists."""

_QUOTED = re.compile(r"'([^'\s]{1,200})'")
_DISTINCTIVE = re.compile(r"[^A-Za-z_-]")


@dataclass
class _Group:
    position: int
    first: Diagnostic
    lines: dict[tuple[str, int], Location] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    absorbed: bool = False

    def add(self, d: Diagnostic) -> None:
        loc = d.location
        if loc is not None:
            self.lines.setdefault((loc.file, loc.line or 0), loc)
        self.messages.append(d.message)

    def words(self) -> set[str]:
        out: set[str] = set()
        for m in self.messages:
            out.update(_QUOTED.findall(m))
        return out


_ROOT_CAUSE = "root cause: "


def _key(d: Diagnostic) -> tuple[object, ...] | None:
    at = d.message.find(_ROOT_CAUSE)
    if at >= 0 and d.location is not None:
        # A cascade (an output not rendered because of another's failure): one per root cause.
        return ("cascade", d.rule_id, d.severity, d.phase, d.message[at:])
    t = d.template_location
    if t is None or t.line is None or d.location is None or d.location.line is None:
        return None
    obj = d.object.model_dump_json() if d.object is not None else None
    return (d.rule_id, d.severity, d.phase, t.template, t.line, obj)


def _groups(ordered: Sequence[Diagnostic]) -> list[_Group]:
    """Group by :func:`_key` and by rank on the rendered line: two findings of one rule on
    one line (``inter 1s[ fastinter 2sx``) are two causes, so the n-th of a line joins the
    n-th of every other line."""
    groups: list[_Group] = []
    by_key: dict[tuple[object, ...], _Group] = {}
    rank: dict[tuple[object, ...], int] = {}
    for pos, d in enumerate(ordered):
        key = _key(d)
        if key is not None and key[0] != "cascade":
            loc = d.location
            assert loc is not None
            on_line = (*key, loc.file, loc.line)
            n = rank[on_line] = rank.get(on_line, -1) + 1
            key = (*key, n)
        group = by_key.get(key) if key is not None else None
        if group is None:
            group = _Group(pos, d)
            groups.append(group)
            if key is not None:
                by_key[key] = group
        group.add(d)
    return groups


def _merge_phases(groups: list[_Group]) -> int:
    """Fold HAProxy's findings into the schema's (or the other way round); returns how many
    groups disappeared."""
    schema = [g for g in groups if g.first.phase is Phase.SCHEMA]
    if not schema:
        return 0
    by_line: dict[tuple[str, int], list[_Group]] = {}
    by_word: dict[str, list[_Group]] = {}
    words: dict[int, set[str]] = {}
    for g in schema:
        words[id(g)] = g.words()
        for where in g.lines:
            by_line.setdefault(where, []).append(g)
        for w in words[id(g)]:
            if _DISTINCTIVE.search(w):
                by_word.setdefault(w, []).append(g)
    merged = 0
    for h in groups:
        if h.first.phase is not Phase.HAPROXY or h.absorbed:
            continue
        hw = h.words()
        partner: _Group | None = None
        for where in h.lines:
            if not where[1]:
                continue
            for s in by_line.get(where, ()):
                if not s.absorbed and hw & words[id(s)]:
                    partner = s
                    break
            if partner is not None:
                break
        if partner is None and not any(line for _, line in h.lines):
            for w in sorted(hw):
                candidates = [s for s in by_word.get(w, ()) if not s.absorbed]
                if candidates:
                    partner = candidates[0]
                    break
        if partner is None:
            continue
        _fold(h, partner)
        merged += 1
    return merged


def _fold(h: _Group, s: _Group) -> None:
    """Keep the more severe of the two with the lines of both. On a tie an error stays
    HAProxy's (the verdict, and protected from filters); a warning or info stays ours, which
    names the option and carries a fix."""
    hr, sr = h.first.severity.rank, s.first.severity.rank
    ours = sr < hr or (sr == hr and sr > Severity.ERROR.rank)
    keep, drop = (s, h) if ours else (h, s)
    lines = dict(h.lines)
    for where, loc in s.lines.items():
        if where not in lines or lines[where].column is None:
            lines[where] = loc  # the schema's has the columns
    first = keep.first
    update: dict[str, object] = {}
    other = drop.first
    if first.location is None or first.location.line is None:
        update["location"] = other.location
        update["template_location"] = other.template_location
    elif (
        first.location.column is None
        and other.location is not None
        and (other.location.file, other.location.line) == (first.location.file, first.location.line)
    ):
        update["location"] = other.location
    if first.template_location is None and other.template_location is not None:
        update["template_location"] = other.template_location
    if update:
        first = first.model_copy(update=update)
    keep.first = first
    keep.lines = lines
    keep.position = min(keep.position, drop.position)
    keep.messages.extend(drop.messages)
    drop.absorbed = True


def _result(g: _Group) -> Diagnostic:
    if len(g.lines) <= 1:
        return g.first
    shown = [g.lines[k] for k in sorted(g.lines)[:SHOWN_OCCURRENCES]]
    first = g.first
    loc = first.location
    if loc is not None and (loc.file, loc.line or 0) in g.lines:
        own = (loc.file, loc.line)
        shown = [loc, *[x for x in shown if (x.file, x.line) != own]][:SHOWN_OCCURRENCES]
    return first.model_copy(
        update={"occurrences": Occurrences(count=len(g.lines), locations=shown)}
    )


def collapse(ordered: Sequence[Diagnostic]) -> tuple[list[int], list[Diagnostic]]:
    """The findings of ``ordered`` (report order), one per cause.

    Returns, for each kept finding, the index in ``ordered`` of the finding it stands in for
    (so a caller can keep its own ordering bookkeeping), and the findings themselves.
    """
    groups = _groups(ordered)
    _merge_phases(groups)
    kept = sorted((g for g in groups if not g.absorbed), key=lambda g: g.position)
    return [g.position for g in kept], [_result(g) for g in kept]
