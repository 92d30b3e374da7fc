"""CPU time of the quickstart's CEL rules over many Ingresses, the rules alone.

    python bench/rules_cpu.py --ingresses 10000 [--tls] [--repeat 3]

The rule time budget (``ruleTimeout``, 2 s by default) is CPU time, so this measures CPU
(``time.process_time``), not wall time, in this process (``Isolation.NEVER``: no worker):

* ``inlineCpuS`` — the Ingress collection's inline rules over every Ingress, none known
  (``check_objects`` with an empty verdict memo: conversion, content digests, evaluation);
* ``inlineOneChangedMs`` / ``inlineOneChangedJudged`` — the same objects again with one
  Ingress changed, with the memo of the first call: the objects judged again (one);
* ``deferredCpuS`` — every deferred rule against the rendered candidate
  (``evaluate_deferred``: the Ingress rules once per object, the output rules once).

``--tls`` gives each Ingress two hosts and a TLS entry naming both: five ``matches`` calls per
object instead of one. Medians over ``--repeat`` runs; each run's first collection pass may
include a full garbage collection of the process (the store's objects), which a rule worker
does not pay (``isolate.py``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # measure this checkout, whatever is installed


def _ingress(i: int, tls: bool, *, variant: int = 0) -> dict[str, Any]:
    from bench.pipeline import ingress

    obj = ingress(i, variant=variant)
    if tls:
        hosts = [f"app-{i}.example.test", f"www.app-{i}.example.test"]
        rule = obj["spec"]["rules"][0]
        obj["spec"]["rules"] = [{**rule, "host": h} for h in hosts]
        obj["spec"]["tls"] = [{"secretName": f"tls-{i}", "hosts": hosts}]
    return obj


def measure(n: int, tls: bool, repeat: int) -> dict[str, Any]:
    from bench.pipeline import QUICKSTART, endpoint_slice, service
    from controller.resources import Store, collections_for
    from controller.spec.loader import load_config
    from controller.validation.rules import (
        Isolation,
        RuledRenderer,
        RuleSet,
        RunBudget,
        check_objects,
        deferred_inputs,
        evaluate_deferred,
        plan,
    )
    from controller.validation.rules import inline as inline_module

    config, problems = load_config(QUICKSTART)
    if config is None:
        raise SystemExit("cannot load the quickstart: " + "; ".join(d.message for d in problems))
    spec = config.spec
    store = Store.from_spec(spec)
    watched = store.watched()
    for i in range(n):
        for obj in (_ingress(i, tls), service(i), endpoint_slice(i)):
            for name in collections_for(obj, watched):
                store.apply(name, obj)
    rules = RuleSet.from_spec(spec)
    judged: list[int] = []
    real = inline_module.judge_many

    def counting(rs: Any, selves: Any, *args: Any, **kwargs: Any) -> Any:
        judged.append(len(selves))
        return real(rs, selves, *args, **kwargs)

    inline_module.judge_many = counting  # type: ignore[assignment]
    cold: list[float] = []
    warm: list[float] = []
    for k in range(repeat):
        memo = inline_module.ObjectMemo()
        objs = store.snapshot().collection("ingresses").list()
        t = time.process_time()
        found = check_objects(
            rules, {"ingresses": objs}, budget=RunBudget(600), isolation=Isolation.NEVER, memo=memo
        )
        cold.append(time.process_time() - t)
        if found.diagnostics:
            raise SystemExit("a generated Ingress failed: " + found.diagnostics[0].message)
        store.apply("ingresses", _ingress(k % n, tls, variant=k + 1))
        objs = store.snapshot().collection("ingresses").list()
        judged.clear()
        t = time.process_time()
        check_objects(
            rules, {"ingresses": objs}, budget=RunBudget(600), isolation=Isolation.NEVER, memo=memo
        )
        warm.append(time.process_time() - t)
    inline_module.judge_many = real
    again = sum(judged)

    renderer = RuledRenderer.from_spec(spec, ruleset=rules)
    renderer.isolation = Isolation.NEVER
    render = renderer.render(store.snapshot())
    if not render.ok:
        raise SystemExit("render failed: " + "; ".join(d.message for d in render.diagnostics))
    inputs = deferred_inputs(rules, render)
    order = plan(rules)
    deferred: list[float] = []
    for _ in range(repeat):
        t = time.process_time()
        result = evaluate_deferred(rules, order, inputs)
        deferred.append(time.process_time() - t)
        if result.diagnostics:
            raise SystemExit("a deferred rule failed: " + result.diagnostics[0].message)
    inline_s = statistics.median(cold)
    return {
        "ingresses": n,
        "tls": tls,
        "inlineCpuS": round(inline_s, 3),
        "inlinePerObjectUs": round(inline_s / n * 1e6, 1),
        "inlineOneChangedMs": round(statistics.median(warm) * 1000, 2),
        "inlineOneChangedJudged": again,
        "deferredCpuS": round(statistics.median(deferred), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingresses", type=int, default=1000)
    parser.add_argument("--tls", action="store_true", help="two hosts and TLS per Ingress")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.ingresses, args.tls, max(args.repeat, 1))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
