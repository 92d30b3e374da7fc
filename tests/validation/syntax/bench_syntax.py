"""Measure the parser on a benchmark-sized config: ``python -m tests.validation.syntax.bench_syntax``.

1,000 backends x 5 servers (about 7,000 lines, the size of the 1,000-Ingress benchmark).
Cold = a text never seen, all caches emptied (median of 7; the very first parse in a fresh
process also pays for memory the interpreter has not allocated yet, reported separately);
warm = right after the base was parsed, the same text with one backend changed (the
admission/reconcile case): a server added to backend 500 (every later section moves down a
line and is shifted, not re-read), to the first or last backend, or an address changed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from controller.validation.syntax import parse
from controller.validation.syntax import parser as parser_module
from controller.validation.syntax import tokenizer as tokenizer_module


def config(backends: int = 1000, servers: int = 5, changed: int = -1, seed: int = 0) -> str:
    out = [
        "global",
        "    log stdout format raw local0",
        "    maxconn 50000",
        "    crt-base certs",
        "defaults",
        "    mode http",
        "    timeout connect 5s",
        "    timeout client 30s",
        "    timeout server 30s",
        "frontend http",
        "    bind 127.0.0.1:8080",
        "    http-request set-var(txn.host) req.hdr(host),lower  # normalised host",
        '    http-request set-header X-Forwarded-Proto "http"',
        "    use_backend %[var(txn.host),map(maps/hosts.map,default)]",
        "    default_backend default",
    ]
    for b in range(backends):
        out.append(f"backend ns{seed}-svc{b}")
        out.append("    balance roundrobin")
        n = servers + (1 if b == changed else 0)
        for s in range(n):
            out.append(f"    server s{s} 10.{b // 250}.{b % 250}.{s + 1}:8080 check weight 10")
    return "\n".join(out) + "\n"


def timed(fn: Callable[[], object], repeat: int = 7) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(runs)


def main() -> None:
    base = config()
    lines = base.count("\n")
    t0 = time.perf_counter()
    parse(config(seed=1), "haproxy.cfg")
    first_ms = (time.perf_counter() - t0) * 1000

    def cold() -> None:
        parser_module._CACHE.clear()
        parser_module._LINES.clear()
        for known in tokenizer_module._BY_COLUMN:
            known.clear()
        parse(base, "haproxy.cfg")

    cold_ms = timed(cold)

    def warm_after(text: str) -> float:
        """Parse ``text`` right after the base config was parsed from scratch."""
        runs = []
        for _ in range(5):
            cold()
            t0 = time.perf_counter()
            parse(text, "haproxy.cfg")
            runs.append((time.perf_counter() - t0) * 1000)
        return statistics.median(runs)

    spread: dict[int | str, float] = {
        where: warm_after(config(changed=where)) for where in (0, 500, 999)
    }
    spread["ip"] = warm_after(base.replace("10.2.0.3:8080", "10.2.0.9:8080"))  # endpoint moved
    warm_ms = spread[500]
    parsed, diags = parse(base, "haproxy.cfg")
    print(
        f"lines={lines} sections={len(parsed.sections)} diagnostics={len(diags)} "
        f"first_in_process_ms={first_ms:.1f} cold_ms={cold_ms:.1f} warm_ms={warm_ms:.2f} "
        f"(a server added to backend 0: {spread[0]:.2f}, to backend 999: {spread[999]:.2f}; "
        f"an endpoint address changed: {spread['ip']:.2f})"
    )


if __name__ == "__main__":
    main()
