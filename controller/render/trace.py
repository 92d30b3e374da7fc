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
from collections.abc import Callable, Iterable, Iterator
from itertools import count

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.idtracking import VAR_LOAD_RESOLVE
from jinja2.runtime import Context

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


def text_hook(holder: type) -> Callable[[object], str]:
    """``environment.htc_text``, called for every ``{{ }}``: keep a traced text as it is,
    stringify everything else, and charge its length (inlined; the clock is left to loops
    and joins, through which any long render must pass).

    ``holder`` is a type whose ``str()`` is its ``_text`` slot (the environment's
    fragments): read directly, without the Python call of its ``__str__`` (a loop over the
    10,000 backend fragments of haproxy.cfg outputs each, on every render). An exact
    ``str`` is its own ``str()``.
    """

    def to_text(value: object) -> str:
        kind = type(value)
        if kind is str or kind is Traced:
            text: str = value  # type: ignore[assignment]
        elif kind is holder:
            text = value._text  # type: ignore[attr-defined]
        else:
            text = str(value)
        meter = _METER.get()
        if meter is not None:
            used = meter.used_chars = meter.used_chars + len(text)
            if used > meter.max_chars:
                raise BudgetExceeded("outputBytes", meter.max_chars, used)
        return text

    return to_text


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

DIRECT_METHODS = frozenset({"get", "get_single", "fetch", "list", "entries", "entry"})
"""Methods a call may reach without ``environment.getattr`` and ``environment.call`` when
the receiver's exact type is one the environment lists for that name (``htc_direct``)."""

_LOOP_ATTRS = frozenset(
    {"index0", "index", "first", "last", "length", "revindex", "revindex0", "depth", "depth0"}
    | {"previtem", "nextitem"}
)
"""Attributes of a ``LoopContext`` read directly (each a plain attribute or property)."""

_COUNTED = {"index0": "{}", "index": "({} + 1)", "first": "({} == 0)"}
"""What ``loop.<attr>`` is in a loop that counts instead of making a ``LoopContext``
(its ``loop`` variable is then the item's index0)."""

_HIDES_LOOP = (
    nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends, nodes.Block, nodes.Macro,
    nodes.CallBlock,
)  # fmt: skip
"""Nodes that may see ``loop`` other than as written in the body (or define a new scope)."""

_LOOP_CONTEXT = " in LoopContext("

_DICT_LOOKUPS = ("__contains__", "__getitem__", "get")
"""How a ``dict`` finds a key; a mapping type that has these of its own is read as itself."""

PLAIN_FILTERS = {
    "default": ("not isinstance((t_htc_d := ", "), Undefined)", "t_htc_d"),
    "string": ("type((t_htc_d := ", ")) in t_htc_text_types", "str(t_htc_d)"),
    "lower": ("type((t_htc_d := ", ")) is str", "t_htc_d.lower()"),
    "int": ("type((t_htc_d := ", ")) is int", "t_htc_d"),
    "haproxy_arg": (
        "type((t_htc_d := ",
        ")) is str and t_htc_bare(t_htc_d) is not None",
        "t_htc_d",
    ),
}
"""Filters written out for the values they return at once, given constant arguments:
``x | default(c)`` of a defined ``x`` is ``x``; ``| string`` of a ``str`` or ``int`` is its
``str()``, ``| lower`` of a ``str`` its ``lower()``; ``| int`` of an ``int`` is it; our
``| haproxy_arg`` (without arguments) of a ``str`` of plain characters only is it, as its
first test says (``t_htc_bare``: that test's pattern, ``environment.htc_bare``). (test
prefix, test suffix, result). The environment lists the filter objects
(``htc_plain_filters``): only those, reached under their names, are written out."""

_PLAIN_MAX_ARGS = {"default": 1, "haproxy_arg": 0}
"""Constant arguments a filter of :data:`PLAIN_FILTERS` may be given (else 2): ``default``'s
second changes what a falsy value gives, ``haproxy_arg``'s ``logformat`` what it returns."""


def _constant(node: nodes.Node) -> bool:
    """An argument whose evaluation has no effect and cannot fail (so it may be skipped)."""
    if isinstance(node, nodes.Const):
        return True
    if isinstance(node, nodes.List | nodes.Tuple):
        return all(_constant(n) for n in node.items)
    return isinstance(node, nodes.Dict) and not node.items


def counted(iterable: Iterable[t.Any], undefined: t.Any) -> Iterator[tuple[t.Any, int]]:
    """A counting loop's iterable: (item, index0) pairs, iterated as LoopContext would."""
    return zip(iter(iterable), count())


def counted_loop(node: nodes.For) -> bool:
    """Does the loop read ``loop`` only as ``loop.index0``, ``loop.index`` or ``loop.first``
    in its body (then nothing else of a LoopContext can be observed)?"""
    if node.recursive:
        return False
    for part in (node.test, *node.else_):
        if part is not None and any(n.name == "loop" for n in part.find_all(nodes.Name)):
            return False
    used = False
    todo: list[tuple[nodes.Node, nodes.Node | None]] = [(n, None) for n in node.body]
    while todo:
        n, parent = todo.pop()
        if isinstance(n, _HIDES_LOOP):
            return False
        if isinstance(n, nodes.NSRef) and n.name == "loop":
            return False
        if isinstance(n, nodes.Name) and n.name == "loop":
            if not (
                n.ctx == "load"
                and isinstance(parent, nodes.Getattr)
                and parent.node is n
                and parent.ctx == "load"
                and parent.attr in _COUNTED
            ):
                return False
            used = True
        todo.extend((c, n) for c in n.iter_child_nodes())
    return used


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
        self._htc_methods: set[str] = set()
        self._htc_filters: set[str] = set()
        self._htc_count_next = False
        self._htc_counting: set[str] = set()
        """The ``loop`` identifiers of the counting loops whose code is being written."""
        self._htc_assigned: set[str] = set()
        """Identifiers certainly assigned at the point being written (see :meth:`visit_Name`)."""

    def _htc_const(self, expr: str) -> str:
        ident = f"t_htc{len(self._htc_consts)}"
        self._htc_consts.append(f"{ident} = {expr}")
        return ident

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        super().visit_Template(node, frame)
        self.writeline("t_htc_str = environment.htc_text")
        self.writeline("t_htc_maps = environment.htc_mappings")
        for i in range(len(getattr(self.environment, "htc_mapping_order", ()))):
            self.writeline(f"t_htc_map{i} = environment.htc_mapping_order[{i}]")
        if self._htc_one_lookup():
            self.writeline("t_htc_dget = dict.get")
            self.writeline("t_htc_miss = object()")
        self.writeline("t_htc_frag = environment.htc_fragment")
        self.writeline("t_htc_mark = environment.htc_mark")
        self.writeline("t_htc_glist = environment.htc_glist")
        self.writeline("t_htc_oga = object.__getattribute__")
        self.writeline("t_htc_counted = environment.htc_counted")
        self.writeline("t_htc_text_types = (str, int)")
        self.writeline("t_htc_namespace = environment.htc_namespace")
        self.writeline("t_htc_res = environment.htc_resources")
        for name in sorted(self._htc_filters):
            self.writeline(f"t_htc_pf_{name} = environment.htc_plain_filters[{name!r}]")
        if "haproxy_arg" in self._htc_filters:
            self.writeline("t_htc_bare = environment.htc_bare")
        for name in sorted(self._htc_methods):
            self.writeline(f"t_htc_dm_{name} = environment.htc_direct[{name!r}]")
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
        # A loop whose body reads only loop.index0/index/first counts its items instead of
        # making a LoopContext (see write() and visit_Getattr).
        self._htc_count_next = not self.environment.is_async and counted_loop(node)
        before = set(self._htc_counting)
        # A recursive loop's body is a function called again from within: certain only what
        # it assigns itself.
        assigned = self._htc_assigned
        if node.recursive:
            self._htc_assigned = set()
        try:
            super().visit_For(copy, frame)
        finally:
            self._htc_count_next = False
            self._htc_counting = before
            self._htc_assigned = assigned

    def write(self, x: str) -> None:
        """Jinja2's, except that the head of a counting loop (visit_For) iterates
        :func:`counted` instead of a LoopContext, and its ``loop`` is the item's index0."""
        if self._htc_count_next and x.endswith(_LOOP_CONTEXT) and x.startswith(", "):
            self._htc_count_next = False
            ref = x[2 : -len(_LOOP_CONTEXT)]
            self._htc_counting.add(ref)
            x = f", {ref} in t_htc_counted("
        super().write(x)

    def enter_frame(self, frame: Frame) -> None:
        """Jinja2's, with each name looked up in the context written out as
        ``Context.resolve_or_missing`` does it (one call less per name, per loop pass)."""
        loads = frame.symbols.loads
        if (
            self.environment.context_class is not Context
            or self._context_reference_stack[-1] != "context"
        ):
            super().enter_frame(frame)
            return
        resolved = {k: v for k, v in loads.items() if v[0] == VAR_LOAD_RESOLVE}
        for target, (_, param) in resolved.items():
            key = repr(param)
            self.writeline(
                f"{target} = (context.vars[{key}] if {key} in context.vars else "
                f"context.parent[{key}] if {key} in context.parent else missing)"
            )
        frame.symbols.loads = {k: v for k, v in loads.items() if k not in resolved}
        try:
            super().enter_frame(frame)
        finally:
            frame.symbols.loads = loads

    def visit_Call(self, node: nodes.Call, frame: Frame, forward_caller: bool = False) -> None:
        """Some calls skip ``environment.call``.

        * The loop hook: no sandbox check is needed for our own function, and the generic
          call would cost ~6 µs per loop. Templates cannot spell an environment attribute,
          so only :meth:`visit_For` makes such a call.
        * A method of ``str`` (``path.rstrip('/')``) called on an exact ``str``, and a
          method of :data:`DIRECT_METHODS` (``table.get(key)``,
          ``resources.services.get_single(ns, name)``) called with positional arguments on
          a receiver of a type the environment lists for it (``htc_direct``): the sandbox
          would look the method up, find it safe and call it with the same arguments.
          This emits that outcome inline; on any other receiver, the lookup and the call
          Jinja2 emits (``environment.htc_later`` holds the looked-up callable until the
          arguments are evaluated, so each argument is written, and evaluated, once).
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
        if not forward_caller and self._namespace_call(node):
            # namespace(...): the environment's own function, which its call() would call
            # as it is; anything else under that name takes the generic call.
            self.write("(t_htc_f if (t_htc_f := ")
            self.visit(callee, frame)
            self.write(") is t_htc_namespace else environment.htc_later(context, t_htc_f")
            self._later_extras(frame)
            self._arguments(node, frame)
            return
        test = self._direct_test(node) if not forward_caller else None
        if test is None:
            super().visit_Call(node, frame, forward_caller=forward_caller)
            return
        assert isinstance(callee, nodes.Getattr)
        attr = callee.attr
        self.write(f"(t_htc_c.{attr} if type(t_htc_c := ")
        self.visit(callee.node, frame)
        self.write(
            f"){test} else environment.htc_later(context, environment.getattr(t_htc_c, {attr!r})"
        )
        self._later_extras(frame)
        self._arguments(node, frame)

    def _later_extras(self, frame: Frame) -> None:
        """The end of an ``environment.htc_later`` call: the keyword arguments Jinja2's
        generic call passes (the loop's and block's variables)."""
        if frame.loop_frame:
            self.write(", _loop_vars=_loop_vars")
        if frame.block_frame:
            self.write(", _block_vars=_block_vars")
        self.write("))")

    def _arguments(self, node: nodes.Call, frame: Frame) -> None:
        self.write("(")
        for i, arg in enumerate([*node.args, *node.kwargs]):
            if i:
                self.write(", ")
            if isinstance(arg, nodes.Keyword):
                self.write(f"{arg.key}=")
                arg = arg.value
            self.visit(arg, frame)
        self.write(")")

    def _plain_keywords(self, node: nodes.Call) -> bool:
        """Keyword arguments that can be written as they are, and never clash with the
        ones the generic call adds."""
        return all(
            k.key.isidentifier() and not keyword.iskeyword(k.key) and not k.key.startswith("_")
            for k in node.kwargs
        )

    def _namespace_call(self, node: nodes.Call) -> bool:
        callee = node.node
        return (
            isinstance(callee, nodes.Name)
            and callee.name == "namespace"
            and callee.ctx == "load"
            and node.dyn_args is None
            and node.dyn_kwargs is None
            and self._plain_keywords(node)
            and not self.environment.is_async
        )

    def _direct_test(self, node: nodes.Call) -> str | None:
        """For a call :meth:`visit_Call` may make directly, the test its receiver's type
        must pass (`` is str``); else None."""
        callee = node.node
        if (
            not isinstance(callee, nodes.Getattr)
            or callee.ctx != "load"
            or node.dyn_args is not None
            or node.dyn_kwargs is not None
            or self.environment.is_async
        ):
            return None
        if callee.attr in _STR_METHODS and self._plain_keywords(node):
            return " is str"
        if callee.attr in DIRECT_METHODS and not node.kwargs:
            self._htc_methods.add(callee.attr)
            return f" in t_htc_dm_{callee.attr}"
        return None

    def blockvisit(self, nodes: Iterable[nodes.Node], frame: Frame) -> None:
        """Jinja2's; what a block's statements assign is certain only within the block
        (see :meth:`visit_Name`)."""
        before = self._htc_assigned
        self._htc_assigned = set(before)  # the block adds to its own copy
        try:
            super().blockvisit(nodes, frame)
        finally:
            self._htc_assigned = before

    def macro_body(self, node: nodes.Macro | nodes.CallBlock, frame: Frame) -> t.Any:
        """Jinja2's; a macro's body runs when called, when nothing assigned around its
        definition is certain any more (a loop's names are reset once it ends)."""
        before, self._htc_assigned = self._htc_assigned, set()
        try:
            return super().macro_body(node, frame)
        finally:
            self._htc_assigned = before

    def visit_Name(self, node: nodes.Name, frame: Frame) -> None:
        """Jinja2's, except that a name read where an earlier ``{% set %}`` of it in the same
        straight-line code (or in code around it) certainly ran is its identifier, without
        the ``undefined(...) if it is missing`` test: an assignment stores the value of a
        template expression, which is never ``missing``.

        Certain means: an ``Assign`` to that identifier was written earlier in the same
        block or in a block around it (:meth:`blockvisit` forgets a block's assignments
        when it ends: an ``if`` branch may not run, a loop's names are reset after it), not
        across a macro's or a recursive loop's function (:meth:`macro_body`,
        :meth:`visit_For`)."""
        if node.ctx == "load" and self._htc_assigned:
            ref = frame.symbols.ref(node.name)
            if ref in self._htc_assigned:
                self.write(ref)
                return
        super().visit_Name(node, frame)

    def _htc_note_assigned(self, target: nodes.Node, frame: Frame) -> None:
        """After an ``Assign`` was written: its plain name targets hold values now."""
        if isinstance(target, nodes.Name) and target.ctx == "store":
            self._htc_assigned.add(frame.symbols.ref(target.name))
        elif isinstance(target, nodes.Tuple):
            for item in target.items:
                self._htc_note_assigned(item, frame)

    def visit_Getattr(self, node: nodes.Getattr, frame: Frame) -> None:
        """``obj.name`` without a call into the environment, for the types whose reads the
        sandbox's ``getattr`` answers from their data:

        * the exact mapping types in ``environment.htc_mappings``, for a name that is not an
          attribute of those types (decided here, at compile time): Jinja2's sandboxed
          ``getattr`` would fail the attribute lookup and return the item;
        * a fragment (``environment.htc_fragment``) or a namespace: the export or attribute
          of that name, marked shared as the environment's ``getattr`` marks it;
        * a ``LoopContext``'s counters and neighbours (its own attributes and properties,
          all safe); in a counting loop (:meth:`visit_For`) ``loop.index0`` is the count;
        * ``resources.<collection>`` (``environment.htc_resources``, a receiver named
          ``resources``), for a name that is not an attribute of that type (decided here) and
          is one of its collections: the collection, as the environment's ``getattr`` finds
          it.

        Everything else, a missing key or name included, goes through
        ``environment.getattr`` as usual. Names starting with ``_`` always do.
        """
        attrs: frozenset[str] | None = getattr(self.environment, "htc_mapping_attrs", None)
        if (
            attrs is None
            or node.ctx != "load"
            or self.environment.is_async
            or node.attr.startswith("_")
        ):
            super().visit_Getattr(node, frame)
            return
        inner = node.node
        if (
            self._htc_counting
            and isinstance(inner, nodes.Name)
            and inner.name == "loop"
            and inner.ctx == "load"
            and node.attr in _COUNTED
        ):
            ref = frame.symbols.find_ref("loop")
            if ref in self._htc_counting:
                self.write(_COUNTED[node.attr].format(ref))
                return
        key = repr(node.attr)
        shared = (
            f"(t_htc_v if type(t_htc_v := t_htc_x[{key}]) is not t_htc_glist"
            " else t_htc_mark(t_htc_v))"
        )
        branches = [
            (shared, f"t_htc_t is t_htc_frag and {key} in (t_htc_x := t_htc_o._exports)"),
            (
                shared,
                f"t_htc_t is Namespace and {key} in "
                "(t_htc_x := t_htc_oga(t_htc_o, '_Namespace__attrs'))",
            ),
        ]
        if node.attr not in attrs:
            if self._htc_one_lookup():
                # The stored objects' type first, in one lookup; a plain dict in two (for an
                # exact dict, `in` and `[]` cost less than a call of dict.get).
                branches[:0] = [
                    (
                        "t_htc_v",
                        f"t_htc_t is t_htc_map0 and (t_htc_v := t_htc_dget(t_htc_o, {key}, "
                        "t_htc_miss)) is not t_htc_miss",
                    ),
                    (f"t_htc_o[{key}]", f"t_htc_t is t_htc_map1 and {key} in t_htc_o"),
                ]
            else:
                branches.insert(
                    0, (f"t_htc_o[{key}]", f"{self._htc_is_mapping()} and {key} in t_htc_o")
                )
        if node.attr in _LOOP_ATTRS:
            branches.append((f"t_htc_o.{node.attr}", "t_htc_t is LoopContext"))
        if (
            isinstance(inner, nodes.Name)
            and inner.name == "resources"
            and node.attr not in getattr(self.environment, "htc_resources_attrs", (node.attr,))
        ):
            # resources.<collection>: what the environment's getattr returns for it. Only
            # where the receiver is named so: on every attribute read it gained nothing
            # measurable (Ir at 1k: 830M against 829M) and made all of them longer.
            branches.append(
                (f"t_htc_o[{key}]", f"t_htc_t is t_htc_res and {key} in t_htc_o._names")
            )
        # The receiver once, its type kept for the later tests: "(A if (t := type(o := X))
        # in maps and ... else B if t is ... else environment.getattr(o, name))".
        # (The first test's first "t_htc_t" is where the receiver is evaluated.)
        first, test = branches[0]
        head, _, tail = test.partition("t_htc_t")
        assert tail
        self.write(f"({first} if {head}(t_htc_t := type(t_htc_o := ")
        self.visit(inner, frame)
        self.write(f")){tail} else ")
        for value, test in branches[1:]:
            self.write(f"{value} if {test} else ")
        self.write(f"environment.getattr(t_htc_o, {key}))")

    def _htc_one_lookup(self) -> bool:
        """Is a read of a key of the first mapping type (the stored objects') written as one
        ``dict.get`` instead of ``key in o`` and ``o[key]``? Only when the environment lists
        exactly two types in order (:meth:`_htc_is_mapping`) and the first is a ``dict``
        subclass that finds keys as ``dict`` does (its ``__contains__``, ``__getitem__``
        and ``get`` are ``dict``'s own): then the one lookup answers what the two would. On
        a ``dict`` subclass neither operation has the interpreter's fast path for exact
        dicts, so the two cost about 720 instructions and the call about 480 (callgrind);
        at 10,000 Ingresses a full render reads some 350,000 keys of stored objects."""
        order: tuple[type, ...] = getattr(self.environment, "htc_mapping_order", ())
        if self._htc_is_mapping() == "t_htc_t in t_htc_maps" or len(order) != 2:
            return False
        first = order[0]
        return (
            isinstance(first, type)
            and issubclass(first, dict)
            and all(getattr(first, m) is getattr(dict, m) for m in _DICT_LOOKUPS)
        )

    def _htc_is_mapping(self) -> str:
        """``t_htc_t in t_htc_maps``, as ``is`` tests of the (two) types when the
        environment lists them in order (``htc_mapping_order``, most frequent first): two
        identity tests cost less than a set lookup, on most attribute reads of a render."""
        order: tuple[type, ...] = getattr(self.environment, "htc_mapping_order", ())
        maps = getattr(self.environment, "htc_mappings", None)
        if not order or len(order) > 2 or maps is None or set(order) != set(maps):
            return "t_htc_t in t_htc_maps"
        return "(" + " or ".join(f"t_htc_t is t_htc_map{i}" for i in range(len(order))) + ")"

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
            self._htc_note_assigned(target, frame)
            return
        ref = frame.symbols.ref(target.name)
        self.writeline(f"if not isinstance({ref}, Namespace):")
        self.indent()
        self.writeline(
            'raise TemplateRuntimeError("cannot assign attribute on non-namespace object")'
        )
        self.outdent()
        # The items first (reading the list marks it shared), then grow() written out for
        # its common case: the attribute is a GrownList nobody has read since it grew.
        attr = repr(target.attr)
        self.newline(node)
        self.write("t_htc_i = ")
        self.visit(value.right, frame)
        self.writeline(
            f"if type({ref}) is Namespace and type(t_htc_g := t_htc_oga({ref}, "
            f"'_Namespace__attrs').get({attr})) is t_htc_glist and not t_htc_g._shared:"
        )
        self.indent()
        self.writeline("t_htc_g.extend(t_htc_i)")
        self.outdent()
        self.writeline("else:")
        self.indent()
        self.writeline(f"environment.{_GROW_HOOK}({ref}, {attr}, t_htc_i)")
        self.outdent()

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

    @optimizeconst
    def visit_Filter(self, node: nodes.Filter, frame: Frame) -> None:
        """A filter of :data:`PLAIN_FILTERS` with constant arguments returns the
        value (or its ``lower()``) inline when the value passes the filter's own first test;
        otherwise the filter is called, with the value already evaluated, as Jinja2 calls
        it. The filter the template reaches must be the stock one, checked when compiling
        and again when running."""
        plain = PLAIN_FILTERS.get(node.name)
        stock: dict[str, t.Any] = getattr(self.environment, "htc_plain_filters", {})
        if (
            plain is None
            or node.node is None
            or self.environment.is_async
            or node.name not in self.filters
            or self.environment.filters.get(node.name) is not stock.get(node.name)
            or node.kwargs
            or node.dyn_args is not None
            or node.dyn_kwargs is not None
            or len(node.args) > _PLAIN_MAX_ARGS.get(node.name, 2)
            or not all(_constant(a) for a in node.args)
        ):
            super().visit_Filter(node, frame)
            return
        prefix, suffix, result = plain
        func = self.filters[node.name]
        self._htc_filters.add(node.name)
        self.write(f"({result} if {prefix}")
        self.visit(node.node, frame)
        self.write(f"{suffix} and {func} is t_htc_pf_{node.name} else {func}(t_htc_d")
        for arg in node.args:
            self.write(", ")
            self.visit(arg, frame)
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
