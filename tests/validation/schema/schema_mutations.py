"""Edge-value variants of the catalog's examples, for the false-positive hunt.

Each example line haproxy accepts is bent the ways templates go wrong — a number with a
suffix or a sign, a word no enum knows, a time without a valid unit, a word too many, a word
too few, a ``no``/``default`` prefix — and every variant is put to a real binary. Where the
binary still loads the line, the schema must not call it an error: that is the promise the
severities in docs/schema.md make (warnings where HAProxy is lenient, errors where it is not).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from controller.validation.schema.catalog import Family, KeywordSpec
from tests.validation.schema.schema_helpers import (
    Case,
    family_features_ok,
    proxy_placements,
    sections_of,
)

_DIGITS = re.compile(r"^\d+$")
OPTION_LINES = (
    ("server", "backend", "server m{port} 127.0.0.1:8080"),
    ("bind", "frontend", "bind 127.0.0.1:{port}"),
)
#: Sample values for number options (the example harness has them for the rest).
_OPTION_NUMBERS = {"id": "{port}"}


def _home(fam: Family, group: str, spec: KeywordSpec) -> str | None:
    """One section kind where the keyword is allowed (its examples run there clean)."""
    if group == "proxy":
        kinds = [k for k, named, p in proxy_placements(spec) if p == "ok" and named]
    else:
        kinds = sections_of(fam, group)
    return kinds[0] if kinds else None


def _numbers(word: str, schema: dict[str, object]) -> list[str]:
    out = ["abc", f"{word}x", "-1", "4294967296"]
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if isinstance(lo, int):
        out.append(str(lo - 1))
    if isinstance(hi, int):
        out.append(str(hi + 1))
    return out


def _variants(spec: KeywordSpec, example: str) -> Iterator[tuple[str, str]]:
    """(kind of mutation, line) pairs for one example line."""
    words = example.split(" ")
    head = len(spec.words)
    for offset, arg in enumerate(spec.args):
        pos = head + offset
        if arg.many or pos >= len(words):
            break
        kind = arg.type.kind
        if kind == "int" and _DIGITS.match(words[pos]):
            for v in _numbers(words[pos], arg.type.schema):
                yield "number", " ".join([*words[:pos], v, *words[pos + 1 :]])
        elif kind in ("enum", "re"):
            yield "word", " ".join([*words[:pos], "zzbogus", *words[pos + 1 :]])
        elif kind == "time":
            for v in ("10x", "abc", "-1", "1.5s"):
                yield "time", " ".join([*words[:pos], v, *words[pos + 1 :]])
    yield "extra", f"{example} zzextra"
    if len(words) > head:
        yield "short", " ".join(words[:-1])
    yield "prefix", f"no {example}"
    yield "prefix", f"default {example}"


def mutations(fam: Family, features: frozenset[str]) -> list[Case]:
    """Every variant of every single-line example, plus number variants of bind/server options.

    ``Case.what`` is ``"<mutation kind> <keyword>"``; ``Case.expect`` is unused (the oracle
    decides)."""
    cases: list[Case] = []
    for group, specs in fam.keywords.items():
        for spec in specs.values():
            if spec.removed or spec.deprecated or not spec.examples:
                continue
            if not family_features_ok(spec.feature, set(features)) or spec.key == "quiet":
                continue
            kind = _home(fam, group, spec)
            example = spec.examples[0]
            if kind is None or "\n" in example:
                continue
            for what, line in _variants(spec, example):
                cases.append(Case(kind, line, "?", f"{what} {spec.key}"))
    for table, kind, prefix in OPTION_LINES:
        for name, entry in fam.option_tables[table].items():
            spec_type = entry.spec.type
            if spec_type is None or spec_type.kind != "int" or entry.removed or entry.deprecated:
                continue
            if not family_features_ok(entry.feature, set(features)) or name in _OPTION_NUMBERS:
                continue
            for v in _numbers("1", spec_type.schema):
                cases.append(Case(kind, f"{prefix} {name} {v}", "?", f"number {table} {name}"))
            cases.append(Case(kind, f"{prefix} {name}", "?", f"short {table} {name}"))
    return cases
