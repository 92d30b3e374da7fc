"""Turning one parsed directive into the JSON instance its keyword's schema judges.

A directive's words are positional (``server NAME ADDR``), option lists (``check weight 10``)
and an optional ``if``/``unless`` condition; JSON Schema judges named values much better than
word lists, so the grammar from the catalog names every word first. Problems the schema cannot
see because they prevent building the instance at all (an unknown option, whose arity is
unknown; an option without its value) are reported here as :class:`Issue`. Everything else —
types, ranges, enums, missing and extra arguments — is left to the schema, so overlays apply to
it uniformly.

``spans`` maps instance paths to token ranges so a schema error points at the offending word.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.diagnostics import RuleId
from controller.validation.parsed import Directive
from controller.validation.schema.catalog import KeywordSpec, OptionEntry
from controller.validation.schema.grammar import ValueType, timer_trailing

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Issue:
    rule_id: RuleId
    message: str
    first: int
    """Index of the first offending token in ``Directive.tokens``."""
    last: int
    fix: str | None = None


@dataclass(slots=True)
class Normalized:
    instance: dict[str, Any] = field(default_factory=dict)
    spans: dict[Path, tuple[int, int]] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)
    verifiable: bool = True
    """False when a word holds an environment expansion whose value is unknown here, or when an
    unknown or incomplete option leaves the rest of the line without a known shape."""


def suggest(word: str, choices: Any) -> str | None:
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return match[0] if match else None


def _split_condition(values: list[str], start: int) -> int | None:
    for i in range(start, len(values)):
        if values[i] in ("if", "unless"):
            return i
    return None


def normalize(
    directive: Directive,
    spec: KeywordSpec,
    consumed: int,
    prefix: str | None,
    options: Mapping[str, OptionEntry] | None,
    *,
    env: bool | None = None,
    timer_trailing_error: bool = False,
) -> Normalized:
    """Build the instance of ``directive`` (whose first ``consumed`` tokens name ``spec``).

    ``env`` says whether any word holds an environment expansion, when the caller knows.
    ``timer_trailing_error`` says the family refuses characters after a timer's unit
    (``inter 1s[``); otherwise they are a warning, as in the HAProxy versions that load them.
    """
    tokens = directive.tokens
    values = [t.value for t in tokens]
    out = Normalized()
    if env is None:
        env = any(t.has_env for t in tokens[consumed:])
    if env:
        out.verifiable = False
    if prefix is not None:
        out.instance["prefix"] = prefix
        out.spans[("prefix",)] = (0, 0)
    end = len(tokens)
    if spec.cond:
        at = _split_condition(values, consumed)
        if at is not None:
            out.instance["condition"] = {"kind": values[at], "terms": values[at + 1 :]}
            out.spans[("condition",)] = (at, end - 1)
            end = at
    if spec.parser == "log":
        _log(values, consumed, end, out)
        return out
    pos = consumed
    for arg in spec.args:
        if pos >= end:
            break
        if arg.many:
            if options is not None:
                break
            items = [arg.type.convert(v) for v in values[pos:end]]
            out.instance[arg.name] = items
            out.spans[(arg.name,)] = (pos, end - 1)
            for i in range(len(items)):
                out.spans[(arg.name, i)] = (pos + i, pos + i)
            pos = end
            break
        out.instance[arg.name] = arg.type.convert(values[pos])
        out.spans[(arg.name,)] = (pos, pos)
        if arg.type.kind == "time":
            label = f"'{spec.key}' argument <{arg.name}>"
            _timer(label, values[pos], pos, arg.type, out, error=timer_trailing_error)
        pos += 1
    if options is not None and pos < end:
        _options(directive, values, pos, end, options, out, timer_trailing_error)
        pos = end
    if pos < end:
        out.instance["_extra"] = values[pos:end]
        out.spans[("_extra",)] = (pos, end - 1)
    return out


def _options(
    directive: Directive,
    values: list[str],
    pos: int,
    end: int,
    table: Mapping[str, OptionEntry],
    out: Normalized,
    timer_trailing_error: bool = False,
) -> None:
    opts: dict[str, Any] = {}
    out.instance["options"] = opts
    while pos < end:
        name = values[pos]
        entry = table.get(name)
        if entry is None:
            opts[name] = True  # keeps the instance honest: the schema rejects the name too
            out.verifiable = False  # how many words the option takes is unknown
            close = suggest(name, table)
            out.issues.append(
                Issue(
                    "W3016",
                    f"'{directive.keyword}': unknown option '{name}'",
                    pos,
                    pos,
                    f"did you mean '{close}'?" if close else None,
                )
            )
            return
        if entry.removed is not None:
            opts[name] = True
            out.issues.append(
                Issue(
                    "E3007",
                    f"'{directive.keyword}': option '{name}' was removed {entry.removed.when()}",
                    pos,
                    pos,
                    f"use {entry.removed.use} instead" if entry.removed.use else None,
                )
            )
            return
        if entry.deprecated is not None:
            out.issues.append(
                Issue(
                    "W3008",
                    f"'{directive.keyword}': option '{name}' is deprecated "
                    f"{entry.deprecated.when()}",
                    pos,
                    pos,
                    f"use {entry.deprecated.use} instead" if entry.deprecated.use else None,
                )
            )
        spec = entry.spec
        if spec.type is None:
            opts[name] = True
            out.spans[("options", name)] = (pos, pos)
            pos += 1
            continue
        if pos + 1 >= end:
            opts[name] = None
            out.verifiable = False
            # HAProxy's option parsers often read a missing last value as an empty word
            out.issues.append(
                Issue(
                    "W3017",
                    f"'{directive.keyword}': option '{name}' expects {spec.type.hint} "
                    "(HAProxy may load the line anyway)",
                    pos,
                    pos,
                )
            )
            return
        value = spec.type.convert(values[pos + 1])
        if spec.type.kind == "time":
            label = f"'{directive.keyword}' option '{name}'"
            _timer(label, values[pos + 1], pos + 1, spec.type, out, error=timer_trailing_error)
        if spec.repeat:
            bucket = opts.setdefault(name, [])
            out.spans[("options", name, len(bucket))] = (pos, pos + 1)
            bucket.append(value)
            out.spans.setdefault(("options", name), (pos, pos + 1))
        else:
            opts[name] = value
            out.spans[("options", name)] = (pos, pos + 1)
        pos += 2


def _timer(
    label: str,
    word: str,
    pos: int,
    vtype: ValueType,
    out: Normalized,
    *,
    error: bool,
) -> None:
    """Characters after a timer's unit: HAProxy 2.6 to 3.0 load ``1s[`` as ``1s`` and warn."""
    trailing = timer_trailing(word)
    if trailing is None:
        return
    timer, rest = trailing
    if error:
        out.issues.append(
            Issue(
                "E3004",
                f"{label} must be {vtype.hint} (got '{word}')",
                pos,
                pos,
                f"write '{timer}'",
            )
        )
        return
    out.issues.append(
        Issue(
            "W3017",
            f"{label}: unexpected character '{rest[0]}' after the timer "
            f"value '{word}' (HAProxy loads it as {timer} and warns; a later version will "
            "refuse it)",
            pos,
            pos,
            f"write '{timer}'",
        )
    )


_LOG_PAIRS = ("len", "format", "sample", "profile")


def _log(values: list[str], pos: int, end: int, out: Normalized) -> None:
    """``log global`` | ``log <target> [len N] [format F] [sample S] <facility> [lvl [min]]``."""
    inst = out.instance
    if pos >= end:
        return
    inst["target"] = values[pos]
    out.spans[("target",)] = (pos, pos)
    pos += 1
    while pos + 1 < end and values[pos] in _LOG_PAIRS:
        key = values[pos]
        raw = values[pos + 1]
        inst[key] = int(raw) if key == "len" and raw.isdigit() else raw
        out.spans[(key,)] = (pos, pos + 1)
        pos += 2
    for key in ("facility", "level", "minlevel"):
        if pos >= end:
            break
        inst[key] = values[pos]
        out.spans[(key,)] = (pos, pos)
        pos += 1
    if pos < end:
        inst["_extra"] = values[pos:end]
        out.spans[("_extra",)] = (pos, end - 1)
