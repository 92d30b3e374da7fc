"""``bench/admission.py`` still runs end to end, bursts and floors as docs/admission.md says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "admission.py"


@pytest.mark.slow
def test_the_admission_benchmark_runs_its_rounds_at_small_scale(haproxy_bin: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--ingresses", "5", "--concurrency", "4", "--rounds", "2",
         "--kubectl-applies", "0", "--haproxy", haproxy_bin, "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["concurrentDenied"] == 0
    rounds = result["concurrentRounds"]
    assert len(rounds) == 2
    # the reported p99 is the median of the bursts' own (of two: their mean)
    assert result["concurrentP99Ms"] == pytest.approx(sum(r["p99Ms"] for r in rounds) / 2, abs=0.1)
    # the floor's plain runs bracket every burst: before, between, after
    brackets = result["haproxyMsBetweenBursts"]
    assert len(brackets) == 3 and all(ms > 0 for ms in brackets)
    # floorMs comes from haproxyMs before either is rounded to 0.1 ms, so up to 0.05 ms of
    # haproxyMs's rounding times concurrency ÷ cores, plus floorMs's own
    scale = result["concurrency"] / result["cores"]
    assert result["floorMs"] == pytest.approx(
        scale * result["haproxyMs"], abs=0.05 * scale + 0.05 + 1e-9
    )
    assert all(r["cpuMsPerProposal"] > 0 and r["floorMs"] > 0 for r in rounds)
    assert result["concurrentCpuMsPerProposal"] > 0
