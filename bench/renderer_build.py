"""Benchmark of building the quickstart's Renderer: compiling, and reusing compiled code.

    python bench/renderer_build.py [--config PATH] [--repeat 5] [--profile] --json

Builds the Renderer of a config (default: the quickstart, 266 templates and 256 ``when``
expressions) ``--repeat`` times in each of three ways and reports the CPU time of each build
(``process_time``: on a shared machine wall time mostly measures the neighbours):

* ``compiled``: nothing cached, every source compiled, as a process's first build without
  the disk cache;
* ``memory``: every source already compiled by an earlier Renderer of the process (a new
  spec in ``htc run``, the lint beside the render, a property test's fresh Renderer);
* ``disk``: a new process's first build with the entries an earlier ``htc validate``
  wrote (a fresh in-memory cache each time, one disk folder).

``--profile`` adds the compiled build's cumulative time per phase (parse, references, free
names, code generation, Python's compile, loading the code), measured by wrapping each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.render import CodeCache, Renderer, disk_cache  # noqa: E402
from controller.render.codecache import source_fingerprint  # noqa: E402
from controller.spec import HAProxyTemplateConfigSpec  # noqa: E402
from controller.spec.loader import load_config  # noqa: E402

QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"


def _cpu_ms(build: Callable[[], object]) -> float:
    started = time.process_time()
    build()
    return round((time.process_time() - started) * 1000, 1)


def _phases(spec: HAProxyTemplateConfigSpec) -> dict[str, float]:
    """CPU per compile phase of one uncached build, by wrapping the functions that do them."""
    import jinja2
    from jinja2 import meta

    import controller.render.renderer as renderer

    spent: dict[str, float] = {}
    undo: list[Callable[[], None]] = []

    def wrap(owner: Any, attr: str, label: str) -> None:
        original = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - started

        setattr(owner, attr, timed)
        undo.append(lambda: setattr(owner, attr, original))

    wrap(jinja2.Environment, "parse", "parse")
    wrap(renderer, "parse_expression", "parseWhen")
    wrap(renderer, "references", "references")
    wrap(meta, "find_undeclared_variables", "freeNames")
    wrap(jinja2.Environment, "_generate", "codegen")
    wrap(jinja2.Environment, "_compile", "pythonCompile")
    wrap(jinja2.Template, "from_code", "loadCode")
    try:
        total = _cpu_ms(lambda: Renderer(spec, code_cache=CodeCache(max_entries=0)))
    finally:
        for step in reversed(undo):
            step()
    out = {k: round(v * 1000, 1) for k, v in spent.items()}
    out["total"] = total
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--config", type=Path, default=QUICKSTART)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="CPU per compile phase")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    config, problems = load_config(args.config)
    if config is None:
        raise SystemExit(f"cannot load {args.config}: {problems}")
    spec = config.spec
    Renderer(spec, code_cache=CodeCache(max_entries=0))  # imports and first-use costs
    fingerprint_ms = _cpu_ms(source_fingerprint)
    runs: dict[str, list[float]] = {"compiled": [], "memory": [], "disk": []}
    memory = CodeCache()
    Renderer(spec, code_cache=memory)
    with tempfile.TemporaryDirectory(prefix="htc-bench-") as tmp:
        folder = Path(tmp) / "templates"
        writer = CodeCache()
        with disk_cache(folder, cache=writer):
            Renderer(spec, code_cache=writer)
        entries = len(os.listdir(folder))
        for _ in range(args.repeat):
            runs["compiled"].append(
                _cpu_ms(lambda: Renderer(spec, code_cache=CodeCache(max_entries=0)))
            )
            runs["memory"].append(_cpu_ms(lambda: Renderer(spec, code_cache=memory)))
            fresh = CodeCache()
            with disk_cache(folder, cache=fresh):
                runs["disk"].append(_cpu_ms(partial(Renderer, spec, code_cache=fresh)))
            assert fresh.misses == 0, "the disk cache missed"
    out: dict[str, Any] = {
        "config": str(args.config),
        "snippets": len(spec.template_snippets),
        "outputs": 1 + len(spec.maps) + len(spec.files) + len(spec.certificates),
        "whens": sum(
            o.when is not None
            for o in (spec.haproxy_config, *spec.maps.values(), *spec.files.values())
        )
        + sum(o.when is not None for o in spec.certificates.values()),
        "diskEntries": entries,
        "sourceFingerprintMs": fingerprint_ms,
        **{f"{k}CpuMsMedian": statistics.median(v) for k, v in runs.items()},
        "cpuMs": runs,
        "loadAverage": os.getloadavg()[0],
    }
    if args.profile:
        out["compiledPhasesCpuMs"] = _phases(spec)
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
