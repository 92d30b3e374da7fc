"""Source maps that stay exact through includes, macros and ``{% set %}`` blocks.

Jinja2 only knows template lines while code runs; once a macro has returned a string, where
each of its lines came from is gone. So the origin travels *with the text*, without changing
what templates see:

* The code generator (:class:`TracingCodeGenerator`) turns every piece of literal template
  text into a module constant of type :class:`Traced` — a ``str`` subclass that carries the
  template locations of the lines it spans — and puts an empty ``Traced`` *marker* in front of
  every ``{{ expression }}`` output. Both are built once per compiled template, so rendering
  allocates nothing extra for them.
* Whenever Jinja2 joins a buffer (macro bodies, ``caller()``, ``{% set %}`` and
  ``{% filter %}`` blocks) it calls ``environment.concat``; ours returns a ``Traced`` whose
  origin is the list of joined pieces, so a macro's result still knows its lines when it is
  output, however deeply it was nested.
* Markers are empty strings, so joins, comparisons, ``length`` and every filter behave exactly
  as without tracing. A value that passed through a filter (``{{ m() | indent(4) }}``) is a
  plain string again: its lines are attributed to the line of that expression.

:func:`line_sources` walks the top-level pieces once, after rendering, and assigns to each
rendered line the location of the first piece that put a character on it.
"""

from __future__ import annotations

import keyword
import typing as t
from collections.abc import Iterable

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame, optimizeconst

from controller.diagnostics import TemplateLocation
from controller.render.budget import BudgetExceeded, current

_METER = current()

Locs = tuple[TemplateLocation, ...]
"""Locations of the lines a piece spans: ``locs[k]`` is where its ``k``-th newline leads."""


class Traced(str):
    """A string that knows where it came from.

    ``_src`` is a tuple of locations for template text and markers, a list of pieces for
    joined buffers, or None when the origin is unknown (e.g. ``str.format`` on a traced
    string builds a new one).
    """

    __slots__ = ("_src",)
    _src: Locs | list[str] | None

    def __new__(cls, value: object = "", src: Locs | list[str] | None = None) -> Traced:
        obj = str.__new__(cls, value)
        obj._src = src
        return obj


def join_traced(pieces: Iterable[str]) -> Traced:
    """``environment.concat``: join like ``"".join`` and remember the pieces."""
    parts = pieces if isinstance(pieces, list) else list(pieces)
    joined = Traced("".join(parts), parts)
    meter = _METER.get()
    if meter is not None:
        meter.charge(len(joined))
    return joined


def to_text(value: object) -> str:
    """Expression output: keep a traced macro result as it is, stringify everything else.

    Called for every ``{{ }}``, so the size charge is inlined; the clock is left to loops and
    joins, through which any long render must pass.
    """
    text = value if isinstance(value, str) and type(value) is Traced else str(value)
    meter = _METER.get()
    if meter is not None:
        used = meter.used_chars = meter.used_chars + len(text)
        if used > meter.max_chars:
            raise BudgetExceeded("outputBytes", meter.max_chars, used)
    return text


def line_sources(pieces: Iterable[str]) -> list[TemplateLocation | None]:
    """Location of every rendered line of ``"".join(pieces)``, in order.

    A line's location is that of the first non-empty piece that contributes a character to
    it. Pieces of unknown origin inherit the last marker's location.
    """
    out: list[TemplateLocation | None] = []
    pending = True  # the current line has no owner yet
    cur: Locs | None = None
    stack = [iter(pieces)]
    unknown: Locs = ()
    while stack:
        for piece in stack[-1]:
            if type(piece) is Traced:
                src = piece._src
                if type(src) is list:
                    stack.append(iter(src))
                    break
                if not piece:
                    if src is not None:
                        cur = src  # type: ignore[assignment]
                    continue
                locs: Locs = src if src is not None else (cur or unknown)  # type: ignore[assignment]
            else:
                if not piece:
                    continue
                locs = cur or unknown
            first = locs[0] if locs else None
            if pending:
                out.append(first)
            n = piece.count("\n")
            if n:
                if len(locs) > n:
                    out.extend(locs[1 : n + 1])
                elif len(locs) > 1:
                    out.extend(locs[1:])
                    out.extend([locs[-1]] * (n + 1 - len(locs)))
                else:
                    out.extend([first] * n)
                if piece[-1] == "\n":
                    out.pop()
                    pending = True
                else:
                    pending = False
            else:
                pending = False
        else:
            stack.pop()
    return out


_STR_METHODS = frozenset(
    name for name in dir(str) if not name.startswith("_") and name not in ("format", "format_map")
)
"""Methods of ``str`` the sandbox lets templates call as they are (it wraps only the two
formatting ones), so that a call on an exact ``str`` may skip its checks."""

_LOOP_HOOK = "htc_loop"
"""The environment attribute every ``for`` iterable is passed through (a metered loop)."""
_GROW_HOOK = "htc_grow"
"""The environment attribute ``{% set ns.x = ns.x + [...] %}`` calls (see ``grown``)."""

_OWN_BUFFER = (nodes.For, nodes.Macro, nodes.CallBlock, nodes.FilterBlock, nodes.AssignBlock)
"""Nodes whose text is charged on their own (their loop, or the join of their buffer)."""


def literal_text(body: Iterable[nodes.Node]) -> int:
    """Characters of literal template text one pass through ``body`` can output at most."""
    total = 0
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, nodes.TemplateData):
            total += len(node.data)
        elif not isinstance(node, _OWN_BUFFER):
            todo.extend(node.iter_child_nodes())
    return total


class TracingCodeGenerator(CodeGenerator):
    """Jinja2's code generator, emitting traced constants and markers for every output.

    Output generation changes, and attribute reads on stored objects get an inline fast path
    (:meth:`visit_Getattr`); control flow, scoping and the sandbox's call and attribute
    interception are Jinja2's own. Constants are appended to the module after the functions
    (they are looked up when the functions run, not when they are defined).
    """

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(*args, **kwargs)
        self._htc_consts: list[str] = []

    def _htc_const(self, expr: str) -> str:
        ident = f"t_htc{len(self._htc_consts)}"
        self._htc_consts.append(f"{ident} = {expr}")
        return ident

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        super().visit_Template(node, frame)
        self.writeline("t_htc_str = environment.htc_text")
        self.writeline("t_htc_maps = environment.htc_mappings")
        for line in self._htc_consts:
            self.writeline(line)

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        """Every loop charges the render budget per item (see controller.render.budget)."""
        chars = nodes.Const(literal_text(node.body), lineno=node.lineno)
        loop = nodes.EnvironmentAttribute(_LOOP_HOOK, lineno=node.lineno)
        metered = nodes.Call(loop, [node.iter, chars], [], None, None, lineno=node.lineno)
        copy = nodes.For(
            node.target,
            metered,
            node.body,
            node.else_,
            node.test,
            node.recursive,
            lineno=node.lineno,
        )
        copy.environment = node.environment
        super().visit_For(copy, frame)

    def visit_Call(self, node: nodes.Call, frame: Frame, forward_caller: bool = False) -> None:
        """Two calls skip ``environment.call``.

        * The loop hook: no sandbox check is needed for our own function, and the generic
          call would cost ~6 µs per loop. Templates cannot spell an environment attribute,
          so only :meth:`visit_For` makes such a call.
        * A method of ``str`` (``path.rstrip('/')``) called on an exact ``str``: the sandbox
          would look the method up, find it safe and call it with the same arguments; this
          emits that outcome inline, and anything else takes the generic call.
        """
        callee = node.node
        if isinstance(callee, nodes.EnvironmentAttribute) and callee.name == _LOOP_HOOK:
            iterable, chars = node.args
            self.write(f"environment.{_LOOP_HOOK}(")
            self.visit(iterable, frame)
            self.write(", ")
            self.visit(chars, frame)
            self.write(")")
            return
        if not forward_caller and self._plain_str_call(node):
            assert isinstance(callee, nodes.Getattr)
            self.write(f"(t_htc_s.{callee.attr}(")
            for i, arg in enumerate([*node.args, *node.kwargs]):
                if i:
                    self.write(", ")
                if isinstance(arg, nodes.Keyword):
                    self.write(f"{arg.key}=")
                    arg = arg.value
                self.visit(arg, frame)
            self.write(") if type(t_htc_s := ")
            self.visit(callee.node, frame)
            # Otherwise the call Jinja2 emits, on the object just evaluated.
            self.write(
                f") is str else environment.call(context, environment.getattr(t_htc_s, {callee.attr!r})"
            )
            extra = {"_loop_vars": "_loop_vars"} if frame.loop_frame else {}
            if frame.block_frame:
                extra["_block_vars"] = "_block_vars"
            self.signature(node, frame, extra or None)
            self.write("))")
            return
        super().visit_Call(node, frame, forward_caller=forward_caller)

    def _plain_str_call(self, node: nodes.Call) -> bool:
        callee = node.node
        return (
            isinstance(callee, nodes.Getattr)
            and callee.ctx == "load"
            and callee.attr in _STR_METHODS
            and node.dyn_args is None
            and node.dyn_kwargs is None
            and all(k.key.isidentifier() and not keyword.iskeyword(k.key) for k in node.kwargs)
            and not self.environment.is_async
        )

    def visit_Getattr(self, node: nodes.Getattr, frame: Frame) -> None:
        """``obj.name`` on a stored object without a call into the environment.

        For the exact mapping types in ``environment.htc_mappings`` and a name that is not an
        attribute of those types (decided here, at compile time), Jinja2's sandboxed
        ``getattr`` would fail the attribute lookup and return the item; this emits that
        outcome inline. Everything else, including a missing key, goes through
        ``environment.getattr`` as usual.
        """
        attrs: frozenset[str] | None = getattr(self.environment, "htc_mapping_attrs", None)
        if (
            attrs is None
            or node.ctx != "load"
            or self.environment.is_async
            or node.attr in attrs
            or node.attr.startswith("_")
        ):
            super().visit_Getattr(node, frame)
            return
        key = repr(node.attr)
        self.write(f"(t_htc_o[{key}] if type(t_htc_o := ")
        self.visit(node.node, frame)
        self.write(
            f") in t_htc_maps and {key} in t_htc_o else environment.getattr(t_htc_o, {key}))"
        )

    def visit_Assign(self, node: nodes.Assign, frame: Frame) -> None:
        """``{% set ns.attr = ns.attr + [...] %}`` appends instead of copying the list, where
        that cannot be seen (:mod:`controller.render.grown`); every other assignment, and
        the namespace check before this one, as Jinja2 emits them."""
        target, value = node.target, node.node
        if not (
            isinstance(target, nodes.NSRef)
            and isinstance(value, nodes.Add)
            and isinstance(value.left, nodes.Getattr)
            and isinstance(value.left.node, nodes.Name)
            and value.left.node.name == target.name
            and value.left.attr == target.attr
            and isinstance(value.right, nodes.List)
            and not self.environment.is_async
        ):
            super().visit_Assign(node, frame)
            return
        ref = frame.symbols.ref(target.name)
        self.writeline(f"if not isinstance({ref}, Namespace):")
        self.indent()
        self.writeline(
            'raise TemplateRuntimeError("cannot assign attribute on non-namespace object")'
        )
        self.outdent()
        self.newline(node)
        self.write(f"environment.{_GROW_HOOK}({ref}, {target.attr!r}, ")
        self.visit(value.right, frame)
        self.write(")")

    @optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        """``a ~ b ~ c`` as one ``'%s%s%s' % (a, b, c)``: each ``%s`` is ``str()`` of its value,
        exactly what Jinja2's ``str_join`` does with a call and a ``map`` per ``~``."""
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super().visit_Concat(node, frame)
            return
        self.write(f"({'%s' * len(node.nodes)!r} % (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def _htc_mark(self, node: nodes.Node, frame: Frame) -> None:
        """A marker in the current stream, for output Jinja2 yields without visit_Output."""
        marker = self._htc_const(f"environment.htc_marker(name, {node.lineno})")
        if frame.buffer is None:
            self.writeline(f"yield {marker}")
        else:
            self.writeline(f"{frame.buffer}.append({marker})")

    def visit_FilterBlock(self, node: nodes.FilterBlock, frame: Frame) -> None:
        self._htc_mark(node, frame)
        super().visit_FilterBlock(node, frame)

    def visit_CallBlock(self, node: nodes.CallBlock, frame: Frame) -> None:
        self._htc_mark(node, frame)
        super().visit_CallBlock(node, frame)

    def visit_Output(self, node: nodes.Output, frame: Frame) -> None:
        if frame.require_output_check:
            if self.has_known_extends:
                return
            self.writeline("if parent_template is None:")
            self.indent()
        items: list[str | nodes.Expr] = []
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                if child.data:
                    items.append(
                        self._htc_const(
                            f"environment.htc_chunk({child.data!r}, name, {child.lineno})"
                        )
                    )
            else:
                items.append(self._htc_const(f"environment.htc_marker(name, {child.lineno})"))
                items.append(child)
        for item in items:
            if isinstance(item, str):
                if frame.buffer is None:
                    self.writeline(f"yield {item}")
                else:
                    self.writeline(f"{frame.buffer}.append({item})")
            else:
                if frame.buffer is None:
                    self.writeline("yield t_htc_str(", item)
                else:
                    self.writeline(f"{frame.buffer}.append(t_htc_str(", item)
                self.visit(item, frame)
                self.write(")" if frame.buffer is None else "))")
        if frame.require_output_check:
            self.outdent()
