"""Speed guard on the benchmark-sized input (1,000 backends x 5 servers). The bounds are loose
(shared CI machines); bench_schema.py prints the real numbers."""

from __future__ import annotations

import time

import pytest

from controller.validation.schema import SchemaEngine
from controller.validation.syntax import parse
from tests.validation.schema.bench_schema import generate


@pytest.mark.slow
def test_cold_and_warm_validation_of_a_large_config() -> None:
    parsed, _ = parse(generate(1000), "haproxy.cfg")
    changed, _ = parse(generate(1000, variant=1), "haproxy.cfg")
    SchemaEngine("2.8").check(parsed)  # compile the validators once
    engine = SchemaEngine("2.8")
    t = time.perf_counter()
    assert engine.check(parsed) == []
    cold_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    assert engine.check(changed) == []
    warm_ms = (time.perf_counter() - t) * 1000
    assert engine.stats.sections_checked == 1003 + 1  # one backend changed
    assert cold_ms < 150, cold_ms
    assert warm_ms < 15, warm_ms
