"""The final report reads root cause first, and is byte-identical across processes.

Rule findings are judged in plan order (dependencies first). The report's generic sort
(severity, file, line) would otherwise put ``a.map``'s echo before ``z.map``'s root cause,
so the map names here run against the alphabet on purpose. Python's hash seed varies
per process, so the subprocess runs catch any order that leaks from set or dict iteration.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.spec import HAProxyTemplateConfigSpec

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from tests.rules.test_report_order import report_of
print(report_of(sys.argv[1]))
"""


def _spec() -> HAProxyTemplateConfigSpec:
    from tests.rules.rules_helpers import make_spec, rule

    def m(expr: str, severity: str = "warning") -> dict[str, object]:
        return {"template": "k v\n", "validate": {"rules": [rule("r", expr, severity=severity)]}}

    return make_spec(
        maps={
            # warnings along a chain: z.map is the root, m.map reads it, a.map reads m.map
            "z.map": m("extraContext.never == true"),
            "m.map": m("outputs['z.map'].content == 'x'"),
            "a.map": m("outputs['m.map'].content == 'x'"),
            # an error root that suppresses its readers (reported once, with I5011)
            "y.map": m("extraContext.never == true", severity="error"),
            "b.map": m("outputs['y.map'].content == ''", severity="error"),
        },
        extraContext={"never": False},
    )


def report_of(binary: str) -> str:
    from controller.validation import Pipeline
    from controller.validation.rules import RuledRenderer
    from tests.rules.rules_helpers import filled_store

    spec = _spec()
    render = RuledRenderer.from_spec(spec).render(filled_store(spec).snapshot())
    report = asyncio.run(Pipeline.from_spec(spec, haproxy_binary=binary).validate(render))
    doc = report.model_dump(mode="json", by_alias=True)
    doc.pop("timings")
    return json.dumps(doc, sort_keys=True)


def test_root_causes_come_first_in_the_final_report(haproxy_bin: str) -> None:
    doc = json.loads(report_of(haproxy_bin))
    rules = [
        (d["ruleId"], d["message"].split(":")[0])
        for d in doc["diagnostics"]
        if d["phase"] == "rules"
    ]
    assert rules == [
        ("E5003", "y.map rule r"),
        ("W5004", "z.map rule r"),
        ("W5004", "m.map rule r"),
        ("W5004", "a.map rule r"),
        ("I5011", "1 deferred rule(s) not evaluated because the rules of output y.map failed"),
    ]


@pytest.mark.slow
def test_the_report_is_identical_over_20_processes_with_varied_hash_seeds(
    haproxy_bin: str,
) -> None:
    seen: set[str] = set()
    for seed in range(20):
        env = {**os.environ, "PYTHONHASHSEED": str(seed * 7919 + 1)}
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, haproxy_bin],
            cwd=ROOT,  # -c puts the working directory first on sys.path
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        seen.add(done.stdout.strip().splitlines()[-1])
    assert len(seen) == 1
