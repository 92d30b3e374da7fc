"""The chart's alerts and dashboard: promtool is clean, each alert fires from synthetic series
(tests/packaging/alerts_test.yaml), and every metric they name is in the controller's registry."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.observability.metrics import Metrics
from tests.packaging.manifests import REPO

FILES = REPO / "charts" / "haproxy-template-controller" / "files"
ALERTS = FILES / "alerts.yaml"
DASHBOARD = FILES / "dashboard.json"
ALERT_TESTS = Path(__file__).with_name("alerts_test.yaml")

METRIC = re.compile(r"\bhtc_[a-z0-9_]+")
SUFFIXES = ("_bucket", "_sum", "_count", "_created")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: .ci/run installs Debian's prometheus")
    return found


def registry() -> dict[str, Any]:
    return {m.name: m for m in Metrics().describe()}


def names_in(expr: str) -> set[str]:
    known = registry()
    out = set()
    for name in METRIC.findall(expr):
        if name not in known:
            for suffix in SUFFIXES:
                base = name.removesuffix(suffix)
                if base != name and known.get(base) and known[base].type == "histogram":
                    name = base
        out.add(name)
    return out


def alert_exprs() -> list[str]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule["expr"] for g in groups for rule in g["rules"]]


def dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def test_promtool_check_rules() -> None:
    proc = subprocess.run(
        [promtool(), "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_test_rules_fires_every_alert() -> None:
    proc = subprocess.run(
        [promtool(), "test", "rules", str(ALERT_TESTS)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ALERT_TESTS.parent,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tested = set(re.findall(r"alertname: (\w+)", ALERT_TESTS.read_text()))
    defined = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    assert defined <= tested, defined - tested


@pytest.mark.parametrize("source", ["alerts", "dashboard"])
def test_every_metric_named_exists(source: str) -> None:
    exprs = alert_exprs() if source == "alerts" else dashboard_exprs()
    assert exprs
    named = set().union(*(names_in(e) for e in exprs))
    unknown = named - set(registry())
    assert not unknown, f"{source} names metrics the controller does not export: {unknown}"


def test_the_name_check_can_fail() -> None:
    assert names_in("rate(htc_no_such_metric_total[5m])") - set(registry())
    assert names_in("htc_reconcile_latency_seconds_bucket") == {"htc_reconcile_latency_seconds"}


def test_dashboard_covers_the_core_metrics() -> None:
    named = set().union(*(names_in(e) for e in dashboard_exprs()))
    for core in ("htc_last_verdict_valid", "htc_pipeline_runs_total", "htc_deploys_total",
                 "htc_leader", "htc_reconcile_latency_seconds"):  # fmt: skip
        assert core in named, core
