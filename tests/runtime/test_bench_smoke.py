"""``bench/reconcile.py`` still runs end to end and reports what docs/local.md promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "reconcile.py"
KEYS = {
    "objects",
    "samples",
    "p50Ms",
    "p99Ms",
    "cpuMs",
    "renderMs",
    "validateMs",
    "deployMs",
    "burstChanges",
    "burstSentMs",
    "burstRenders",
    "burstConvergeMs",
    "startupMs",
    "startRssMb",
    "rssMb",
    "idleRssMb",
    "maxRssMb",
    "debounceMs",
    "minIntervalMs",
    "haproxyVersion",
}


@pytest.mark.slow
def test_the_reconcile_benchmark_runs_at_small_scale(haproxy_bin: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--objects",
            "5",
            "--samples",
            "2",
            "--json",
            "--haproxy",
            haproxy_bin,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert set(result) == KEYS
    assert result["objects"] == 5 and result["samples"] == 2
    assert 0 < result["p50Ms"] <= result["p99Ms"]
    assert 1 <= result["burstRenders"] <= 10  # 1,000 changes in a second coalesce
    version = subprocess.run([haproxy_bin, "-v"], capture_output=True, text=True).stdout
    assert result["haproxyVersion"] in version  # the binary asked for is the one measured
