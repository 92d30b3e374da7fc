"""Per-section caching: a candidate that differs in one backend re-validates only that backend,
and a reused section is reported at its current lines."""

from __future__ import annotations

from collections.abc import Callable

from controller.validation.schema import SchemaEngine
from controller.validation.syntax import ParsedConfig

Parse = Callable[[str], ParsedConfig]


def config(backends: int, *, weight_of_b3: int = 10, extra_head: str = "") -> str:
    out = [
        "global",
        "    maxconn 100",
        *([extra_head] if extra_head else []),
        "defaults",
        "    mode http",
    ]
    for b in range(backends):
        w = weight_of_b3 if b == 3 else 10
        out += [
            f"backend be{b}",
            f"    server s1 10.0.0.{b}:80 check weight {w}",
            "    balance roundrobin",
        ]
    return "\n".join(out) + "\n"


def test_changing_one_section_revalidates_only_it(cfg: Parse) -> None:
    engine = SchemaEngine("2.8")
    engine.check(cfg(config(20)))
    assert engine.stats.sections_checked == 22 and engine.stats.sections_reused == 0
    engine.check(cfg(config(20, weight_of_b3=11)))
    assert engine.stats.sections_checked == 23
    assert engine.stats.sections_reused == 21
    engine.check(cfg(config(20, weight_of_b3=11)))
    assert engine.stats.sections_checked == 23 and engine.stats.sections_reused == 43


def test_reused_sections_are_reported_at_their_new_lines(cfg: Parse) -> None:
    engine = SchemaEngine("2.8")
    first = engine.diagnostics(cfg(config(5, weight_of_b3=999)), "haproxy.cfg")
    moved = engine.diagnostics(
        cfg(config(5, weight_of_b3=999, extra_head="    nbthread 2")), "haproxy.cfg"
    )
    assert engine.stats.sections_reused >= 6  # every section but global came from the cache
    (a,), (b,) = first, moved
    assert a.rule_id == b.rule_id == "E3004"
    assert a.location is not None and b.location is not None
    assert a.location.line is not None and b.location.line == a.location.line + 1
    assert (a.location.column, a.location.end_column) == (b.location.column, b.location.end_column)


def test_engines_with_different_fingerprints_do_not_share_results(cfg: Parse) -> None:
    overlay = {"definitions": {"backend": {"properties": {"server": {"properties": {
        "options": {"properties": {"weight": {"maximum": 100}}}}}}}}}  # fmt: skip
    parsed = cfg(config(4, weight_of_b3=150))
    loose, strict = SchemaEngine("2.8"), SchemaEngine("2.8", [overlay])
    assert loose.diagnostics(parsed, "haproxy.cfg") == []
    assert [d.rule_id for d in strict.diagnostics(parsed, "haproxy.cfg")] == ["E3013"]
    assert loose.diagnostics(parsed, "haproxy.cfg") == []


def test_identical_directives_share_one_validation_but_not_their_values(cfg: Parse) -> None:
    """Server lines differing only in name and address share a memo entry; a differing weight
    is validated on its own."""
    lines = [f"    server s{i} 10.1.0.{i}:80 check weight 10" for i in range(50)]
    lines.append("    server bad 10.1.1.1:80 check weight 1000")
    engine = SchemaEngine("2.8")
    got = engine.diagnostics(cfg("backend b\n" + "\n".join(lines) + "\n"), "haproxy.cfg")
    assert [(d.rule_id, d.location.line if d.location else 0) for d in got] == [("E3004", 52)]
    assert len(engine._memo) == 2  # the 50 equal-shaped lines and the bad one


def test_conditional_directives_are_left_to_haproxy(cfg: Parse) -> None:
    text = "backend b\n.if defined(NOPE)\n    server s 127.0.0.1:80 weight 1000\n.endif\n"
    engine = SchemaEngine("2.8")
    assert engine.diagnostics(cfg(text), "haproxy.cfg") == []
    assert engine.stats.directives_skipped == 1


def test_findings_looked_up_by_hash_are_each_sections_own(cfg: Parse) -> None:
    """Sections are looked up by their text's hash, all at once: after edits that move,
    change, add and remove sections, each section has exactly the findings a fresh engine
    finds for it, in section order."""
    engine = SchemaEngine("2.8")
    variants = [
        config(8, weight_of_b3=999),
        config(8, weight_of_b3=999, extra_head="    nbthread 2"),
        config(9, weight_of_b3=10),
        config(3, weight_of_b3=1000, extra_head="    maxconn 7"),
        config(8, weight_of_b3=999),
    ]
    for text in variants:
        parsed = cfg(text)
        fresh = SchemaEngine("2.8")
        expected = [(s, f) for s in parsed.sections for f in fresh.check_section(s)]
        assert engine.check(parsed) == expected
