"""Render a HAProxyTemplateConfig over a store view into a FileSet.

A :class:`Renderer` is built once per spec: it parses and compiles every template, builds the
render graph and settles everything that does not depend on resources (syntax errors, unknown
references, cycles, bad output names). Each :meth:`Renderer.render` then only runs compiled
code, so the reconcile loop and the admission webhook can render as often as they like.
Neither construction nor rendering raises for anything a spec or a resource can contain;
problems are diagnostics in the :class:`RenderResult`.

Which outputs end up in the FileSet: those whose template rendered. An output whose
``after_output`` hook reported an error is in it too (state ``failed``; its dependants are
blocked) so reports can show the offending lines; the result is not ``ok`` either way.
"""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jinja2 import Template, TemplateSyntaxError, meta, nodes

from controller.diagnostics import (
    Diagnostic,
    Location,
    Phase,
    RuleId,
    Severity,
    TemplateLocation,
    make,
)
from controller.render.budget import BudgetExceeded, Meter, current
from controller.render.codecache import CodeCache, Compiled, Kind, shared
from controller.render.context import CURRENT, Outputs, PathFor, RenderedOutput, Resources
from controller.render.environment import TemplateEnvironment
from controller.render.errors import render_error, syntax_error
from controller.render.expression import parse_expression
from controller.render.fileset import MAIN_CONFIG, FileEntry, FileKind, FileSet, path_for
from controller.render.filters import FILTERS
from controller.render.graph import (
    DYNAMIC,
    Reference,
    RenderGraph,
    TemplateRefs,
    build_graph,
    references,
)
from controller.render.incremental import (
    Read,
    Recorder,
    Tokens,
    TracingView,
    current_recorder,
    same_value,
    unchanged,
)
from controller.render.keyed import keyed_names
from controller.render.listfilters import LIST_FILTERS
from controller.render.result import (
    OutputStatus,
    RenderBudget,
    RenderInputs,
    RenderResult,
    SourceMap,
)
from controller.render.snippets import SHARED_NAMES, SnippetLoader, SnippetTemplate
from controller.render.sourcemap import LazyLines
from controller.resources import StoreView
from controller.spec import HAProxyTemplateConfigSpec, Output

AfterOutput = Callable[[str, RenderedOutput], Sequence[Diagnostic]]
"""Called right after an output renders; an error-severity diagnostic fails that output and
blocks every output that depends on it (the inline CEL rules use this)."""

_METER = current()
_RECORDER = current_recorder()

WHEN_SUFFIX = "#when"
"""Template name of an output's ``when`` expression: ``hosts.map#when``."""


@dataclass(frozen=True, slots=True)
class OutputDef:
    """One output of the spec: its name, where it deploys, and where its source lives."""

    name: str
    kind: FileKind
    path: str
    spec_path: str
    """Where the output is defined in the spec, for messages (``maps['hosts.map']``)."""
    output: Output


_KINDS: tuple[tuple[str, FileKind], ...] = (
    ("maps", FileKind.MAP),
    ("files", FileKind.FILE),
    ("certificates", FileKind.CERT),
)


def output_defs(spec: HAProxyTemplateConfigSpec) -> tuple[list[OutputDef], list[Diagnostic]]:
    """The spec's outputs, named by key; bad or clashing names are diagnostics, not outputs."""
    defs = [
        OutputDef(MAIN_CONFIG, FileKind.CONFIG, MAIN_CONFIG, "haproxyConfig", spec.haproxy_config)
    ]
    diags: list[Diagnostic] = []
    for spec_field, kind in _KINDS:
        outputs: Mapping[str, Output] = getattr(spec, spec_field)
        for name, out in outputs.items():
            spec_path = f"{spec_field}[{name!r}]"
            try:
                path = path_for(kind, name)
            except ValueError as exc:
                diags.append(
                    make(
                        "E1011",
                        Phase.RENDER,
                        f"{spec_path}: {exc}",
                        template_location=TemplateLocation(template=name),
                    )
                )
                continue
            defs.append(OutputDef(name, kind, path, spec_path, out))
    by_name: dict[str, list[OutputDef]] = {}
    for d in defs:
        by_name.setdefault(d.name, []).append(d)
    kept: list[OutputDef] = []
    for name, group in by_name.items():
        if len(group) == 1:
            kept.append(group[0])
            continue
        where = ", ".join(d.spec_path for d in group)
        diags.append(
            make(
                "E1010",
                Phase.RENDER,
                f"output name {name!r} is defined more than once ({where}); "
                "outputs[...] and the source map could not tell them apart",
                template_location=TemplateLocation(template=name),
            )
        )
    return kept, diags


@dataclass
class _Compiled:
    template: Template | None = None
    when: Template | None = None
    refs: list[TemplateRefs] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Basis:
    """What one evaluation of an output's template or ``when`` read: reused while all of it
    is unchanged (see :meth:`Renderer._unchanged`)."""

    reads: tuple[Read, ...]
    deps: tuple[tuple[str, str], ...]
    """(name, text) of every dependency that rendered, by name."""
    skipped: frozenset[str]
    http: Any
    extra: Any
    chars: int
    """What the evaluation charged the size budget, shared modules apart."""
    modules: tuple[tuple[str, int], ...]
    used: tuple[tuple[str, Any], ...]
    """The shared modules it imported (name, module): it is reused only while this render's
    modules are the very same objects (not re-evaluated, or evaluated again to the same
    exports, see :mod:`controller.render.sameness`)."""
    tokens: Tokens
    """The content tokens of the collections it read (see :func:`.incremental.unchanged`)."""


@dataclass(frozen=True, slots=True)
class _Kept:
    """An output as the latest render produced it, and everything it read."""

    output: RenderedOutput | None
    """None when no other output reads this one and its text is pure ASCII: the text is then
    ``content`` decoded, made again when the output is kept. At 10,000 Ingresses the maps and
    haproxy.cfg are 4 MB of text that only this memo held (the bytes are the last render's
    files too). An output others read keeps its text: their records of what they read hold it
    anyway, and compare it by identity first."""
    pieces: list[str]
    content: bytes
    basis: _Basis


@dataclass(frozen=True, slots=True)
class _Judged:
    """An output's ``when`` as the latest render evaluated it (never a failure), and what it
    read. A ``when`` typically reads another output's text (the quickstart's certificate
    slots ask whether ``crt-list`` names them): 300 of them evaluated on every render were
    a quarter of a render after one changed Ingress at 1,000 Ingresses."""

    verdict: bool
    basis: _Basis


@dataclass(frozen=True, slots=True)
class _Failure:
    """An output that cannot render with this spec, whatever the resources."""

    state: str  # "failed" (its own template is at fault) or "blocked" (a snippet's)
    root: str  # the root cause, named in E1008 of dependants


class Renderer:
    """Compiled templates and render graph of one spec; :meth:`render` is cheap and reentrant."""

    def __init__(
        self, spec: HAProxyTemplateConfigSpec, *, code_cache: CodeCache | None = None
    ) -> None:
        """``code_cache``: where compiled sources are reused from (default: the process's,
        see :mod:`controller.render.codecache`)."""
        self.spec = spec
        self._loader = SnippetLoader()
        self.environment = env = TemplateEnvironment(self._loader)
        env.filters.update(FILTERS)
        env.filters.update(LIST_FILTERS)
        self._codes = (code_cache if code_cache is not None else shared()).bind(env)
        self._static: list[Diagnostic] = []
        self._failures: dict[str, _Failure] = {}
        self._free: dict[str, frozenset[str]] = {}

        defs, name_diags = output_defs(spec)
        self._static.extend(name_diags)
        self.outputs: dict[str, OutputDef] = {d.name: d for d in defs}
        known: dict[FileKind, set[str]] = {}
        for d in defs:
            known.setdefault(d.kind, set()).add(d.name)
        self._path_for = PathFor({k: frozenset(v) for k, v in known.items()})

        templates: dict[str, TemplateRefs] = {}
        snippet_refs: dict[str, TemplateRefs | None] = {}
        snippet_problem: dict[str, str] = {}
        free: dict[str, frozenset[str]] = {}
        for name, snippet in sorted(spec.template_snippets.items()):
            tmpl, refs, diag = self._compile(name, snippet.template, None, snippet=True)
            snippet_refs[name] = refs
            if tmpl is None or refs is None:
                assert diag is not None
                self._static.append(diag)
                snippet_problem[name] = f"snippet {name!r}: {diag.rule_id} {diag.message}"
            else:
                self._loader.templates[name] = tmpl
                templates[name] = refs
                free[name] = self._free.pop(name)
        self._mark_pure(free, snippet_refs)

        self._compiled: dict[str, _Compiled] = {}
        for name, d in self.outputs.items():
            c = self._compiled[name] = _Compiled()
            c.template, refs, diag = self._compile(name, d.output.template, d.path)
            if refs is not None:
                c.refs.append(refs)
                templates[name] = refs
            if diag is not None:
                self._fail(name, diag)
            if d.output.when is not None:
                c.when, when_refs, when_diag = self._compile_when(d, d.output.when)
                if when_refs is not None:
                    c.refs.append(when_refs)
                    templates[name + WHEN_SUFFIX] = when_refs
                if when_diag is not None:
                    self._fail(name, when_diag)

        self.graph: RenderGraph = build_graph(
            self.outputs,
            {n: c.refs for n, c in self._compiled.items()},
            snippet_refs,
            templates=templates,
        )
        self._settle_references(snippet_problem)
        self._settle_cycles()
        self._settle_snippet_users(snippet_problem)
        self._order = (*self.graph.order, *sorted(set(self.outputs) - set(self.graph.order)))
        self._memo: dict[str, _Kept] = {}
        """Each output as the latest render produced it (see :mod:`.incremental`)."""
        self._read: frozenset[str] = frozenset().union(*self.graph.dependencies.values())
        """The outputs some other output reads (``outputs[...]``)."""
        self._judged: dict[str, _Judged] = {}
        """Each output's ``when`` as the latest render evaluated it."""
        self._when_false = {
            name: OutputStatus(name, d.path, "skipped", "`when` is false")
            for name, d in self.outputs.items()
        }
        """One status per output for a false `when` (immutable, so shared by every render)."""
        self._inputs: tuple[dict[str, Any], dict[str, Any]] | None = None
        weakref.finalize(self, _forget, self._loader, env).atexit = False

    # -- construction ------------------------------------------------------------------------

    def _compile(
        self, name: str, source: str, output_path: str | None, *, snippet: bool = False
    ) -> tuple[Template | None, TemplateRefs | None, Diagnostic | None]:
        env = self.environment
        cls = SnippetTemplate if snippet else env.template_class
        kind: Kind = "snippet" if snippet else "template"

        def build() -> Compiled:
            tree = env.parse(source, name=name, filename=name)
            refs = references(tree, name)
            free = lookups = None
            if snippet:
                free = frozenset(meta.find_undeclared_variables(tree))
                lookups = _lookup_names(tree)
            return Compiled(env.compile(tree, name=name, filename=name), refs, free, lookups)

        try:
            found = self._codes.compiled(kind, name, source, build)
            if snippet:
                self._free[name] = found.free or frozenset()
            tmpl = cls.from_code(env, found.code, env.make_globals(None))
            if isinstance(tmpl, SnippetTemplate):
                tmpl.source = source
                tmpl._lookup_names = found.lookups
            return tmpl, found.refs, None
        except TemplateSyntaxError as exc:
            return None, None, syntax_error(exc, name, output_path=output_path)
        except RecursionError:
            diag = make(
                "E1001",
                Phase.RENDER,
                "the template is nested too deeply to compile",
                location=Location(file=output_path) if output_path else None,
                template_location=TemplateLocation(template=name),
            )
            return None, None, diag
        except Exception as exc:  # a bug of ours: report it, never raise
            return None, None, _internal(exc, name, output_path)

    def _mark_pure(
        self, free: Mapping[str, frozenset[str]], refs: Mapping[str, TemplateRefs | None]
    ) -> None:
        """Which snippets evaluate the same for every output (see controller.render.snippets)."""
        allowed = SHARED_NAMES | set(self.environment.globals)
        verdict: dict[str, bool] = {}

        def pure(name: str, visiting: frozenset[str]) -> bool:
            if name in verdict:
                return verdict[name]
            r = refs.get(name)
            if r is None or name in visiting or name not in free or not free[name] <= allowed:
                return False
            ok = all(s.name != DYNAMIC and pure(s.name, visiting | {name}) for s in r.snippets)
            verdict[name] = ok
            return ok

        for name, tmpl in self._loader.templates.items():
            if isinstance(tmpl, SnippetTemplate):
                tmpl.pure = pure(name, frozenset())

    def _compile_when(
        self, d: OutputDef, source: str
    ) -> tuple[Template | None, TemplateRefs | None, Diagnostic | None]:
        env = self.environment
        tname = d.name + WHEN_SUFFIX

        def build() -> Compiled:
            expr = parse_expression(env, source, tname)
            target = nodes.Name("result", "store", lineno=1)
            tree = nodes.Template([nodes.Assign(target, expr, lineno=1)], lineno=1)
            tree.set_environment(env)
            refs = references(tree, tname)
            return Compiled(env.compile(tree, name=tname, filename=tname), refs)

        try:
            found = self._codes.compiled("when", tname, source, build)
            code = found.code
            return env.template_class.from_code(env, code, env.make_globals(None)), found.refs, None
        except TemplateSyntaxError as exc:
            diag = make(
                "E1009",
                Phase.RENDER,
                f"`when` of {d.spec_path} does not parse: {exc.message}",
                location=Location(file=d.path),
                template_location=TemplateLocation(template=tname, line=exc.lineno),
            )
            return None, None, diag
        except Exception as exc:
            return None, None, _internal(exc, tname, d.path)

    def _fail(self, name: str, diag: Diagnostic, state: str = "failed") -> None:
        self._static.append(diag)
        if name not in self._failures:
            self._failures[name] = _Failure(state, f"{name}: {diag.rule_id} {diag.message}")

    def _settle_references(self, snippet_problem: dict[str, str]) -> None:
        """E1006/E1007 for constant references to undefined outputs and snippets."""
        problems: list[tuple[RuleId, Reference, str, list[str]]] = [
            ("E1006", ref, f"output {ref.name!r} is not defined", sorted(self.outputs))
            for ref in self.graph.unknown_outputs
        ] + [
            (
                "E1007",
                ref,
                f"snippet {ref.name!r} is not defined",
                sorted(self.spec.template_snippets),
            )
            for ref in self.graph.missing_snippets
        ]
        for rule_id, ref, what, defined in problems:
            message = f"{what} (defined: {', '.join(defined) or 'none'})"
            owner = ref.template.removesuffix(WHEN_SUFFIX)
            in_output = owner in self._compiled and ref.template not in self.spec.template_snippets
            diag = make(
                rule_id,
                Phase.RENDER,
                message,
                location=Location(file=self.outputs[owner].path) if in_output else None,
                template_location=TemplateLocation(template=ref.template, line=ref.line),
            )
            if in_output:
                self._fail(owner, diag)
            else:
                self._static.append(diag)
                snippet_problem.setdefault(
                    ref.template, f"snippet {ref.template!r}: {rule_id} {message}"
                )

    def _settle_cycles(self) -> None:
        for cycle in self.graph.cycles:
            text = self.graph.format_cycle(cycle)
            diag = make(
                "E1005",
                Phase.RENDER,
                f"render cycle: {text}",
                location=Location(file=self.outputs[cycle[0]].path),
                template_location=self._reference_to(cycle[0], cycle[1]),
            )
            self._static.append(diag)
            for member in cycle[:-1]:
                self._failures.setdefault(member, _Failure("failed", f"render cycle {text}"))

    def _reference_to(self, source: str, target: str) -> TemplateLocation:
        """Where ``source`` (or a snippet it uses) refers to output ``target``."""
        candidates = list(self._compiled[source].refs)
        candidates += [
            self.graph.templates[s]
            for s in sorted(self.graph.snippets.get(source, ()))
            if s in self.graph.templates
        ]
        for wanted in (target, DYNAMIC):
            for refs in candidates:
                for r in refs.outputs:
                    if r.name == wanted:
                        return TemplateLocation(template=r.template, line=r.line)
        return TemplateLocation(template=source)

    def _settle_snippet_users(self, snippet_problem: dict[str, str]) -> None:
        """Outputs that use a broken snippet can never render; name the snippet's problem."""
        for name in sorted(self.outputs):
            if name in self._failures:
                continue
            for s in sorted(self.graph.snippets.get(name, ())):
                if s in snippet_problem:
                    self._failures[name] = _Failure("blocked", snippet_problem[s])
                    self._static.append(self._blocked(name, snippet_problem[s]))
                    break

    def _blocked(self, name: str, root: str, via: str | None = None) -> Diagnostic:
        d = self.outputs[name]
        because = f"it depends on output {via!r}, which did not render; " if via else ""
        return make(
            "E1008",
            Phase.RENDER,
            f"{d.spec_path} was not rendered: {because}root cause: {root}",
            location=Location(file=d.path),
            template_location=TemplateLocation(template=name),
        )

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """Problems found when compiling the spec; every render reports them too."""
        return tuple(self._static)

    @property
    def shared_snippets(self) -> frozenset[str]:
        """Snippets evaluated once per render however many outputs import them (see
        :mod:`controller.render.snippets`); ``htc lint`` can point out the others."""
        return frozenset(
            n
            for n, t in self._loader.templates.items()
            if isinstance(t, SnippetTemplate) and t.pure
        )

    # -- rendering ----------------------------------------------------------------------------

    def render(
        self,
        view: StoreView,
        *,
        http: Mapping[str, str] | None = None,
        extra_context: Mapping[str, Any] | None = None,
        after_output: AfterOutput | None = None,
        skip: Mapping[str, str] | None = None,
    ) -> RenderResult:
        """Render every output in graph order. Never raises.

        ``skip`` names outputs the caller already knows must not render (output → root
        cause): each is reported blocked (E1008) with that cause, and so is every output
        that depends on it.

        The cyclic garbage collector is off while the render runs. A render allocates
        objects by the million (contexts, route dicts, text chunks) that either survive as
        its result or are freed by reference counting; the collector, triggered every 700
        allocations, walks the survivors again and again and frees next to nothing (measured:
        560 collections, 0.55 s of a 2.1 s render of the quickstart at 10,000 Ingresses, CPU
        time). Off, the young objects are examined once, by the first collection after the
        render (about 0.1 s). The switch is process-wide; it is turned back on only if it was
        on, so this and the validation pipeline's pause (controller.validation.gcpause) leave
        it as they found it in either order."""
        resume = gc.isenabled()
        gc.disable()
        self._loader.begin()
        try:
            return self._render(view, http, extra_context, after_output, skip or {})
        except Exception as exc:  # a bug of ours; the caller still gets a result
            diag = _internal(exc, "render", None)
            return RenderResult(FileSet(), diagnostics=(*self._static, diag))
        finally:
            self._loader.end()
            if resume:
                gc.enable()

    def _render(
        self,
        view: StoreView,
        http: Mapping[str, str] | None,
        extra_context: Mapping[str, Any] | None,
        after_output: AfterOutput | None,
        skip: Mapping[str, str],
    ) -> RenderResult:
        started = time.perf_counter()
        diags = list(self._static)
        statuses: dict[str, OutputStatus] = {}
        root: dict[str, str] = {}
        for name, failure in self._failures.items():
            statuses[name] = OutputStatus(
                name, self.outputs[name].path, failure.state, failure.root
            )
            root[name] = failure.root
        for name, cause in sorted(skip.items()):
            if name in self.outputs and name not in statuses:
                diags.append(self._blocked(name, cause))
                statuses[name] = OutputStatus(name, self.outputs[name].path, "blocked", cause)
                root[name] = cause
        rendered: dict[str, RenderedOutput] = {}
        skipped: set[str] = set()
        entries: list[FileEntry] = []
        pieces_by_path: dict[str, list[str]] = {}
        try:
            resources = Resources(TracingView(view))
            http_values, extra = self._stable(
                dict(http or {}), {**self.spec.extra_context, **(extra_context or {})}
            )
            base: dict[str, Any] = {
                "resources": resources,
                "http": http_values,
                "extraContext": extra,
                "path_for": self._path_for,
            }
            resources._base = base
        except Exception as exc:  # a broken store view: nothing can render
            diags.append(make("F0001", Phase.RENDER, f"cannot read the resources: {exc!r}"))
            return RenderResult(FileSet(), diagnostics=tuple(diags), outputs=statuses)

        meter = Meter(self.spec.render.timeout, self.spec.render.max_output_bytes)
        token = _METER.set(meter)
        resources_token = CURRENT.set(resources)
        budgets: list[RenderBudget] = []
        out_of_budget: str | None = None  # the root cause, once a budget ran out
        total = 0  # bytes of the outputs rendered so far
        ran = True  # has a template run since the shared modules were last checked?
        compared: dict[tuple[int, int], bool] = {}
        modules = 0  # how many shared modules this render had obtained then
        try:
            for name in self._order:
                if ran or len(resources._modules) != modules:
                    _taint_changed(resources)
                    ran, modules = False, len(resources._modules)
                if name in statuses:
                    continue
                d = self.outputs[name]
                if out_of_budget is not None:
                    root[name] = out_of_budget
                    diags.append(self._blocked(name, out_of_budget))
                    statuses[name] = OutputStatus(name, d.path, "blocked", out_of_budget)
                    continue
                deps = self.graph.dependencies.get(name, _EMPTY)
                if root and not deps.isdisjoint(root):
                    bad = sorted(x for x in deps if x in root)
                    root[name] = root[bad[0]]
                    diags.append(self._blocked(name, root[name], via=bad[0]))
                    statuses[name] = OutputStatus(name, d.path, "blocked", root[name])
                    continue
                compiled = self._compiled[name]
                # Its parts built on first need: an output whose `when` is kept (a quickstart
                # has 320 such slots, every one of them checked on every render) needs none.
                ctx = _Context(
                    base, deps, frozenset(deps & skipped) if skipped else _EMPTY, rendered
                )
                meter.start()
                try:
                    if compiled.when is not None:
                        judged = self._judged.get(name)
                        verdict: bool | Diagnostic
                        if judged is not None and self._unchanged(
                            judged.basis, ctx, view, resources, compared
                        ):
                            verdict = judged.verdict
                        else:
                            ran = True
                            verdict = self._evaluate_when(d, compiled.when, ctx)
                        if isinstance(verdict, Diagnostic):
                            diags.append(verdict)
                            root[name] = f"{name}: {verdict.rule_id} {verdict.message}"
                            statuses[name] = OutputStatus(name, d.path, "failed", verdict.message)
                            continue
                        if not verdict:
                            skipped.add(name)
                            statuses[name] = self._when_false[name]
                            continue
                    template = compiled.template
                    if template is None:  # cannot happen: outputs that did not compile failed
                        continue
                    kept = self._memo.get(name)
                    if kept is not None and not self._unchanged(
                        kept.basis, ctx, view, resources, compared
                    ):
                        kept = None
                    if kept is not None:
                        pieces, content = kept.pieces, kept.content
                        out = kept.output
                        if out is None:
                            out = RenderedOutput(name, d.kind, d.path, content.decode("ascii"))
                        total += len(content)
                        _within(meter, total)
                    else:
                        ran = True
                        recorder = Recorder()
                        recording = _RECORDER.set(recorder)
                        before = meter.used_chars
                        try:
                            pieces = list(
                                template.root_render_func(template.new_context(ctx.full()))
                            )
                        finally:
                            _RECORDER.reset(recording)
                        # Checked before joining: the join itself would allocate the whole text.
                        _within(meter, total + sum(map(len, pieces)))
                        text = "".join(pieces)
                        content = text.encode()
                        total += len(content)
                        _within(meter, total)
                        out = RenderedOutput(name, d.kind, d.path, text)
                        self._memo[name] = _Kept(
                            out if name in self._read or not text.isascii() else None,
                            pieces,
                            content,
                            _basis(recorder, ctx, before),
                        )
                except BudgetExceeded as exc:
                    diag = render_error(exc, output_path=d.path, fallback_template=name)
                    diags.append(diag)
                    budgets.append(RenderBudget("render", exc.budget, exc.limit, exc.used))
                    out_of_budget = root[name] = f"{name}: {diag.rule_id} {diag.message}"
                    statuses[name] = OutputStatus(name, d.path, "failed", diag.message)
                    continue
                except Exception as exc:
                    diag = render_error(exc, output_path=d.path, fallback_template=name)
                    diags.append(diag)
                    root[name] = f"{name}: {diag.rule_id} {diag.message}"
                    statuses[name] = OutputStatus(name, d.path, "failed", diag.message)
                    continue
                finally:
                    meter.stop()
                rendered[name] = out
                entries.append(FileEntry(d.path, d.kind, content))
                pieces_by_path[d.path] = pieces
                statuses[name] = OutputStatus(name, d.path, "rendered")
                if after_output is not None:
                    hook_failure = self._after(after_output, name, out, diags)
                    if hook_failure is not None:
                        root[name] = hook_failure
                        statuses[name] = OutputStatus(name, d.path, "failed", hook_failure)
            _taint_changed(resources)
        finally:
            CURRENT.reset(resources_token)
            _METER.reset(token)
        if resources._tainted:
            for module in resources._tainted:
                tmpl = self._loader.templates.get(module)
                if isinstance(tmpl, SnippetTemplate):
                    tmpl.keep = False
                    self._loader.replace(tmpl, None)
            for memo in (self._memo, self._judged):
                for name in [n for n, m in memo.items() if _reads_tainted(m.basis, resources)]:
                    del memo[name]
        self._loader.retire(resources._modules.items())
        resources.release()

        return RenderResult(
            files=FileSet.of(entries),
            source_map=SourceMap(LazyLines(pieces_by_path)),
            diagnostics=tuple(diags),
            outputs={n: statuses[n] for n in sorted(statuses)},
            render_ms=(time.perf_counter() - started) * 1000,
            inputs=RenderInputs(view, base["http"], base["extraContext"]),
            budgets=tuple(budgets),
        )

    def _stable(
        self, http: dict[str, Any], extra: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """``http`` and ``extraContext`` as the previous render had them when they are equal
        (as templates can tell), so kept outputs and modules see the very same objects."""
        prev = self._inputs
        if prev is not None:
            http = prev[0] if same_value(prev[0], http) else http
            extra = prev[1] if same_value(prev[1], extra) else extra
        self._inputs = (http, extra)
        return http, extra

    def _unchanged(
        self,
        basis: _Basis,
        ctx: _Context,
        view: StoreView,
        resources: Resources,
        compared: dict[tuple[int, int], bool],
    ) -> bool:
        """Would evaluating again what ``basis`` records give the same result, because nothing
        it read has changed (see :mod:`controller.render.incremental`)? If so its size budget
        is charged again, as the evaluation would have.

        ``compared``: pairs of dependency texts this render compared already (by identity;
        both are alive while it runs). Sixty proxy-ssl slots read haproxy.cfg, 2.6 MB at
        10,000 Ingresses: compared once, not sixty times."""
        base = ctx.base
        if (
            (basis.modules and _reads_tainted(basis, resources))
            or basis.http is not base["http"]
            or basis.extra is not base["extraContext"]
            or basis.skipped != ctx.skipped
            or not ctx.same_texts(basis.deps, compared)
            or ((basis.reads or basis.tokens) and not unchanged(view, basis.reads, basis.tokens))
            or (
                basis.used
                and not all(self._module_now(m, ctx.full()) is module for m, module in basis.used)
            )
        ):
            return False
        meter = _METER.get()
        if meter is not None:
            meter.charge(basis.chars)
            for module, chars in basis.modules:
                if module not in resources._charged:
                    resources._charged[module] = chars
                    meter.charge(chars)
        return True

    def _module_now(self, name: str, ctx: dict[str, Any]) -> Any:
        """The shared module ``name`` as this render has it, obtained now if no output did
        yet — as the output itself would obtain it on reaching its import: everything it read
        before that import is unchanged, and a shared module reads only render-wide names.
        A module that fails is None here; the output then renders and reports the failure as
        it always does (with the size budget as it was, so the report is the same)."""
        template = self._loader.templates.get(name)
        if not isinstance(template, SnippetTemplate):
            return None
        meter = _METER.get()
        before = meter.used_chars if meter is not None else 0
        try:
            # What an import `with context` passes: the output's globals and variables.
            return template.make_module({**template.globals, **ctx}, True)
        except BudgetExceeded:
            raise
        except Exception:
            if meter is not None:
                meter.used_chars = before
            return None

    def _evaluate_when(
        self,
        d: OutputDef,
        when: Template,
        ctx: _Context,
    ) -> bool | Diagnostic:
        """The verdict of ``d``'s ``when``, remembered with what it read; a failure is E1009
        and is never remembered."""
        self._judged.pop(d.name, None)
        meter = _METER.get()
        before = meter.used_chars if meter is not None else 0
        recorder = Recorder()
        recording = _RECORDER.set(recorder)
        try:
            try:
                context = when.new_context(ctx.full())
                for _ in when.root_render_func(context):
                    pass
                verdict = bool(context.vars["result"])
            finally:
                _RECORDER.reset(recording)
            self._judged[d.name] = _Judged(verdict, _basis(recorder, ctx, before))
            return verdict
        except BudgetExceeded:
            raise  # the render stops; _render reports it
        except Exception as exc:
            diag = render_error(
                exc,
                output_path=d.path,
                fallback_template=d.name + WHEN_SUFFIX,
                prefix=f"`when` of {d.spec_path}: ",
            )
            return make(
                "E1009",
                Phase.RENDER,
                diag.message,
                location=diag.location,
                template_location=diag.template_location,
                object=diag.object,
            )

    def _after(
        self, hook: AfterOutput, name: str, out: RenderedOutput, diags: list[Diagnostic]
    ) -> str | None:
        try:
            found = list(hook(name, out))
        except Exception as exc:
            found = [
                make(
                    "F0001",
                    Phase.RENDER,
                    f"after_output hook raised for {name}: {type(exc).__name__}: {exc}",
                    location=Location(file=out.path),
                )
            ]
        diags.extend(found)
        errors = [d for d in found if d.severity.rank <= Severity.ERROR.rank]
        if not errors:
            return None
        return f"{name}: {errors[0].rule_id} {errors[0].message}"


def _forget(loader: SnippetLoader, environment: TemplateEnvironment) -> None:
    """A renderer is gone. Its compiled templates form reference cycles (a template's code
    holds the template, the environment holds the snippets through its loader), and what
    they keep for the next render hangs off them: the snippets' latest modules and fragments
    and the list filters' memo, tens of megabytes at 10,000 Ingresses, which would wait for a
    collection of the whole heap (after a new spec was adopted at 2,000 Ingresses: 59,000
    objects, 6 MB resident). Dropped here, reference counting frees them at once; the compiled
    templates themselves (about 1.6 MB for the quickstart) are left to the collector."""
    loader.forget()
    vars(environment).pop("htc_lists", None)  # the list filters' memo (listmemo.memos_of)


def _lookup_names(tree: nodes.Template) -> frozenset[str]:
    """A snippet's names used only to look keys up (see :mod:`.keyed`); none if the analysis
    fails (it cannot for a tree that parsed; if it did, no name would qualify)."""
    try:
        return keyed_names(tree, {n.name for n in tree.find_all(nodes.Name)})
    except Exception:
        return frozenset()


_EMPTY: frozenset[str] = frozenset()
"""No dependencies, or none of them skipped."""


class _Context:
    """One output's template context, made into the dict a template runs with only when
    something runs: whether a kept output or ``when`` is still valid needs just the parts
    its basis compares (the render-wide values and which dependencies were skipped)."""

    __slots__ = ("_full", "base", "deps", "rendered", "skipped")

    def __init__(
        self,
        base: dict[str, Any],
        deps: frozenset[str],
        skipped: frozenset[str],
        rendered: dict[str, RenderedOutput],
    ) -> None:
        self.base = base
        self.deps = deps
        self.skipped = skipped
        self.rendered = rendered
        self._full: dict[str, Any] | None = None

    def texts(self) -> tuple[tuple[str, str], ...]:
        """(name, text) of every dependency that rendered, by name: what a basis records."""
        rendered = self.rendered
        return tuple((x, rendered[x].content) for x in sorted(self.deps & rendered.keys()))

    def same_texts(
        self, deps: tuple[tuple[str, str], ...], compared: dict[tuple[int, int], bool]
    ) -> bool:
        """Are the dependencies that rendered now exactly ``deps``, with the same texts?"""
        rendered = self.rendered
        for name, text in deps:
            out = rendered.get(name)
            if out is None or not _same_text(text, out.content, compared):
                return False
        return len(deps) == sum(1 for x in self.deps if x in rendered)

    def full(self) -> dict[str, Any]:
        if self._full is None:
            rendered = self.rendered
            self._full = ctx = dict(self.base)
            ctx["outputs"] = Outputs(
                {x: rendered[x] for x in self.deps if x in rendered}, self.skipped
            )
        return self._full


def _basis(recorder: Recorder, ctx: _Context, before: int) -> _Basis:
    """What an evaluation that started when the size budget had ``before`` characters used,
    and recorded into ``recorder``, read."""
    meter = _METER.get()
    used = meter.used_chars if meter is not None else before
    return _Basis(
        tuple(recorder.reads),
        ctx.texts(),
        ctx.skipped,
        ctx.base["http"],
        ctx.base["extraContext"],
        used - before - recorder.module_chars,
        tuple(recorder.modules.items()),
        tuple(recorder.used.items()),
        recorder.tokens,
    )


def _same_text(old: str, new: str, compared: dict[tuple[int, int], bool]) -> bool:
    if old is new:
        return True
    key = (id(old), id(new))
    found = compared.get(key)
    if found is None:
        found = compared[key] = old == new
    return found


def _reads_tainted(basis: _Basis, resources: Resources) -> bool:
    return any(m in resources._tainted for m, _ in basis.modules)


def _taint_changed(resources: Resources) -> None:
    """Shared modules of this render that a template changed (assigned to one of their
    namespaces): read after that by others, and changed by an output or ``when`` that may
    not run again, so nothing that uses them is kept (see :mod:`.incremental`)."""
    for module, found in resources._modules.items():
        if module not in resources._tainted and not found.intact():
            resources._tainted.add(module)


def _within(meter: Meter, size: int) -> None:
    """Output of ``size`` bytes (or characters) in total must fit the render's size budget."""
    if size > meter.max_chars:
        raise BudgetExceeded("outputBytes", meter.max_chars, size)


def _internal(exc: BaseException, template: str, output_path: str | None) -> Diagnostic:
    return make(
        "F0001",
        Phase.RENDER,
        f"{template}: unexpected {type(exc).__name__} while rendering: {exc}",
        location=Location(file=output_path) if output_path else None,
        template_location=TemplateLocation(template=template),
    )
