"""Run a config's embedded tests: fixtures → store → render (with inline rules) → pipeline.

Each test gets a fresh store filled with its fixtures, the spec's extraContext overridden by
the test's, and its httpSources content. Renderer, pipeline and the render-then-check step
are the engine service's (:mod:`controller.validation.service`), as reconcile's are, so a
test passes only if the controller would accept the same inputs. The pipeline (and ``haproxy -c``) runs only for tests
that assert ``valid`` or ``invalid``; the others need nothing but the renderer.

``deterministic`` renders a second time from a store filled with the fixtures in reverse
order: output that depends on the order objects arrived in (rather than the store's sorted
order) shows up as a diff.

Tests run concurrently on one event loop, ``workers`` at a time: renders in threads,
``haproxy -c`` in its own processes. Results come back in test-name order whatever finished
first.
"""

from __future__ import annotations

import asyncio
import fnmatch
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.diagnostics import Diagnostic, Location, Phase, make
from controller.render import RenderResult
from controller.resources import InvalidObject, Store, StoreConfigError, UnknownCollection
from controller.spec import AssertionType, EmbeddedTest, HAProxyTemplateConfig
from controller.validation.lint.embedded import assertion_problems
from controller.validation.pipeline import Pipeline, PipelineSetupError
from controller.validation.report import ValidationReport
from controller.validation.rules import Locator
from controller.validation.service import Engine, checking_pipeline, evaluate, ruled_renderer
from controller.validation.testing.assertions import Produced, judge_assertion
from controller.validation.testing.model import (
    AssertionResult,
    SuiteReport,
    TestResult,
    TestStatus,
)

__all__ = ["NoTestsSelected", "TestRunner", "select_tests"]

PipelineFactory = Callable[[], Pipeline]

_NEEDS_PIPELINE = frozenset({AssertionType.VALID, AssertionType.INVALID})


class NoTestsSelected(ValueError):
    """The config has no tests, or none matches the filter."""


def select_tests(tests: Mapping[str, EmbeddedTest], pattern: str | None) -> list[str]:
    """Names matching ``pattern``: a glob (``host-*``) when it has glob characters, else a
    substring."""
    names = sorted(tests)
    if pattern is None:
        return names
    if any(c in pattern for c in "*?["):
        return [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    return [n for n in names if pattern in n]


@dataclass
class _Run:
    name: str
    test: EmbeddedTest


class TestRunner:
    """Runs the tests of one config; build once, :meth:`run` as often as needed."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        config: HAProxyTemplateConfig,
        *,
        pipeline: PipelineFactory | None = None,
        haproxy_binary: str | None = None,
        locate: Locator | None = None,
    ) -> None:
        self.config = config
        self.spec = config.spec
        self.locate = locate
        self.renderer = ruled_renderer(self.spec, locate=locate)
        self._pipeline_factory = pipeline or (lambda: checking_pipeline(self.spec, haproxy_binary))
        self._pipeline: Pipeline | None = None
        self._pipeline_error: list[Diagnostic] | None = None

    @property
    def paths(self) -> dict[str, str]:
        return {n: d.path for n, d in self.renderer.renderer.outputs.items()}

    def _get_pipeline(self) -> Pipeline | None:
        if self._pipeline is None and self._pipeline_error is None:
            try:
                self._pipeline = self._pipeline_factory()
            except PipelineSetupError as exc:
                self._pipeline_error = exc.diagnostics
        return self._pipeline

    async def run(self, names: Sequence[str] | None = None, *, workers: int = 1) -> SuiteReport:
        started = time.perf_counter()
        selected = sorted(names) if names is not None else sorted(self.spec.tests)
        gate = asyncio.Semaphore(max(1, workers))

        async def one(name: str) -> TestResult:
            async with gate:
                return await self.run_one(name)

        results = await asyncio.gather(*(one(n) for n in selected))
        counts = {s.value: 0 for s in TestStatus}
        for r in results:
            counts[r.status.value] += 1
        counts["total"] = len(results)
        return SuiteReport(
            config=self.config.metadata.name,
            passed=all(r.passed for r in results),
            tests=list(results),
            counts=counts,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )

    async def run_one(self, name: str) -> TestResult:
        started = time.perf_counter()
        test = self.spec.tests[name]
        problems = self._static_problems(name, test)
        if problems:
            return self._result(name, test, TestStatus.ERROR, started, diagnostics=problems)
        try:
            first = self._store(test.fixtures, reverse=False)
            second = (
                self._store(test.fixtures, reverse=True)
                if any(a.type is AssertionType.DETERMINISTIC for a in test.assertions)
                else None
            )
        except _FixtureError as exc:
            return self._result(
                name,
                test,
                TestStatus.ERROR,
                started,
                diagnostics=[exc.diagnostic(name, self.locate)],
            )
        report: ValidationReport | None = None
        pipeline = (
            self._get_pipeline()
            if any(a.type in _NEEDS_PIPELINE for a in test.assertions)
            else None
        )
        if pipeline is not None:
            # Rendered and judged by the engine service, exactly as reconcile judges.
            engine = Engine(self.spec, self.renderer, pipeline)
            rendered, verdict = await evaluate(
                engine,
                first.snapshot(),
                dict(test.http_sources),
                extra_context=dict(test.extra_context),
            )
            if rendered is None:  # the renderer raised: the verdict says how
                diags = [_could_not_run(name, d.message, None) for d in verdict.report.diagnostics]
                return self._result(name, test, TestStatus.ERROR, started, diagnostics=diags)
            render, report = rendered, verdict.report
        else:
            render = await asyncio.to_thread(self._render, first, test)
        render2 = await asyncio.to_thread(self._render, second, test) if second else None
        if report is None and any(a.type in _NEEDS_PIPELINE for a in test.assertions):
            diags = [
                _could_not_run(
                    name, f"the pipeline could not be built: {d.rule_id} {d.message}", None
                )
                for d in self._pipeline_error or []
            ]
            return self._result(
                name, test, TestStatus.ERROR, started, diagnostics=diags, render=render
            )
        got = Produced(render, self.paths, report, render2)
        judged = [judge_assertion(i, a, got) for i, a in enumerate(test.assertions, start=1)]
        diags = [self._failure(name, r) for r in judged if not r.passed]
        status = TestStatus.PASSED if not diags else TestStatus.FAILED
        return self._result(
            name,
            test,
            status,
            started,
            assertions=judged,
            diagnostics=diags,
            render=render,
            report=report,
        )

    # --- pieces -------------------------------------------------------------------------

    def _static_problems(self, name: str, test: EmbeddedTest) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        unknown = sorted(set(test.fixtures) - set(self.spec.watched_resources))
        for coll in unknown:
            out.append(
                _could_not_run(
                    name,
                    f"fixtures name {coll!r}, which is not a watched collection",
                    self._where(name, "fixtures", coll),
                )
            )
        for i, a in enumerate(test.assertions):
            for _, message in assertion_problems(a, self.paths):
                out.append(
                    _could_not_run(
                        name, f"assertion {i + 1}: {message}", self._where(name, "assertions", i)
                    )
                )
        return out

    def _where(self, name: str, *rest: str | int) -> Location | None:
        return self.locate(("spec", "tests", name, *rest)) if self.locate else None

    def _store(self, fixtures: Mapping[str, list[dict[str, Any]]], *, reverse: bool) -> Store:
        try:
            store = Store.from_spec(self.spec)
        except StoreConfigError as exc:
            raise _FixtureError(f"the store cannot be built: {exc}") from None
        for coll in sorted(fixtures):
            objs = list(fixtures[coll])
            seen: dict[tuple[str, str], int] = {}
            for i, obj in enumerate(objs):
                key = _identity(obj, coll, i)
                if key in seen:
                    what = "/".join(k for k in key if k)
                    raise _FixtureError(
                        f"fixture {coll}[{i}] is {what} again (as {coll}[{seen[key]}]); the "
                        "store holds one object per namespace/name, so one of them would be "
                        "silently dropped",
                        (coll, i),
                    )
                seen[key] = i
            for i in reversed(range(len(objs))) if reverse else range(len(objs)):
                try:
                    store.apply(coll, objs[i])
                except (InvalidObject, UnknownCollection) as exc:
                    raise _FixtureError(f"fixture {coll}[{i}]: {exc}", (coll, i)) from None
        return store

    def _render(self, store: Store, test: EmbeddedTest) -> RenderResult:
        return self.renderer.render(
            store.snapshot(), http=dict(test.http_sources), extra_context=dict(test.extra_context)
        )

    def _failure(self, name: str, r: AssertionResult) -> Diagnostic:
        whole = r.type in _NEEDS_PIPELINE or r.type is AssertionType.RENDER_ERROR
        what = r.type.value + ("" if whole else f" {r.target}")
        text = f"test {name}: assertion {r.index} ({what}) failed: {r.message}"
        if r.description:
            text += f" — {r.description}"
        return make(
            "E8060", Phase.LINT, text, location=self._where(name, "assertions", r.index - 1)
        )

    def _result(
        self,
        name: str,
        test: EmbeddedTest,
        status: TestStatus,
        started: float,
        *,
        assertions: list[AssertionResult] | None = None,
        diagnostics: list[Diagnostic] | None = None,
        render: RenderResult | None = None,
        report: ValidationReport | None = None,
    ) -> TestResult:
        return TestResult(
            name=name,
            description=test.description,
            status=status,
            assertions=assertions or [],
            diagnostics=diagnostics or [],
            render_diagnostics=list(render.diagnostics) if render is not None else [],
            report=report,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )


def _identity(obj: object, coll: str, i: int) -> tuple[str, str]:
    """(namespace, name) of a fixture, or a precise reason why it has none.

    YAML turns ``name: 123`` into a number; the store would only say the name is missing,
    which sends the author looking in the wrong place.
    """
    where = f"fixture {coll}[{i}]"
    if not isinstance(obj, Mapping):
        raise _FixtureError(f"{where} is {_kind(obj)}, not an object", (coll, i))
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        got = "missing" if meta is None else _kind(meta)
        raise _FixtureError(f"{where}: metadata is {got}, not a mapping", (coll, i))
    out: list[str] = []
    for field in ("namespace", "name"):
        value = meta.get(field)
        if value is None and field == "namespace":
            out.append("")
            continue
        if not isinstance(value, str):
            got = "missing" if value is None else f"{value!r} ({_kind(value)})"
            hint = f'; quote it: {field}: "{value}"' if isinstance(value, int | float) else ""
            raise _FixtureError(
                f"{where}: metadata.{field} is {got}, not a string{hint}", (coll, i)
            )
        out.append(value)
    return out[0], out[1]


def _kind(value: object) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "a boolean"}
    names |= {list: "a list", dict: "a mapping"}
    return names.get(type(value), f"a {type(value).__name__}")


class _FixtureError(Exception):
    def __init__(self, message: str, where: tuple[str, int] | None = None) -> None:
        super().__init__(message)
        self.message, self.where = message, where

    def diagnostic(self, name: str, locate: Locator | None) -> Diagnostic:
        loc = None
        if locate is not None:
            path: tuple[str | int, ...] = ("spec", "tests", name, "fixtures")
            if self.where is not None:
                path = (*path, *self.where)
            loc = locate(path)
        return _could_not_run(name, self.message, loc)


def _could_not_run(name: str, message: str, location: Location | None) -> Diagnostic:
    return make("E8061", Phase.LINT, f"test {name}: {message}", location=location)
