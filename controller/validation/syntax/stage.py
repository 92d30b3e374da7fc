"""Stage ``syntax``: our own reading of every configuration file, then the directive policy
and the file-reference rule.

It runs first because it is cheap and because it is the only stage that may look at a
candidate before any HAProxy binary does: a denied directive never reaches ``haproxy -c``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from controller.diagnostics import Diagnostic, Phase, make
from controller.render import FileKind, SourceMap
from controller.validation.gcpause import paused_gc
from controller.validation.stage import Stage, StageContext, StageOutcome
from controller.validation.syntax.filerefs import check_file_refs
from controller.validation.syntax.gate import lean_gate
from controller.validation.syntax.parser import parse
from controller.validation.syntax.policy import check_policy, unknown_allow_names

if TYPE_CHECKING:
    from controller.validation.parsed import ParsedConfig

__all__ = ["SYNTAX_STAGE_VERSION", "SyntaxStage"]

#: Bumped whenever a change here could turn a past verdict around (it feeds the fingerprint).
SYNTAX_STAGE_VERSION = "2"


class SyntaxStage(Stage):
    phase = Phase.SYNTAX

    def __init__(self, allow_directives: Iterable[str] = ()) -> None:
        self.allow: frozenset[str] = frozenset(allow_directives)

    def fingerprint(self) -> str:
        material = "\n".join(["syntax", SYNTAX_STAGE_VERSION, *sorted(self.allow)])
        return hashlib.sha256(material.encode()).hexdigest()[:16]

    def gate(self, ctx: StageContext) -> bool:
        """True when the policy and file-reference checks of :meth:`run` will certainly find
        nothing, decided from a cheap reading (see ``gate``): the pipeline may start
        ``haproxy -c`` before :meth:`run` has finished. The pipeline records the answer
        (``ctx.cleared``), so that :meth:`run` does not repeat those checks: the gate ran the
        very same check functions over every line they could act on. False means "not
        established"."""
        lean: set[str] = set()
        with paused_gc():
            passed = lean_gate(ctx.files, self.allow, lean)
        if passed:
            ctx.lean_read = frozenset(lean)
        return passed

    async def run(self, ctx: StageContext) -> StageOutcome:
        started = time.perf_counter()
        out: list[Diagnostic] = [
            make(
                "W2019",
                Phase.SYNTAX,
                f"validation.policy.allowDirectives lists {name!r}, which the policy does not "
                "know; it allows nothing",
            )
            for name in unknown_allow_names(self.allow)
        ]
        parse_ms = 0.0
        with paused_gc():
            for entry in ctx.files:
                if entry.kind is not FileKind.CONFIG:
                    continue
                text = entry.content.decode("utf-8", "surrogateescape")
                t0 = time.perf_counter()
                parsed, found = parse(text, entry.path, haproxy_version=ctx.haproxy_version)
                parse_ms += (time.perf_counter() - t0) * 1000
                ctx.parsed[entry.path] = parsed
                # A file the gate cleared from its lean reading is checked on the full parse
                # as well, while haproxy -c runs: the lean reading holds only the sections the
                # checks could act on, so their per-section caches would otherwise meet every
                # other section first in the next candidate's gate, before haproxy -c may start
                # (59-68 ms at 10,000 Ingresses). The gate established that this finds nothing.
                if Phase.SYNTAX not in ctx.cleared or entry.path in ctx.lean_read:
                    guarded = _for_any_version(parsed, text, entry.path, ctx.haproxy_version)
                    found.extend(check_policy(guarded, self.allow))
                    found.extend(check_file_refs(guarded, ctx.files))
                out.extend(found)
        out = _with_template_locations(out, ctx.render.source_map)
        total_ms = (time.perf_counter() - started) * 1000
        return StageOutcome(
            diagnostics=out,
            extra_timings={
                "syntaxParseMs": round(parse_ms, 3),
                "syntaxChecksMs": round(total_ms - parse_ms, 3),
            },
        )


def _for_any_version(
    parsed: ParsedConfig, text: str, path: str, version: str | None
) -> ParsedConfig:
    """The reading the directive policy and the file-reference rule judge.

    Later stages judge what *this* binary loads, so a branch under
    ``.if version_atleast(2.9)`` is dropped when checking with 2.8. But the bytes may be
    deployed to a newer HAProxy, which would take that branch and run whatever it holds, so
    the security checks read such branches as possibly active. Only literal conditions
    (``.if 0``, ``.if streq(a,b)``) still switch lines off for them. The second parse is paid
    only by files whose conditions test the version.
    """
    if version is None:
        return parsed  # version tests were undecided already
    for macro in parsed.macros:
        if macro.keyword in _DECIDING and any(_VERSION_TEST in t.value for t in macro.tokens[1:]):
            return parse(text, path, haproxy_version=version, any_version=True)[0]
    return parsed


_DECIDING = frozenset({".if", ".elif"})
_VERSION_TEST = "version_"


def _with_template_locations(
    diagnostics: list[Diagnostic], source_map: SourceMap
) -> list[Diagnostic]:
    out = []
    for d in diagnostics:
        loc = d.location
        if loc is not None and loc.line is not None and d.template_location is None:
            where = source_map.lookup(loc.file, loc.line)
            if where is not None:
                d = d.model_copy(update={"template_location": where})
        out.append(d)
    return out
