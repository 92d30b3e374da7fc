"""Every *error* the schema can report about a known keyword rests on a refusal a real binary
showed — not on the manual alone.

The schema reports errors for: keywords removed in this version (E3007), keywords in a section
kind that refuses them (E3002), a compound keyword cut short (``timeout`` alone, E3005), a
prefix the keyword does not take, and values of a confirmed form (docs/schema.md). The example
harness puts every *example* to both binaries; these tests make sure no removal or refused
placement lacks one, and put the cut-short compounds to the binaries directly. Prefixes and
value forms are covered by the edge-value differential test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.validation.schema import SchemaEngine
from controller.validation.schema.catalog import PROXY_SECTIONS, Family, KeywordSpec, catalog
from controller.validation.schema.engine import _Node, _trie
from tests.validation.schema.schema_helpers import (
    Case,
    family_of,
    features_of,
    parse_cfg,
    proxy_placements,
    sections_of,
)
from tests.validation.schema.schema_oracle import accepted
from tests.validation.schema.test_schema_haproxy_examples import _option_cases

FAMILIES = [f for f in catalog() if f.name in ("2.6", "2.8")]

#: Refused placements whose keyword cannot have a harness example (it needs a FastCGI server
#: where it is allowed); both binaries are asked directly instead.
REFUSED_DIRECTLY = {
    "use-fcgi-app": [("frontend", "use-fcgi-app php"), ("defaults", "use-fcgi-app php")]
}


@pytest.mark.parametrize("fam", FAMILIES, ids=lambda f: f.name)
def test_every_removed_keyword_has_an_example_the_harness_runs(fam: Family) -> None:
    missing = [
        f"{group}/{spec.key}"
        for group, specs in fam.keywords.items()
        for spec in specs.values()
        if spec.removed is not None and not spec.examples
    ]
    assert not missing


def test_every_removed_option_is_put_to_the_binary(haproxy_bin: str) -> None:
    fam = family_of(haproxy_bin)
    tried = {c.what for c in _option_cases(fam, features_of(haproxy_bin))}
    removed = {
        f"{table} option {name}"
        for table, options in fam.option_tables.items()
        if table in ("bind", "server")
        for name, entry in options.items()
        if entry.removed is not None
    }
    assert removed <= tried, sorted(removed - tried)


def _refused_somewhere(spec: KeywordSpec) -> bool:
    return any(p == "error" for _, _, p in proxy_placements(spec))


@pytest.mark.parametrize("fam", FAMILIES, ids=lambda f: f.name)
def test_every_refused_placement_rests_on_an_example(fam: Family) -> None:
    """A rule action takes its placement from its rule set, so one action with an example
    (and the same placement) confirms the placement for all of them."""
    proxy = fam.keywords["proxy"]
    confirmed_heads = {
        (spec.key.rsplit(" ", 1)[0], spec.sections, spec.wrong_section)
        for spec in proxy.values()
        if spec.kind == "action" and spec.examples
    }
    unconfirmed = []
    for spec in proxy.values():
        if spec.removed is not None or spec.examples or not _refused_somewhere(spec):
            continue
        head = spec.key.rsplit(" ", 1)[0]
        if spec.kind == "action" and (head, spec.sections, spec.wrong_section) in confirmed_heads:
            continue
        if spec.key in REFUSED_DIRECTLY:
            continue
        unconfirmed.append(spec.key)
    assert not unconfirmed


def test_placements_without_example_are_refused_by_the_binary(
    haproxy_bin: str, tmp_path: Path
) -> None:
    cases = [
        Case(kind, line, "alert", key)
        for key, rows in REFUSED_DIRECTLY.items()
        for kind, line in rows
    ]
    assert not any(accepted(haproxy_bin, cases, tmp_path))


def _cut_short(node: _Node, path: tuple[str, ...] = ()) -> list[tuple[str, KeywordSpec]]:
    """(prefix, one keyword under it) for every trie node that is not itself a keyword."""
    out = []
    for word, child in node.children.items():
        here = (*path, word)
        if child.spec is None and child.children:
            first = _first_spec(child)
            out.append((" ".join(here), first))
        out += _cut_short(child, here)
    return out


def _first_spec(node: _Node) -> KeywordSpec:
    for child in node.children.values():
        if child.spec is not None:
            return child.spec
    return _first_spec(next(iter(node.children.values())))


def test_cut_short_compounds_are_refused_by_the_binary(haproxy_bin: str, tmp_path: Path) -> None:
    fam = family_of(haproxy_bin)
    engine = SchemaEngine(fam.name)
    cases: list[Case] = []
    for group, specs in fam.keywords.items():
        for prefix, spec in _cut_short(_trie(specs.values())):
            if group == "proxy":
                kinds = [k for k, named, p in proxy_placements(spec) if p == "ok" and named]
                kinds = [k for k in kinds if k in PROXY_SECTIONS][:1]
            else:
                kinds = sections_of(fam, group)
            cases += [Case(kind, prefix, "alert", f"{group}/{prefix}") for kind in kinds]
    assert len(cases) >= 25
    # the schema calls each of them an error...
    for case in cases:
        section = f"{case.kind} x\n" if case.kind != "global" else "global\n"
        parsed = parse_cfg(f"{section}    {case.line}\n", "t.cfg")
        rules = {d.rule_id for d in engine.diagnostics(parsed, "t.cfg")}
        assert "E3005" in rules, (case.what, case.kind, rules)
    # ... so the binary must refuse each one
    loaded = [
        c.what + " in " + c.kind
        for c, ok in zip(cases, accepted(haproxy_bin, cases, tmp_path), strict=True)
        if ok
    ]
    assert not loaded
