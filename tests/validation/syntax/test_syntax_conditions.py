"""The ``.if`` evaluator. Every verdict below was observed on the 2.6 and 2.8 binaries."""

from __future__ import annotations

import pytest

from controller.validation.syntax import evaluate
from controller.validation.syntax.conditions import compare_version


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("", False),
        ("1", True),
        ("0", False),
        ("0x10", True),
        ("017", True),
        ("+1", True),
        ("-1", True),
        ("!!1", True),
        ("!(0)", True),
        ("1 && 0 || 1", True),
        ("1&&1", True),
        ("0 || 0", False),
        ("streq(a,a)", True),
        ("streq(a, a)", False),  # blanks are part of an argument
        ("streq(,)", True),
        ("streq(a,)", False),
        ("strneq(a,b)", True),
        ("strstr(haproxy,prox)", True),
        ("defined()", None),  # environment: decided where HAProxy runs
        ("defined(HAPROXY_LOCALPEER) && 0", False),
        ("defined(X) || 1", True),
        ("feature(LUA)", None),
        ("enabled(POLL)", None),
    ],
)
def test_values(text: str, value: bool | None) -> None:
    result = evaluate(text)
    assert result.error is None
    assert result.value is value


@pytest.mark.parametrize(
    "text",
    [
        "foo",
        "foo(x)",
        "!",
        "- 1",
        "1 &&",
        "1 ||",
        "(1",
        "1 foo",
        "1 & 1",
        "0x",
        "(1)x",
        "defined X",
        "defined (X)",
        "defined(X",
        "defined(X)y",
        "streq(a)",
        "streq",
        "streq(a,b,c)",
        "streq(a(b),a(b))",
    ],
)
def test_refused(text: str) -> None:
    result = evaluate(text)
    assert result.error is not None and result.value is None


def test_versions() -> None:
    assert evaluate("version_atleast(2.6)", "2.6.12-1+deb12u4").value is True
    assert evaluate("version_atleast(2.8-dev1)", "2.6.12").value is False
    assert evaluate("version_atleast(2.8-dev1)", "2.8.25-5cf5d0683").value is True
    assert evaluate("version_before(2.8.25)", "2.8.25").value is False
    assert evaluate("version_before(2.8.25)", "2.6.12").value is True
    assert evaluate("version_atleast(2.8)").value is None  # version unknown
    assert evaluate("version_atleast(abc)", "2.8.25").value is None  # HAProxy's own rules
    assert evaluate("version_atleast(3.0)", "3.1-dev4").value is None


def test_predicates_by_version() -> None:
    assert evaluate("strstr(a,b)", "2.6.12").error is not None
    assert evaluate("enabled(POLL)", "2.6.12").error is not None
    assert evaluate("strstr(a,b)", "2.8.25").error is None
    assert evaluate("brand_new(x)", "3.4.0").value is None  # newer than our list: no verdict


def test_quoted_arguments_are_not_guessed() -> None:
    assert evaluate('streq("a",a)').value is None


def test_compare_version() -> None:
    assert compare_version("2.8.25", "2.8") == 1
    assert compare_version("2.8.0", "2.8") == 0
    assert compare_version("2.8.0", "2.8-rc1") == 1
    assert compare_version("2.6.12", "2.8") == -1
    assert compare_version("garbage", "2.8") is None


def test_deep_nesting_is_no_crash() -> None:
    assert evaluate("(" * 5000 + "1" + ")" * 5000).error is None
    assert evaluate("!" * 100_000 + "1").value is True
