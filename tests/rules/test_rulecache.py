"""Compiled rules kept on disk: a loaded entry judges exactly as a fresh compile, and an entry
that is not exactly ours is compiled again (controller.validation.rules.rulecache)."""

from __future__ import annotations

import marshal
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.render import codecache, disk_cache
from controller.validation.rules import RuleSet, rulecache
from controller.validation.rules.cel import EvalError, evaluate
from tests.rules.rules_helpers import make_spec, rule

RULES = [
    rule("hosts", "self.content.matches('^[a-z ]+$') && size(self.content) < 100"),
    rule(
        "counted",
        "resources.ingresses.size() >= 0",
        messageExpression="'saw ' + string(resources.ingresses.size())",
    ),
    rule("reads-map", "outputs['hosts.map'].content != ''", when="self.content != ''"),
    rule("loops", "[1, 2, 3].all(x, x > 0) && self.content.startsWith('g')"),
    rule("missing-key", "self.nope.deeper == 1"),
    rule("broken", "self.content ==", severity="warning"),  # E5001 with a position
    rule("not-bool", "'text'"),  # E5009 (from the cached result type)
    rule("no-such-output", "outputs['nope.map'].content == ''"),  # E5002 (cached refs)
]

INPUTS: list[dict[str, Any]] = [
    {
        "self": {"content": "global"},
        "outputs": {"hosts.map": {"content": "a be"}},
        "resources": {"ingresses": []},
        "extraContext": {},
    },
    {
        "self": {"content": "Global\n"},
        "outputs": {"hosts.map": {"content": ""}},
        "resources": {"ingresses": [{"a": 1}]},
        "extraContext": {},
    },
]


def _spec() -> Any:
    return make_spec(
        cfg_rules=RULES,
        maps={"hosts.map": {"template": "x"}},
        watched={"ingresses": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"}},
    )


def _verdicts(program: Any) -> list[Any]:
    out: list[Any] = []
    for data in INPUTS:
        try:
            out.append(("value", evaluate(program, data)))
        except EvalError as exc:
            out.append(("error", str(exc)))
    return out


def _findings(rs: RuleSet) -> list[Any]:
    """Everything a rule set reports or decides, and what each program answers."""
    out: list[Any] = [(d.rule_id, d.message, d.severity, d.location) for d in rs.diagnostics]
    for r in rs.rules:
        programs = [r.expression, r.message, r.when, r.block_when]
        out.append(
            (
                r.name,
                r.deferred,
                r.refs,
                [None if p is None else (p.source, p.result_type) for p in programs],
                [None if p is None else _verdicts(p) for p in programs],
            )
        )
    return out


@pytest.fixture
def fresh() -> Iterator[None]:
    """Each build starts from an empty memory cache, so only the disk can answer."""
    rulecache.clear()
    yield
    rulecache.clear()


def _build(folder: Path | None) -> tuple[RuleSet, dict[str, int]]:
    rulecache.clear()
    before = rulecache.stats()
    if folder is None:
        rs = RuleSet.from_spec(_spec())
    else:
        with disk_cache(folder):
            rs = RuleSet.from_spec(_spec())
    after = rulecache.stats()
    return rs, {k: after[k] - before[k] for k in after}


def _rule_entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.read_bytes()[:4] == b"HTCR")


def test_loaded_rules_judge_as_compiled_ones(tmp_path: Path, fresh: None) -> None:
    plain, counts = _build(None)
    assert counts["disk_hits"] == 0
    first, counts = _build(tmp_path)
    entries = _rule_entries(tmp_path)
    # 9 sources compile (messageExpression and when included); the broken one does not
    assert counts["misses"] == 10 and len(entries) == 9
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in entries)
    assert tmp_path.stat().st_mode & 0o777 == 0o700
    second, counts = _build(tmp_path)
    assert counts == {"hits": 0, "disk_hits": 9, "misses": 1}  # only the broken one again
    assert _findings(second) == _findings(first) == _findings(plain)
    assert {d.rule_id for d in second.diagnostics} == {"E5001", "E5002", "E5009"}
    broken = next(d for d in second.diagnostics if d.rule_id == "E5001")
    assert "(at 1:16)" in broken.message  # the parser's position, as a fresh compile gives it
    assert [p.name for p in _rule_entries(tmp_path)] == [p.name for p in entries]


def test_the_memory_cache_answers_a_second_rule_set(fresh: None) -> None:
    before = rulecache.stats()
    first = RuleSet.from_spec(_spec())
    again = RuleSet.from_spec(_spec())
    after = rulecache.stats()
    assert after["hits"] - before["hits"] == 9
    assert after["misses"] - before["misses"] == 10 + 1  # compile errors are never kept
    assert _findings(again) == _findings(first)


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


def test_damaged_or_foreign_entries_are_compiled_again(tmp_path: Path, fresh: None) -> None:
    reference, _ = _build(tmp_path)
    entries = _rule_entries(tmp_path)
    a, b, c, d, e, f = entries[:6]
    _damage(a)  # digest no longer matches
    a_size = a.stat().st_size
    b.write_bytes(c.read_bytes())  # another source's entry under this name
    d.chmod(0o620)  # writable by the group
    os.link(e, tmp_path / "second-link")  # two links
    # a sealed entry (digest right) whose checked expression is garbage
    payload = codecache.unseal(b"HTCR", rulecache.FORMAT, f.read_bytes())
    assert payload is not None
    value = list(marshal.loads(payload))
    value[1] = b"\x0a\x03not a checked expression"
    f.write_bytes(codecache.seal(b"HTCR", rulecache.FORMAT, marshal.dumps(tuple(value))))
    again, counts = _build(tmp_path)
    assert counts["misses"] == 1 + 5 and counts["disk_hits"] == 9 - 5
    assert _findings(again) == _findings(reference)
    assert a.stat().st_size == a_size  # rewritten whole, not appended to


def test_off_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("HTC_CACHE_DIR", raising=False)
    monkeypatch.setenv("HTC_TEMPLATE_CACHE", "off")
    with disk_cache():
        off = RuleSet.from_spec(_spec())
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("HTC_TEMPLATE_CACHE", "")
    rulecache.clear()
    with disk_cache():
        on = RuleSet.from_spec(_spec())
    assert len(_rule_entries(tmp_path / "htc" / "templates")) == 9
    assert _findings(on) == _findings(off)


def test_without_a_command_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None
) -> None:
    """A library user or a long-running process keeps to the memory cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HTC_TEMPLATE_CACHE", "")
    RuleSet.from_spec(_spec())
    assert list(tmp_path.iterdir()) == []


def test_the_key_covers_the_source_and_the_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    one, other = rulecache.disk_key("self.a == 1"), rulecache.disk_key("self.a == 2")
    assert one is not None and other is not None and one != other
    monkeypatch.setattr(rulecache, "_prefix", None)
    monkeypatch.setattr(rulecache, "_prefix_done", False)
    monkeypatch.setattr(rulecache, "_binding_identity", lambda: "another build")
    assert rulecache.disk_key("self.a == 1") not in (None, one)
