"""The parser at benchmark size: the warm path must give the cold result, and fast.

``bench_syntax.py`` prints the numbers; the bounds here are loose on purpose (a shared,
loaded 2-core machine) and only catch a lost fast path or a lost cache.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import pytest

from controller.validation.syntax import parse
from controller.validation.syntax import parser as parser_module
from tests.validation.syntax.bench_syntax import config


def test_warm_result_equals_cold_result() -> None:
    parse(config(backends=100), "haproxy.cfg")
    changed = config(backends=100, changed=40)
    warm, warm_diags = parse(changed, "haproxy.cfg")
    parser_module._CACHE.clear()
    cold, cold_diags = parse(changed, "haproxy.cfg")
    assert warm == cold and warm_diags == cold_diags == []
    assert len(cold.sections) == 103
    changed_backend = cold.sections[3 + 40]  # after global, defaults, frontend (15 lines)
    assert changed_backend.line == 16 + 40 * 7 and len(changed_backend.directives) == 1 + 6
    assert cold.sections[-1].end_line == changed.count("\n")


@pytest.mark.slow
def test_benchmark_size_is_fast() -> None:
    base = config()

    def cold_parse() -> None:
        parser_module._CACHE.clear()
        parse(base, "h")

    best_cold = min(_timed(cold_parse) for _ in range(3))
    parse(base, "h")

    def warm_parse(i: int) -> None:
        parse(config(changed=i), "h")

    best_warm = min(_timed(functools.partial(warm_parse, i)) for i in range(3))
    assert best_cold < 150, best_cold
    assert best_warm < 25, best_warm


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000
