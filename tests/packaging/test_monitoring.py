"""The chart's alerts and dashboard: promtool is clean, each alert fires from synthetic series
(tests/packaging/alerts_test.yaml), every metric they name is in the controller's registry, and
`promtool check metrics` accepts what a running controller serves on /metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.deploy.supervisor import PARENT_DEATH_SIGNAL
from controller.observability.metrics import Metrics
from tests.fleet.dataplane_kit import free_port
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


def scrape_when_valid(url: str, seconds: float = 60.0) -> str:
    """/metrics once the first config is deployed (its verdict gauge is 1), bounded in time."""
    deadline = time.monotonic() + seconds
    last: object = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                text: str = resp.read().decode()
            if "htc_last_verdict_valid 1.0" in text:
                return text
            last = "htc_last_verdict_valid is not 1 yet"
        except (OSError, urllib.error.URLError) as err:
            last = err
        time.sleep(0.2)
    raise AssertionError(f"{url}: no valid verdict within {seconds} s (last: {last!r})")


@pytest.mark.haproxy
def test_promtool_check_metrics_on_a_live_endpoint(tmp_path: Path) -> None:
    """A real `htc local` on the quickstart, with Debian's haproxy: its /metrics as scraped."""
    status = free_port()
    argv = [str(Path(sys.executable).with_name("htc")), "local", str(REPO / "examples" / "quickstart"),
            "--haproxy", "/usr/sbin/haproxy", "--listen", f"127.0.0.1:{free_port()}",
            "--status-addr", f"127.0.0.1:{status}", "--work-dir", str(tmp_path / "work"),
            "--log-format", "json"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=PARENT_DEATH_SIGNAL)  # fmt: skip
    try:
        text = scrape_when_valid(f"http://127.0.0.1:{status}/metrics")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    check = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True,
                           text=True, check=False)  # fmt: skip
    assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), (
        check.stdout + check.stderr
    )
    assert "htc_deploys_total" in text and "htc_pipeline_phase_duration_seconds_bucket" in text
