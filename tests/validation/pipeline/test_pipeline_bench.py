"""The pipeline benchmark runs and reports what it promises (slow: it renders 1,000 Ingresses).

Timing targets are reported by the benchmark, not asserted here — this machine is shared, so
only the cache-hit bound, which has two orders of magnitude of headroom, is checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "pipeline.py"
KEYS = {
    "ingresses",
    "haproxyVersion",
    "files",
    "renderMs",
    "renderReplacedMs",
    "ruledRenderMs",
    "rulesInlineMs",
    "ruledRenderWarmMs",
    "syntaxMs",
    "schemaMs",
    "haproxyMs",
    "totalMs",
    "cacheHitMs",
    "coldOverheadRatio",
    "warmOverheadRatio",
}


@pytest.mark.slow
def test_benchmark_prints_one_json_object(haproxy_bin: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--ingresses",
            "1000",
            "--repeat",
            "3",
            "--haproxy",
            haproxy_bin,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result = json.loads(proc.stdout)
    assert set(result) >= KEYS
    assert result["ingresses"] == 1000 and result["files"] >= 2
    assert result["haproxyVersion"].startswith(("2.6.", "2.8."))
    assert result["cacheHitMs"] <= 5.0
    # Wall time minus the stages: below zero means the breakdown counts a stage twice (or
    # misses overlap), which would make any upper bound meaningless.
    # The bound covers checksum, cache, finalization, the syntax stage's lean gate and the
    # deferred rules' cache key, which digests every object the rules read (their per-object
    # judgements are kept by content): 14 ms at 1,000 Ingresses once, 43-51 ms on a quiet
    # machine since the quickstart's rules read more (cold: every object is new; the render's
    # inline memo digests the same objects, and sharing those digests is the known fix).
    assert 0.0 <= result["cold"]["pipelineOwnMs"] < 80.0
    assert 0.0 <= result["warm"]["pipelineOwnMs"] < 25.0
    # Both full renders happened (a new renderer's, and one that let go of a whole candidate).
    assert result["renderMs"] > 0.0 and result["renderReplacedMs"] > 0.0
    # The controller's render includes the templates' and its inline rules' share of it.
    assert 0.0 < result["rulesInlineMs"] < result["ruledRenderMs"]
