"""The real haproxy and external stages inside the real pipeline: verdict and status."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from controller.render import FileEntry, FileKind
from controller.spec.models import ExternalValidator
from controller.validation.external import ExternalStage
from controller.validation.haproxy import HaproxyBinary, HaproxyStage
from controller.validation.pipeline import Pipeline
from controller.validation.report import ReportStatus
from tests.validation.haproxy.haproxy_kit import VALID, render

pytestmark = pytest.mark.haproxy

VALIDATORS = Path(__file__).resolve().parents[1] / "external" / "validators"


def _pipeline(binary: str, timeout: float, *validators: ExternalValidator) -> Pipeline:
    b = HaproxyBinary.detect(binary)
    stages = [HaproxyStage(b, timeout), ExternalStage(validators)]
    return Pipeline(stages, haproxy_version=b.version, cache=None)


async def test_hang_is_analysis_incomplete_never_a_pass(haproxy_bin: str) -> None:
    cfg = "global\n    lua-load files/spin.lua\n" + VALID.split("\n", 2)[2]
    rr = render(cfg, [FileEntry("files/spin.lua", FileKind.FILE, b"while true do end\n")])
    started = time.monotonic()
    report = await _pipeline(haproxy_bin, 1.0).validate(rr)
    assert time.monotonic() - started < 2.0
    assert not report.valid
    assert report.status is ReportStatus.ANALYSIS_INCOMPLETE
    [budget] = report.metadata.budget_exhaustions
    assert budget.budget == "timeout" and budget.limit == 1.0


async def test_valid_config_then_external_rejection(haproxy_bin: str) -> None:
    script = str(VALIDATORS / "reject_quietly.py")
    v = ExternalValidator(name="policy", type="command", command=[sys.executable, "-I", script])
    ok = await _pipeline(haproxy_bin, 10).validate(render(VALID))
    assert ok.valid and ok.status is ReportStatus.OK
    rejected = await _pipeline(haproxy_bin, 10, v).validate(render(VALID))
    assert not rejected.valid and "E6001" in rejected.rule_ids()
