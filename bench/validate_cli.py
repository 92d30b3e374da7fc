"""Benchmark of ``htc validate`` over generated manifests, end to end, as a user runs it.

    python bench/validate_cli.py --ingresses 2000 [--haproxy BIN] [--repeat 3] [--profile OUT]
        [--templates warm|off|paired] --json

Writes N Ingresses, N Services and N EndpointSlices (the objects of ``bench/render.py``) as
three YAML files into a temporary directory, then runs ``htc validate`` on the quickstart
config over them in a fresh interpreter, ``--repeat`` times after one uncounted run that
writes the bytecode cache (as an installed package has it) and the compiled templates and
CEL rules (as any earlier run of the user's has, see ``controller.render.codecache`` and
``controller.validation.rules.rulecache``), both kept in the temporary directory.
``--templates off`` counts runs without that cache, which compile every template and rule as
a first run does; ``--templates paired`` alternates both and
reports the CPU each pair saved.

Reports the wall time of each run (``wallMs``: interpreter start, imports, loading, render,
pipeline, report; the issue's target is ≤ 2,000 ms at N = 2,000), its CPU time with its
children (``cpuMs``: on a shared machine wall time mostly measures the neighbours), the
medians, and the report's own timings (render, inline rules, each pipeline stage).

``--steps`` runs it once more in a fresh interpreter (with the counted runs' caches) and
reports the CPU time of each of its steps without a profiler (``steps``: interpreter start,
imports, reading the config, reading the manifests, filling the store, building the engine
with its lazy imports, compiled templates and rules, rendering and running the stages in this
process, the children's share (haproxy, rule workers), the report, and the rest).

``--profile OUT`` runs the command once more in this process under cProfile and writes the
stats to OUT (read them with ``python -m pstats OUT``), with the command's steps (``profileSteps``:
imports, loading, filling the store, compiling templates, building the pipeline; cumulative
profiled time, inflated by the profiler but in proportion) and the top functions by own time
(``profileTop``) in the JSON.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout, suppress
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"
HTC = Path(sys.executable).parent / "htc"


def _objects(n: int) -> list[tuple[str, dict[str, Any]]]:
    """The objects bench/render.py renders (one definition of the benchmark's shape)."""
    spec = importlib.util.spec_from_file_location("bench_render", ROOT / "bench" / "render.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out: list[tuple[str, dict[str, Any]]] = module.generate(n)
    return out


def write_manifests(n: int, folder: Path) -> list[Path]:
    """One YAML stream per collection, as ``kubectl get -o yaml`` users keep them."""
    import yaml

    class Dumper(yaml.CSafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True  # kubectl writes no anchors; the objects share sub-dicts here

    groups: dict[str, list[dict[str, Any]]] = {}
    for collection, obj in _objects(n):
        groups.setdefault(collection, []).append(obj)
    paths: list[Path] = []
    for collection, objs in groups.items():
        path = folder / f"{collection}.yaml"
        path.write_text(yaml.dump_all(objs, Dumper=Dumper, sort_keys=False))
        paths.append(path)
    return paths


def _args(folder: Path, haproxy: str | None) -> list[str]:
    out = ["validate", str(QUICKSTART), "-r", str(folder), "--format", "json"]
    if haproxy:
        out += ["--haproxy", haproxy]
    return out


def _env(folder: Path, templates: bool = True) -> dict[str, str]:
    """The environment of a user's run: bytecode cached (an installed package has it), here
    under ``folder`` so that the checkout stays clean, whatever the caller's environment
    says about writing bytecode; compiled templates cached there too (``templates``) or not
    at all."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    env["HTC_TEMPLATE_CACHE"] = str(folder / "templates") if templates else "off"
    return env


def run_once(folder: Path, haproxy: str | None, env: dict[str, str]) -> dict[str, Any]:
    """One ``htc validate`` in a fresh process: wall time, CPU time of the command and its
    children (haproxy, rule workers), exit code, and the report's own timings."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [str(HTC), *_args(folder, haproxy)], capture_output=True, text=True, env=env
    )
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return {
        "wallMs": round(wall, 1),
        "cpuMs": round(cpu, 1),
        "exit": done.returncode,
        "valid": report.get("valid"),
        "reportTimings": report.get("timings", {}),
        "stderr": done.stderr.strip().splitlines(),
    }


def profile(folder: Path, haproxy: str | None, out: Path, env: dict[str, str]) -> dict[str, Any]:
    """The command once in this process under cProfile (with the counted runs' template
    cache): time per step, top 25 by own time."""
    import cProfile
    import pstats

    os.environ["HTC_TEMPLATE_CACHE"] = env["HTC_TEMPLATE_CACHE"]
    sys.path.insert(0, str(ROOT))
    from controller.cli import main as htc_main

    profiler = cProfile.Profile()
    with open(os.devnull, "w") as sink, redirect_stdout(sink), redirect_stderr(sink):
        profiler.enable()
        try:
            htc_main.main(args=_args(folder, haproxy), standalone_mode=False)
        except SystemExit:
            pass
        finally:
            profiler.disable()
    profiler.dump_stats(str(out))
    stats = pstats.Stats(str(out))
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    steps: dict[str, float] = {}
    for (file, _line, func), (_cc, _calls, _tt, cumtime, _callers) in table.items():
        for label, (suffix, name) in STEPS.items():
            if file.endswith(suffix) and func == name:
                steps[label] = round(steps.get(label, 0.0) + cumtime * 1000, 1)
    stats.sort_stats("tottime")
    rows: list[dict[str, Any]] = []
    for func in stats.fcn_list[:25]:  # type: ignore[attr-defined]
        _cc, calls, tottime, cumtime, _callers = table[func]
        rows.append(
            {
                "function": f"{Path(func[0]).name}:{func[1]}:{func[2]}",
                "calls": calls,
                "ownMs": round(tottime * 1000, 1),
                "cumMs": round(cumtime * 1000, 1),
            }
        )
    return {"profileSteps": steps, "profileTop": rows}


STEPS = {
    "importCommand": ("controller/cli/__init__.py", "get_command"),
    "loadManifests": ("controller/resources/manifests.py", "load_manifests"),
    "fillStore": ("controller/cli/inputs.py", "_fill"),
    "compileTemplates": ("controller/render/renderer.py", "__init__"),
    "buildPipeline": ("controller/validation/pipeline.py", "from_settings"),
}
"""Step → (file, function) whose cumulative time is the step's. The render runs in a worker
thread (``evaluate``), which cProfile does not see: its time is the report's ``renderMs``
(``rulesInlineMs`` of it for the objects' inline rules), and the stages' are the report's
per-phase figures."""


def steps(folder: Path, haproxy: str | None, env: dict[str, str]) -> dict[str, float]:
    """CPU per step of one run in a fresh interpreter (see ``_steps_child``)."""
    done = subprocess.run(
        [sys.executable, __file__, "--steps-child", *_args(folder, haproxy)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    out: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


STEP_CALLS = {
    "readConfig": ("controller.cli.inputs", "load_config_located"),
    "readManifests": ("controller.cli.inputs", "load_manifests"),
    "fillStore": ("controller.cli.inputs", "_fill"),
    "report": ("controller.cli.validate", "with_config_lines"),
    "emit": ("controller.cli.validate", "_emit"),
}
"""Step → the module attribute the command calls for it (wrapped by ``_steps_child``)."""


def _steps_child(args: list[str]) -> None:
    """Run ``htc`` with ``args`` in this fresh interpreter, timing each step by CPU: the
    functions of ``STEP_CALLS``, the engine's build (the factory's product) and the event
    loop's run (render in its thread, then the stages), and print them as JSON last."""
    import asyncio
    import importlib
    import io

    start = time.process_time()  # the interpreter and this script so far (a bit more than htc)
    sys.path.insert(0, str(ROOT))
    validate: Any = importlib.import_module("controller.cli.validate")
    imported = time.process_time()
    cpu: dict[str, float] = {}

    def timed(label: str, call: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            began = time.process_time()
            try:
                return call(*a, **k)
            finally:
                cpu[label] = cpu.get(label, 0.0) + time.process_time() - began

        return wrapper

    for label, (module_name, name) in STEP_CALLS.items():
        module = importlib.import_module(module_name)
        setattr(module, name, timed(label, getattr(module, name)))
    factory = validate.default_engine
    validate.default_engine = lambda *a, **k: timed("buildEngine", factory(*a, **k))
    validate.asyncio = type(asyncio)("asyncio_timed")
    validate.asyncio.run = timed("renderAndStages", asyncio.run)
    from controller.cli import main as htc_main

    sink = io.StringIO()
    with redirect_stdout(sink), redirect_stderr(io.StringIO()), suppress(SystemExit):
        htc_main.main(args=args, standalone_mode=False)
    total = time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"interpreter": start, "imports": imported - start, **cpu}
    out["other"] = total - sum(out.values())
    out["selfTotal"] = total
    out["children"] = children.ru_utime + children.ru_stime
    out["total"] = total + out["children"]
    print(json.dumps({k: round(v * 1000, 1) for k, v in out.items()}))


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "wallMsMedian": statistics.median(r["wallMs"] for r in runs),
        "wallMsMin": min(r["wallMs"] for r in runs),
        "cpuMsMedian": statistics.median(r["cpuMs"] for r in runs),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ingresses", type=int, default=2000)
    parser.add_argument("--haproxy", default=None, help="haproxy binary (default: the spec's)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path, default=None, help="write cProfile stats here")
    parser.add_argument(
        "--templates",
        choices=("warm", "off", "paired"),
        default="warm",
        help="counted runs with the template cache written by the first run (warm), without "
        "it (off: every template compiled, as a user's first run), or alternating (paired)",
    )
    parser.add_argument(
        "--steps", action="store_true", help="CPU of each step of one more run (see above)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    if sys.argv[1:2] == ["--steps-child"]:
        _steps_child(sys.argv[2:])
        return
    args = parser.parse_args()
    modes = ("warm", "off") if args.templates == "paired" else (args.templates,)
    with tempfile.TemporaryDirectory(prefix="htc-bench-") as tmp:
        folder = Path(tmp)
        manifests = folder / "manifests"
        manifests.mkdir()
        write_manifests(args.ingresses, manifests)
        envs = {"warm": _env(folder), "off": _env(folder, templates=False)}
        run_once(manifests, args.haproxy, envs["warm"])  # writes both caches; not counted
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        for k in range(args.repeat):  # paired runs alternate which comes first
            for mode in modes if k % 2 == 0 else modes[::-1]:
                runs[mode].append(run_once(manifests, args.haproxy, envs[mode]))
        out: dict[str, Any] = {
            "ingresses": args.ingresses,
            "objects": 3 * args.ingresses,
            "templateCache": modes[0],
            **_summary(runs[modes[0]]),
            "loadAverage": os.getloadavg()[0],
            "targetMs": 2000,
        }
        if args.templates == "paired":
            out["templatesOff"] = _summary(runs["off"])
            out["pairedCpuSavedMs"] = [
                round(off["cpuMs"] - warm["cpuMs"], 1)
                for warm, off in zip(runs["warm"], runs["off"], strict=True)
            ]
        if args.steps:
            out["steps"] = steps(manifests, args.haproxy, envs[modes[0]])
        if args.profile is not None:
            out.update(profile(manifests, args.haproxy, args.profile, envs[modes[0]]))
    if args.json:
        print(json.dumps(out))
    else:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
