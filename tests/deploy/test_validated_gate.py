"""The ValidatedFileSet gate: frozen, bound to its report's checksum, re-checked at deploy, and
handed out only by a pipeline that ran the syntax and haproxy stages (or says it may not)."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest

from controller.deploy.master_socket import MasterSocketTarget
from controller.deploy.target import DeployOutcome
from controller.observability.metrics import Metrics
from controller.render import RenderResult
from controller.validation import Pipeline, ValidatedFileSet
from controller.validation.validated import _issue
from tests.deploy.deploy_helpers import config_set


def partial() -> Pipeline:
    return Pipeline([], haproxy_version=None, cache=None, allow_partial=True)


async def test_a_pipeline_without_syntax_and_haproxy_issues_nothing() -> None:
    verdict = await Pipeline([], haproxy_version=None, cache=None).check(
        RenderResult(config_set(1, "x"))
    )
    assert verdict.validated is None and not verdict.report.valid
    assert verdict.report.rule_ids() == ["E7011"]
    assert verdict.report.metadata.counts.error == 1
    assert "syntax and haproxy" in verdict.report.diagnostics[0].message
    explicit = await partial().check(RenderResult(config_set(1, "x")))
    assert explicit.validated is not None and explicit.validated.partial


async def test_it_is_frozen_and_cannot_be_copied() -> None:
    validated = (await partial().check(RenderResult(config_set(1, "x")))).validated
    assert validated is not None
    other = config_set(1, "other")
    with pytest.raises(AttributeError):
        validated.files = other
    with pytest.raises(AttributeError):
        del validated.report
    with pytest.raises(TypeError):
        copy.copy(validated)
    with pytest.raises(TypeError):
        pickle.dumps(validated)
    with pytest.raises(TypeError):
        validated.files.files["haproxy.cfg"] = other.main  # type: ignore[index]


async def test_it_holds_its_own_copy_of_the_bytes() -> None:
    files = config_set(1, "x")
    render = RenderResult(files)
    verdict = await partial().check(render)
    assert verdict.validated is not None
    # Rewriting the render's file set behind the type system's back changes nothing issued.
    object.__setattr__(files, "files", {"haproxy.cfg": config_set(1, "evil").main})
    assert verdict.validated.files.main.content == config_set(1, "x").main.content
    assert verdict.validated.verify()


async def test_a_report_for_other_bytes_cannot_vouch() -> None:
    report = (await partial().check(RenderResult(config_set(1, "x")))).report
    with pytest.raises(ValueError, match="other bytes"):
        _issue(config_set(1, "y"), report, "fp", partial=True)
    with pytest.raises(ValueError, match="syntax, haproxy"):
        _issue(config_set(1, "x"), report, "fp")


async def test_deploy_refuses_a_set_altered_after_validation(short_dir: Path) -> None:
    validated = (await partial().check(RenderResult(config_set(1, "x")))).validated
    assert validated is not None
    entry = validated.files.main
    object.__setattr__(entry, "content", entry.content + b"    lua-load /tmp/x.lua\n")
    assert not validated.verify()
    target = MasterSocketTarget(short_dir / "cfg", short_dir / "m.sock", metrics=Metrics())
    result = await target.deploy(validated)
    assert result.outcome is DeployOutcome.FAILED
    assert [d.rule_id for d in result.diagnostics] == ["F7012"]
    assert not (short_dir / "cfg").exists()  # nothing was written, no reload was asked for


def test_only_the_pipeline_constructs_one() -> None:
    files = config_set(1, "x")
    with pytest.raises(TypeError):
        ValidatedFileSet(files, None, "x", _token=object())  # type: ignore[arg-type]
