"""Builders for the haproxy stage tests: render results with hand-made source maps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.diagnostics import TemplateLocation
from controller.render import FileEntry, FileKind, FileSet, RenderResult, SourceMap
from controller.validation.haproxy import HaproxyBinary, HaproxyStage
from controller.validation.stage import StageContext, StageOutcome

TEMPLATE = "haproxy.cfg.j2"

VALID = """\
global
    maxconn 1000
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind 127.0.0.1:18080
    default_backend be
backend be
    server s1 127.0.0.1:18081
"""


def render(
    config: str,
    extra: Sequence[FileEntry] = (),
    template_lines: Mapping[int, int] | None = None,
) -> RenderResult:
    """A render result whose source map says rendered line N came from template line
    ``template_lines[N]`` (default: N + 100, as if a 100-line header preceded it)."""
    n = config.count("\n") + 1
    mapping = template_lines or {i: i + 100 for i in range(1, n + 1)}
    locs = tuple(
        TemplateLocation(template=TEMPLATE, line=mapping[i]) if i in mapping else None
        for i in range(1, n + 1)
    )
    files = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, config.encode()), *extra])
    return RenderResult(files=files, source_map=SourceMap({"haproxy.cfg": locs}))


async def check(binary: str, rr: RenderResult, *, timeout: float = 10.0) -> StageOutcome:
    stage = HaproxyStage(HaproxyBinary.detect(binary), timeout)
    return await stage.run(StageContext(render=rr))


def ids(outcome: StageOutcome) -> list[str]:
    return [d.rule_id for d in outcome.diagnostics]


def errors(outcome: StageOutcome) -> list[str]:
    return [d.rule_id for d in outcome.diagnostics if d.severity.rank <= 1]


def large_config(backends: int = 1000, servers: int = 5) -> tuple[str, FileEntry]:
    """The benchmark shape: one frontend routing by a host map to N backends of M servers."""
    lines = [
        "global",
        "    maxconn 50000",
        "defaults",
        "    mode http",
        "    timeout connect 5s",
        "    timeout client 30s",
        "    timeout server 30s",
        "frontend fe",
        "    bind 127.0.0.1:18080",
        "    use_backend %[req.hdr(host),lower,map(maps/hosts.map,be_default)]",
        "    default_backend be_default",
        "backend be_default",
        "    http-request return status 404",
    ]
    hosts = []
    for i in range(backends):
        lines += [f"backend be_{i}", "    balance roundrobin"]
        lines += [
            f"    server s{s} 10.{i // 250}.{i % 250}.{s + 1}:8080 check inter 5s"
            for s in range(servers)
        ]
        hosts.append(f"host{i}.example.com be_{i}")
    hosts_map = FileEntry("maps/hosts.map", FileKind.MAP, ("\n".join(hosts) + "\n").encode())
    return "\n".join(lines) + "\n", hosts_map
