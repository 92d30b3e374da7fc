"""The embedded test runner: every assertion kind can pass and can fail, for the right reason."""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from controller.render import FileEntry, FileKind, FileSet, OutputStatus, RenderResult
from controller.spec import models
from controller.spec.models import AssertionType, HAProxyTemplateConfig
from controller.validation import Pipeline
from controller.validation.testing import (
    Produced,
    SuiteReport,
    TestRunner,
    TestStatus,
    format_suite,
    judge_assertion,
    select_tests,
)

CFG = """\
global
    maxconn 100

defaults
    mode http
    timeout connect 5s
    timeout client 5s
    timeout server 5s

frontend fe
    bind 127.0.0.1:18080
    http-request set-var(txn.b) req.hdr(host),lower,map({{ outputs['hosts.map'].path }},be)
    use_backend %[var(txn.b)]

backend be
    server s1 127.0.0.1:18081
"""

HOSTS = (
    "{% for i in resources.ingresses.list() %}{% for r in i.spec.rules %}"
    "{{ r.host | map_key }} {{ i.metadata.name | map_value }}\n{% endfor %}{% endfor %}"
)


def ing(name: str, host: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"rules": [{"host": host}]},
    }


FIXTURES = {"ingresses": [ing("b", "b.local"), ing("a", "a.local")]}


def config(tests: dict[str, Any]) -> HAProxyTemplateConfig:
    return HAProxyTemplateConfig.model_validate(
        {
            "metadata": {"name": "demo"},
            "spec": {
                "watchedResources": {
                    "ingresses": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"}
                },
                "haproxyConfig": {"template": CFG},
                "maps": {"hosts.map": {"template": HOSTS}},
                "tests": tests,
            },
        }
    )


def t(
    *assertions: dict[str, Any], fixtures: dict[str, Any] | None = None, **rest: Any
) -> dict[str, Any]:
    return {
        "fixtures": FIXTURES if fixtures is None else fixtures,
        "assertions": list(assertions),
        **rest,
    }


def run(tests: dict[str, Any], binary: str | None = None, workers: int = 1) -> SuiteReport:
    cfg = config(tests)
    factory = None
    if binary is not None:
        factory = lambda: Pipeline.from_spec(cfg.spec, haproxy_binary=binary)  # noqa: E731
    return asyncio.run(TestRunner(cfg, pipeline=factory).run(workers=workers))


def by_name(report: SuiteReport) -> dict[str, Any]:
    return {r.name: r for r in report.tests}


PASSING: dict[str, dict[str, Any]] = {
    "contains": {"type": "contains", "target": "hosts.map", "value": "a.local a"},
    "not-contains": {"type": "notContains", "target": "hosts.map", "value": "c.local"},
    "matches": {"type": "matches", "target": "hosts.map", "value": r"^b\.local b$"},
    "match-count": {"type": "matchCount", "target": "hosts.map", "value": r"\.local", "count": 2},
    "match-order": {"type": "matchOrder", "target": "hosts.map", "patterns": ["^a", "^b"]},
    "equals": {"type": "equals", "target": "hosts.map", "value": "a.local a\nb.local b\n"},
    "deterministic": {"type": "deterministic", "target": "hosts.map"},
}

FAILING: dict[str, tuple[dict[str, Any], str]] = {
    "contains": ({"value": "c.local"}, "hosts.map does not contain 'c.local'"),
    "not-contains": ({"value": "b.local"}, "hosts.map contains 'b.local' (line 2)"),
    "matches": ({"value": "^c"}, "no match for /^c/ in hosts.map"),
    "match-count": ({"count": 3}, r"/\.local/ matched 2 time(s) in hosts.map, expected 3"),
    "match-order": (
        {"patterns": ["^b", "^a"]},
        "pattern 2 /^a/ does not match after the match of pattern 1",
    ),
    "equals": ({"value": "a.local a\n"}, "hosts.map differs from the expected content"),
}


def test_every_text_assertion_passes_on_the_right_output() -> None:
    report = run({name: t(a) for name, a in PASSING.items()})
    assert report.passed, format_suite(report)
    assert report.counts == {"passed": 7, "failed": 0, "error": 0, "total": 7}


@pytest.mark.parametrize("kind", sorted(FAILING))
def test_every_text_assertion_fails_when_it_should(kind: str) -> None:
    change, message = FAILING[kind]
    report = run({"x": t({**PASSING[kind], **change})})
    [result] = report.tests
    assert result.status is TestStatus.FAILED
    [a] = result.assertions
    assert not a.passed and message in (a.message or "")
    [d] = result.diagnostics
    assert d.rule_id == "E8060" and d.message.startswith("test x: assertion 1 (")


def test_a_failed_equals_shows_a_diff() -> None:
    [result] = run({"x": t({**PASSING["equals"], "value": "a.local a\nc.local c\n"})}).tests
    diff = result.assertions[0].diff or ""
    assert "--- expected" in diff and "+++ hosts.map (rendered)" in diff
    assert "-c.local c" in diff and "+b.local b" in diff
    assert "    -c\n    +a.local a\n" in format_suite(
        run({"x": t({**PASSING["equals"], "value": "c\n"})})
    )


def test_a_failed_deterministic_shows_a_diff() -> None:
    def render(content: str) -> RenderResult:
        entry = FileEntry("maps/hosts.map", FileKind.MAP, content.encode())
        return RenderResult(
            files=FileSet.of([entry]),
            outputs={"hosts.map": OutputStatus("hosts.map", "maps/hosts.map", "rendered")},
        )

    got = Produced(
        render("a 1\nb 2\n"), {"hosts.map": "maps/hosts.map"}, None, render("b 2\na 1\n")
    )
    a = models.TestAssertion(type=AssertionType.DETERMINISTIC, target="hosts.map")
    result = judge_assertion(1, a, got)
    assert not result.passed and result.message == "two renders of hosts.map differ"
    assert "(first render)" in (result.diff or "") and "+b 2" in (result.diff or "")
    same = Produced(render("a 1\n"), {"hosts.map": "maps/hosts.map"}, None, render("a 1\n"))
    assert judge_assertion(1, a, same).passed


def test_text_assertions_fail_on_an_output_that_produced_nothing() -> None:
    cfg = config({"x": t({"type": "notContains", "target": "hosts.map", "value": "zzz"})})
    spec = cfg.spec.model_copy(
        update={
            "maps": {"hosts.map": cfg.spec.maps["hosts.map"].model_copy(update={"when": "false"})}
        }
    )
    cfg = cfg.model_copy(update={"spec": spec})
    [result] = asyncio.run(TestRunner(cfg).run()).tests
    assert result.status is TestStatus.FAILED
    assert "produced no content: skipped" in (result.assertions[0].message or "")


def test_render_error_assertions() -> None:
    hostile = {"ingresses": [ing("evil", "a b")]}  # map_key refuses a space
    report = run(
        {
            "expects-error": t({"type": "renderError", "ruleIds": ["E1004"]}, fixtures=hostile),
            "wrong-id": t({"type": "renderError", "ruleIds": ["E1005"]}, fixtures=hostile),
            "no-error": t({"type": "renderError"}),
        }
    )
    r = by_name(report)
    assert r["expects-error"].status is TestStatus.PASSED
    assert "expected render rule ids E1005; found" in r["wrong-id"].assertions[0].message
    assert r["no-error"].assertions[0].message == "expected a render error, but rendering succeeded"


def test_valid_and_invalid_run_the_real_pipeline(haproxy_bin: str) -> None:
    report = run(
        {
            "valid": t({"type": "valid"}),
            "invalid-expected": t(
                {"type": "invalid", "ruleIds": ["E1004"]}, fixtures={"ingresses": [ing("e", "a b")]}
            ),
            "valid-but-expected-invalid": t({"type": "invalid"}),
            "invalid-missing-id": t(
                {"type": "invalid", "ruleIds": ["E4001"]}, fixtures={"ingresses": [ing("e", "a b")]}
            ),
        },
        binary=haproxy_bin,
    )
    r = by_name(report)
    assert r["valid"].passed and r["valid"].report is not None and r["valid"].report.valid
    assert r["invalid-expected"].passed
    assert "passed every stage" in r["valid-but-expected-invalid"].assertions[0].message
    assert "expected rule ids E4001; found" in r["invalid-missing-id"].assertions[0].message
    assert report.counts["passed"] == 2 and report.counts["failed"] == 2


def test_tests_that_cannot_run_are_errors() -> None:
    report = run(
        {
            "no-name": t(
                {"type": "contains", "value": "x"}, fixtures={"ingresses": [{"kind": "Ingress"}]}
            ),
            "bad-collection": t(
                {"type": "contains", "value": "x"}, fixtures={"nope": [ing("a", "a")]}
            ),
            "bad-target": t({"type": "contains", "target": "nope.map", "value": "x"}),
            "bad-regex": t({"type": "matches", "target": "hosts.map", "value": "("}),
        }
    )
    for result in report.tests:
        assert result.status is TestStatus.ERROR, result.name
        assert {d.rule_id for d in result.diagnostics} == {"E8061"}
    assert not report.passed and report.counts["error"] == 4


def test_fixture_identities_are_checked_precisely() -> None:
    """YAML reads ``name: 123`` as a number; a duplicate identity would silently replace
    the first object. Both are errors that say exactly what is wrong."""
    numbered = ing("x", "x.local")
    numbered["metadata"]["name"] = 123
    duplicate = [ing("a", "a.local"), {**ing("a", "other.local")}]
    report = run(
        {
            "numeric-name": t(
                {"type": "contains", "value": "x"}, fixtures={"ingresses": [numbered]}
            ),
            "duplicate": t({"type": "contains", "value": "x"}, fixtures={"ingresses": duplicate}),
            "no-metadata": t(
                {"type": "contains", "value": "x"}, fixtures={"ingresses": [{"metadata": "x"}]}
            ),
        }
    )
    messages = {r.name: [d.message for d in r.diagnostics] for r in report.tests}
    assert all(r.status is TestStatus.ERROR for r in report.tests)
    assert messages["numeric-name"] == [
        "test numeric-name: fixture ingresses[0]: metadata.name is 123 (an integer), not a "
        'string; quote it: name: "123"'
    ]
    assert messages["duplicate"] == [
        "test duplicate: fixture ingresses[1] is default/a again (as ingresses[0]); the store "
        "holds one object per namespace/name, so one of them would be silently dropped"
    ]
    assert messages["no-metadata"] == [
        "test no-metadata: fixture ingresses[0]: metadata is a string, not a mapping"
    ]


def test_parallel_runs_report_in_name_order() -> None:
    tests = {
        f"t{i:02d}": t(PASSING["contains"], {"type": "deterministic", "target": "haproxy.cfg"})
        for i in range(8)
    }
    report = run(tests, workers=4)
    assert [r.name for r in report.tests] == sorted(tests)
    assert report.passed


def test_selecting_tests() -> None:
    names = {"host-a": None, "host-b": None, "other": None}
    assert select_tests(names, None) == ["host-a", "host-b", "other"]  # type: ignore[arg-type]
    assert select_tests(names, "host") == ["host-a", "host-b"]  # type: ignore[arg-type]
    assert select_tests(names, "*-b") == ["host-b"]  # type: ignore[arg-type]
    assert select_tests(names, "zzz") == []  # type: ignore[arg-type]


def test_formats() -> None:
    report = run({"ok": t(PASSING["contains"]), "bad": t({**PASSING["equals"], "value": "x\n"})})
    text = format_suite(report, "text")
    assert "FAIL bad" in text and "PASS ok" in text and "2 tests: 1 passed, 1 failed" in text
    doc = json.loads(format_suite(report, "json"))
    assert doc["passed"] is False and doc["counts"]["failed"] == 1
    assert doc["tests"][0]["diagnostics"][0]["ruleId"] == "E8060"
    suite = ET.fromstring(format_suite(report, "junit"))
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    [failure] = suite.iter("failure")
    assert failure.get("type") == "E8060" and "+++ hosts.map (rendered)" in (failure.text or "")


def test_http_sources_and_extra_context_reach_the_templates() -> None:
    cfg = config(
        {
            "x": t(
                {"type": "contains", "target": "blocked.map", "value": "10.0.0.1 blocked"},
                {"type": "contains", "target": "blocked.map", "value": "# team ops"},
                httpSources={"blocklist": "10.0.0.1\n"},
                extraContext={"team": "ops"},
            )
        }
    )
    spec = cfg.spec.model_copy(
        update={
            "maps": {
                **cfg.spec.maps,
                "blocked.map": models.Output(
                    template="# team {{ extraContext.team }}\n"
                    "{% for ip in http['blocklist'].split() %}{{ ip }} blocked\n{% endfor %}"
                ),
            }
        }
    )
    report = asyncio.run(TestRunner(cfg.model_copy(update={"spec": spec})).run())
    assert report.passed, format_suite(report)
