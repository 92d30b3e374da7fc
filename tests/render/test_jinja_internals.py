"""Every Jinja2 internal the render layer builds on, probed by name.

Jinja2 documents its template API, not its code generator, its ``Parser`` or the private
attributes the sandbox shortcuts read. pyproject.toml caps ``jinja2`` to the minor release
these were checked against; when an upgrade moves one, the test named after it fails here,
instead of a template rendering differently somewhere downstream. The last tests keep the
list complete: a new use of an internal in ``controller/render`` must be listed.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import jinja2
import jinja2.compiler
import jinja2.environment
import jinja2.filters
import jinja2.idtracking
import jinja2.nodes
import jinja2.parser
import jinja2.runtime
import jinja2.sandbox
import jinja2.utils
import pytest
from jinja2.nodes import EvalContext

from controller.render.environment import SYNC_VARIANTS

RENDER = Path(__file__).resolve().parents[2] / "controller" / "render"


@dataclass(frozen=True)
class Internal:
    name: str
    """Dotted name as the code uses it (``Class.attribute`` for instance attributes)."""
    probe: Callable[[], object]
    """Raises, or returns False, when the internal is gone or changed shape."""


def _has_params(owner: Any, method: str, *params: str) -> bool:
    names = inspect.signature(getattr(owner, method)).parameters
    missing = [p for p in params if p not in names]
    assert not missing, f"parameters {missing} gone (has {list(names)})"
    return True


def _env() -> jinja2.sandbox.ImmutableSandboxedEnvironment:
    return jinja2.sandbox.ImmutableSandboxedEnvironment()


def _frame() -> jinja2.compiler.Frame:
    return jinja2.compiler.Frame(EvalContext(_env(), None))


def _frame_has(attr: str) -> bool:
    return attr in vars(_frame())


def _sync_filter(name: str) -> bool:
    return callable(getattr(jinja2.filters, f"sync_do_{name}"))


def _generator() -> jinja2.compiler.CodeGenerator:
    return jinja2.compiler.CodeGenerator(_env(), "t", "t")


def _generated(source: str) -> str:
    """The module Jinja2 generates for ``source`` (what our code generator emits into)."""
    return str(_env().compile(source, name="t", raw=True))


def _namespace_attrs() -> bool:
    ns = jinja2.utils.Namespace(a=1)
    ns["b"] = 2
    attrs = object.__getattribute__(ns, "_Namespace__attrs")
    return bool(attrs == {"a": 1, "b": 2})


def _pass_arg() -> bool:
    pass_arg = jinja2.utils._PassArg
    marked = jinja2.pass_context(lambda context: context)
    return pass_arg.from_obj(marked) is pass_arg.context and pass_arg.from_obj(len) is None


def _resolve_order() -> bool:
    """Context.resolve_or_missing looks in ``vars``, then ``parent``, else ``missing`` (the
    generated code spells this out)."""
    ctx = jinja2.runtime.Context(_env(), {"a": 1, "b": 2}, "t", {})
    ctx.vars["a"] = 3
    got = [ctx.resolve_or_missing(k) for k in "abc"]
    return got == [3, 2, jinja2.utils.missing]


def _resolve_loads() -> bool:
    """A name the template reads but does not set is a VAR_LOAD_RESOLVE load of its frame."""
    frame = _frame()
    output = jinja2.nodes.Output([jinja2.nodes.Name("x", "load")])
    frame.symbols.analyze_node(jinja2.nodes.Template([output]))
    ref = frame.symbols.find_ref("x")
    return ref is not None and frame.symbols.loads.get(ref) == (
        jinja2.idtracking.VAR_LOAD_RESOLVE,
        "x",
    )


def _loop_counters() -> bool:
    """What a counting loop replaces: index0, index and first of each pass."""
    loop = jinja2.runtime.LoopContext(iter("ab"), jinja2.runtime.Undefined)
    seen = [(item, ctx.index0, ctx.index, ctx.first) for item, ctx in loop]
    return seen == [("a", 0, 1, True), ("b", 1, 2, False)]


def _plain_filters() -> bool:
    """The stock filters the generated code writes out for the values they return at once
    (controller.render.trace.PLAIN_FILTERS), and those values."""
    f = jinja2.filters.FILTERS
    value = ["x"]
    return (
        f["default"](value, "c") is value
        and f["default"](jinja2.runtime.Undefined(), "c") == "c"
        and f["string"]("ab") == "ab"
        and f["string"](80) == "80"
        and f["lower"]("aB") == "ab"
        and f["int"](7, 3) == 7
    )


def _context_attributes() -> bool:
    """What Context.__init__ and EvalContext.__init__ set (fragments' evaluations set the
    same attributes directly, see controller.render.fragments._Evaluator._context)."""
    env = _env()
    context = jinja2.runtime.Context(env, {"a": 1}, "t", {})
    return (
        list(vars(context))
        == [
            "parent",
            "vars",
            "environment",
            "eval_ctx",
            "exported_vars",
            "name",
            "globals_keys",
            "blocks",
        ]
        and context.vars == {}
        and context.exported_vars == set()
        and context.globals_keys == set()
        and context.blocks == {}
        and vars(context.eval_ctx)
        == {"environment": env, "autoescape": env.autoescape, "volatile": False}
    )


def _bodies_through_blockvisit() -> bool:
    """Every statement body is written through ``blockvisit`` (and a macro's or call block's
    through ``macro_body``): the generated code forgets there what a body assigned."""

    class Seen(jinja2.compiler.CodeGenerator):
        bodies: list[object] = []

        def blockvisit(self, nodes: Any, frame: Any) -> None:
            self.bodies.append(nodes)
            super().blockvisit(nodes, frame)

    source = (
        "{% if a %}{% set x = 1 %}{% elif b %}{% set x = 2 %}{% else %}{% set x = 3 %}{% endif %}"
        "{% for i in c %}{% set y = i %}{% else %}{% set y = 0 %}{% endfor %}"
        "{% for i in c recursive %}{% set z = i %}{{ loop(i) }}{% endfor %}"
        "{% with w = 1 %}{% set v = w %}{% endwith %}{% filter upper %}{% set u = 1 %}{% endfilter %}"
        "{% set s %}{% set t = 1 %}{% endset %}{% macro m() %}{% set r = 1 %}{% endmacro %}"
        "{% call m() %}{% set q = 1 %}{% endcall %}{% block k %}{% set p = 1 %}{% endblock %}"
    )
    env = _env()
    tree = env.parse(source)
    Seen(env, "t", "t").visit(tree)
    wanted = [
        body
        for node in tree.find_all(jinja2.nodes.Stmt)
        for field in ("body", "else_")
        if (body := getattr(node, field, None))
    ] + [elif_.body for node in tree.find_all(jinja2.nodes.If) for elif_ in node.elif_]
    seen = {id(b) for b in Seen.bodies}
    return len(wanted) == 13 and all(id(b) in seen for b in wanted)


def _parser() -> bool:
    parser = jinja2.parser.Parser(_env(), "a.b rest", name="t", filename="t", state="variable")
    expr = parser.parse_expression()
    return (
        isinstance(expr, jinja2.nodes.Getattr)
        and not parser.stream.eos
        and parser.stream.current.lineno == 1
    )


CODEGEN_METHODS = {
    # overridden (name → the parameters our override passes on)
    "visit_Template": ("node", "frame"),
    "visit_For": ("node", "frame"),
    "visit_Call": ("node", "frame", "forward_caller"),
    "visit_Getattr": ("node", "frame"),
    "visit_Assign": ("node", "frame"),
    "visit_Concat": ("node", "frame"),
    "visit_FilterBlock": ("node", "frame"),
    "visit_CallBlock": ("node", "frame"),
    "visit_Output": ("node", "frame"),
    "enter_frame": ("frame",),
    "visit_Filter": ("node", "frame"),
    "visit_Name": ("node", "frame"),
    "blockvisit": ("nodes", "frame"),
    "macro_body": ("node", "frame"),
    # called
    "visit": ("node",),
    "write": ("x",),
    "writeline": ("x", "node"),
    "newline": ("node",),
    "indent": (),
    "outdent": (),
    "signature": ("node", "frame", "extra_kwargs"),
}
FRAME_ATTRIBUTES = (
    "buffer",
    "loop_frame",
    "block_frame",
    "require_output_check",
    "symbols",
    "eval_ctx",
)


def _internals() -> list[Internal]:
    cg = jinja2.compiler.CodeGenerator
    out = [
        Internal(
            f"jinja2.compiler.CodeGenerator.{name}",
            partial(_has_params, cg, name, *params),
        )
        for name, params in CODEGEN_METHODS.items()
    ]
    out += [
        Internal(
            "jinja2.compiler.CodeGenerator.has_known_extends",
            lambda: isinstance(_generator().has_known_extends, bool),
        ),
        Internal(
            "jinja2.compiler.CodeGenerator.environment",
            lambda: isinstance(_generator().environment, jinja2.Environment),
        ),
        Internal("jinja2.compiler.optimizeconst", lambda: callable(jinja2.compiler.optimizeconst)),
        Internal("jinja2.compiler.CodeGenerator.filters", lambda: _generator().filters == {}),
        Internal("jinja2.filters.FILTERS", _plain_filters),
        Internal(
            "jinja2.runtime.exported.Undefined", lambda: "Undefined" in jinja2.runtime.exported
        ),
        Internal(
            "jinja2.compiler.CodeGenerator._context_reference_stack",
            lambda: _generator()._context_reference_stack == ["context"],
        ),
    ]
    out += [
        Internal(f"jinja2.compiler.Frame.{attr}", partial(_frame_has, attr))
        for attr in FRAME_ATTRIBUTES
    ]
    out += [
        Internal(
            "jinja2.idtracking.Symbols.ref", lambda: _has_params(_frame().symbols, "ref", "name")
        ),
        Internal(
            "jinja2.idtracking.Symbols.find_ref",
            lambda: _has_params(_frame().symbols, "find_ref", "name"),
        ),
        Internal("jinja2.idtracking.Symbols.loads", _resolve_loads),
        Internal("jinja2.idtracking.VAR_LOAD_RESOLVE", _resolve_loads),
        Internal("jinja2.runtime.Context.resolve_or_missing", _resolve_order),
        Internal("jinja2.runtime.Context.__init__", _context_attributes),
        Internal("jinja2.nodes.EvalContext.__init__", _context_attributes),
        Internal("jinja2.runtime.LoopContext", _loop_counters),
        Internal("jinja2.nodes.EvalContext.volatile", lambda: _frame().eval_ctx.volatile is False),
        Internal(
            "jinja2.nodes.EvalContext.autoescape", lambda: _frame().eval_ctx.autoescape is False
        ),
        # names the generated module has, which the code we emit refers to
        Internal(
            "jinja2.runtime.exported.Namespace", lambda: "Namespace" in jinja2.runtime.exported
        ),
        Internal(
            "jinja2.runtime.exported.TemplateRuntimeError",
            lambda: "TemplateRuntimeError" in jinja2.runtime.exported,
        ),
        Internal(
            "jinja2.runtime.exported.LoopContext", lambda: "LoopContext" in jinja2.runtime.exported
        ),
        Internal("jinja2.runtime.exported.missing", lambda: "missing" in jinja2.runtime.exported),
        Internal("generated code: name", lambda: "\nname = 't'\n" in _generated("x")),
        Internal(
            "generated code: a name read",
            lambda: (
                "(undefined(name='x') if l_0_x is missing else l_0_x)"
                in _generated("{% set x = 1 %}{{ x }}")
            ),
        ),
        Internal(
            "jinja2.compiler.CodeGenerator.blockvisit: every body", _bodies_through_blockvisit
        ),
        Internal(
            "generated code: a loop's head",
            lambda: (
                ", l_1_loop in LoopContext("
                in _generated("{% for i in x %}{{ loop.index0 }}{% endfor %}")
            ),
        ),
        Internal(
            "generated code: parent_template",
            lambda: "parent_template" in _generated("{% extends 'b' %}"),
        ),
        Internal(
            "generated code: _loop_vars",
            lambda: (
                "_loop_vars=_loop_vars" in _generated("{% for i in x %}{{ i.f() }}{% endfor %}")
            ),
        ),
        Internal(
            "generated code: environment.concat",
            lambda: "concat = environment.concat\n" in _generated("{% macro m() %}a{% endmacro %}"),
        ),
        Internal(
            "jinja2.Environment.code_generator_class",
            lambda: jinja2.Environment.code_generator_class is jinja2.compiler.CodeGenerator,
        ),
        Internal(
            "jinja2.sandbox.SandboxedEnvironment.wrap_str_format",
            lambda: _has_params(jinja2.sandbox.SandboxedEnvironment, "wrap_str_format", "value"),
        ),
        Internal(
            "jinja2.Template.make_module",
            lambda: _has_params(jinja2.Template, "make_module", "vars", "shared", "locals"),
        ),
        Internal(
            "jinja2.Template.root_render_func",
            lambda: callable(_env().from_string("x").root_render_func),
        ),
        Internal(
            "jinja2.Template.new_context",
            lambda: _has_params(jinja2.Template, "new_context", "vars"),
        ),
        Internal(
            "jinja2.environment.TemplateModule",
            lambda: isinstance(_env().from_string("x").module, jinja2.environment.TemplateModule),
        ),
        Internal("jinja2.utils.Namespace._Namespace__attrs", _namespace_attrs),
        Internal("jinja2.utils._PassArg.from_obj", _pass_arg),
        Internal("jinja2.parser.Parser", _parser),
    ]
    out += [
        Internal(f"jinja2.filters.sync_do_{name}", partial(_sync_filter, name))
        for name in SYNC_VARIANTS
    ]
    return out


INTERNALS = _internals()


def broken(internal: Internal) -> str | None:
    """Why ``internal`` is broken, naming it; None when its probe passes."""
    try:
        ok = internal.probe()
    except Exception as exc:
        return f"Jinja2 internal {internal.name} broke: {type(exc).__name__}: {exc}"
    if ok is False:
        return f"Jinja2 internal {internal.name} broke: its probe found another shape"
    return None


@pytest.mark.parametrize("internal", INTERNALS, ids=lambda i: i.name)
def test_internal_is_where_the_render_layer_expects_it(internal: Internal) -> None:
    assert broken(internal) is None, f"{broken(internal)} (jinja2 {jinja2.__version__})"


def test_a_vanished_internal_fails_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(jinja2.compiler.CodeGenerator, "visit_Concat")
    [internal] = [i for i in INTERNALS if i.name.endswith("CodeGenerator.visit_Concat")]
    message = broken(internal)
    assert message is not None and "jinja2.compiler.CodeGenerator.visit_Concat" in message


def test_a_changed_internal_fails_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jinja2.utils.Namespace, "__setitem__", lambda self, k, v: None)
    [internal] = [i for i in INTERNALS if i.name.endswith("_Namespace__attrs")]
    assert "_Namespace__attrs broke" in (broken(internal) or "")


# -- the list is complete --------------------------------------------------------------------


def _tree(name: str) -> ast.Module:
    return ast.parse((RENDER / name).read_text())


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


LISTED = {i.name for i in INTERNALS}


def test_every_code_generator_member_used_is_listed() -> None:
    cls = _class(_tree("trace.py"), "TracingCodeGenerator")
    own = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    used = {n for n in own if hasattr(jinja2.compiler.CodeGenerator, n) and n != "__init__"}
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and node.attr not in own
            and not node.attr.startswith("_htc")
        ):
            used.add(node.attr)
    unlisted = {f"jinja2.compiler.CodeGenerator.{n}" for n in used} - LISTED
    assert not unlisted, f"list these Jinja2 internals here: {sorted(unlisted)}"


def test_every_frame_attribute_used_is_listed() -> None:
    used = {
        node.attr
        for node in ast.walk(_tree("trace.py"))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "frame"
    }
    unlisted = {f"jinja2.compiler.Frame.{n}" for n in used} - LISTED
    assert not unlisted, f"list these Jinja2 internals here: {sorted(unlisted)}"


INTERNAL_MODULES = (
    "jinja2.compiler",
    "jinja2.idtracking",
    "jinja2.parser",
    "jinja2.utils",
    "jinja2.filters",
    "jinja2.environment",
)


def test_every_name_imported_from_an_internal_module_is_listed() -> None:
    unlisted = set()
    for path in sorted(RENDER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in INTERNAL_MODULES:
                for alias in node.names:
                    name = f"{node.module}.{alias.name}"
                    if not any(n == name or n.startswith(name + ".") for n in LISTED):
                        unlisted.add(f"{name} ({path.name})")
    # Frame is a type annotation; the attributes read from it are listed one by one
    unlisted.discard("jinja2.compiler.Frame (trace.py)")
    assert not unlisted, f"list these Jinja2 internals here: {sorted(unlisted)}"


def test_every_private_attribute_read_by_name_is_listed() -> None:
    read = {
        node.value
        for path in RENDER.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("_Namespace__")
    }
    assert {f"jinja2.utils.Namespace.{a}" for a in read} <= LISTED
