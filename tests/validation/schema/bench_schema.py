"""Timing of the schema stage on a generated configuration (run: python -m tests.validation.schema.bench_schema).

1,000 backends x 5 servers (about the quickstart example at 1,000 Ingresses). Prints one JSON
object: parse time (the syntax stage's parser, for scale), first run (compiles validators),
cold (validators compiled, empty section cache), warm (one backend changed) in milliseconds.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from controller.validation.schema import SchemaEngine
from controller.validation.syntax import parse


def generate(backends: int, servers: int = 5, *, variant: int = 0) -> str:
    lines = [
        "global",
        "    maxconn 20000",
        "    log 127.0.0.1:514 local0",
        "defaults",
        "    mode http",
        "    log global",
        "    option httplog",
        "    timeout connect 5s",
        "    timeout client 30s",
        "    timeout server 30s",
        "frontend fe_http",
        "    bind 127.0.0.1:8080",
        "    http-request set-header X-Forwarded-Proto http",
    ]
    for b in range(backends):
        lines.append(f"    use_backend be_{b} if {{ req.hdr(host) -i host{b}.example.com }}")
    for b in range(backends):
        lines += [
            f"backend be_{b}",
            "    balance roundrobin",
            "    option httpchk GET /healthz",
            "    http-check expect status 200",
            "    timeout server 30s",
            f"    http-request set-header X-Backend be_{b}",
        ]
        for s in range(servers):
            weight = 100 + (variant if b == backends // 2 and s == 0 else 0)
            ip = f"10.{b // 250}.{b % 250}.{s + 1}"
            lines.append(
                f"    server srv{s} {ip}:8080 check inter 2s fall 3 rise 2 weight {weight}"
            )
    return "\n".join(lines) + "\n"


def _ms(fn: object, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


def main(backends: int = 1000) -> dict[str, float]:
    text = generate(backends)
    t = time.perf_counter()
    parsed, _ = parse(text, "haproxy.cfg")
    parse_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    first = SchemaEngine("2.8")
    first.check(parsed)
    first_ms = (time.perf_counter() - t) * 1000

    def cold() -> None:
        SchemaEngine("2.8").check(parsed)

    engine = SchemaEngine("2.8")
    engine.check(parsed)

    variants = [parse(generate(backends, variant=i), "haproxy.cfg")[0] for i in range(1, 12)]
    pending = iter(variants)

    def warm() -> None:
        engine.check(next(pending))

    directives = sum(len(s.directives) for s in parsed.sections)
    result = {
        "backends": backends,
        "directives": directives,
        "parseMs": round(parse_ms, 2),
        "firstRunMs": round(first_ms, 2),
        "coldMs": round(_ms(cold), 2),
        "warmMs": round(_ms(warm, 11), 2),
    }
    return result


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)))
