"""The metrics module: Prometheus-clean exposition, and docs/metrics.md kept equal to it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from controller.observability.metrics import Metrics, render_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def exercised() -> Metrics:
    """A registry where every labelled metric has at least one series."""
    m = Metrics()
    m.pipeline_runs.labels("change", "valid").inc()
    m.phase_duration.labels("haproxy").observe(0.06)
    m.cache_hits.inc()
    m.cache_misses.inc()
    m.reconcile_latency.observe(0.3)
    m.reconcile_runs.labels("startup").inc()
    m.reconcile_changes.inc()
    m.spec_changes.labels("accepted").inc()
    m.deploys.labels("local", "deployed").inc()
    m.reloads.labels("local", "success").inc()
    m.reload_duration.labels("local").observe(0.04)
    m.drift_redeploys.labels("local").inc()
    m.haproxy_restarts.labels("master_exited").inc()
    m.store_objects.labels("ingresses").set(3)
    m.last_deploy_timestamp.set(1.7e9)
    m.last_verdict_valid.set(1)
    return m


def test_promtool_accepts_the_exposition() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not installed (Debian package prometheus); run .ci/run setup")
    text = exercised().exposition()
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    assert proc.stdout.decode().strip() == "" and proc.stderr.decode().strip() == ""


def test_every_series_has_the_prefix_and_a_unit_or_total() -> None:
    m = exercised()
    for doc in m.describe():
        assert doc.name.startswith("htc_"), doc.name
        if doc.type == "counter":
            assert doc.name.endswith("_total"), doc.name
        if doc.type == "histogram":
            assert doc.name.endswith("_seconds"), doc.name
    names = {d.name for d in m.describe()}
    assert {
        "htc_pipeline_runs_total",
        "htc_pipeline_phase_duration_seconds",
        "htc_pipeline_cache_hits_total",
        "htc_pipeline_cache_misses_total",
        "htc_reconcile_latency_seconds",
        "htc_deploys_total",
        "htc_reloads_total",
        "htc_drift_redeploys_total",
        "htc_store_objects",
        "htc_build_info",
    } <= names


def test_registries_are_independent() -> None:
    a, b = Metrics(), Metrics()
    a.cache_hits.inc()
    assert a.sample("htc_pipeline_cache_hits_total") == 1
    assert b.sample("htc_pipeline_cache_hits_total") == 0


def test_docs_match_the_metrics_module() -> None:
    expected = render_markdown(Metrics())
    assert DOCS.read_text() == expected, (
        "docs/metrics.md is stale: python -m controller.observability > docs/metrics.md"
    )
