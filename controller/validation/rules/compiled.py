"""A spec's ``validate`` blocks, compiled and classified once per spec.

:class:`RuleSet` is built like the renderer: once, from the spec, never raising. Everything
that does not depend on resources is settled here — syntax and type errors, references to
outputs or collections that do not exist, and the inline/deferred split — so lint can report
it without resources and each run only evaluates.

A rule is **inline** when its expression, messageExpression, own ``when`` and its block's
``when`` together read nothing but ``self``; otherwise it is **deferred**. A block ``when``
that reads anything else defers every rule of the block, because the block could not be
decided when its owner renders.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from controller.diagnostics import Diagnostic, Location, Phase, RuleId, make
from controller.render import MAIN_CONFIG, FileKind, path_for
from controller.spec import (
    HAProxyTemplateConfigSpec,
    RuleSeverity,
    ValidateBlock,
    ValidationRule,
    format_path,
)
from controller.validation.rules.cel import CompileError, Program
from controller.validation.rules.classify import Analysis
from controller.validation.rules.refs import ANY, Refs
from controller.validation.rules.rulecache import analysed

__all__ = ["CompiledRule", "Locator", "Owner", "OwnerKind", "PathKey", "RuleSet"]

T = TypeVar("T")
_MISSING: Any = object()
_TOKENS = itertools.count(1)

PathKey = tuple[str | int, ...]
Locator = Callable[[PathKey], Location | None]
"""Maps a wire path (``("spec", "maps", "hosts.map", "validate", …)``) to a spec location."""

SEMANTICS_VERSION = "1"
"""Part of the fingerprint: bump when evaluation semantics change, so cached verdicts expire."""

_BOOL = frozenset({"BOOL", "DYN"})
_STRING = frozenset({"STRING", "DYN"})

_OUTPUT_FIELDS: tuple[tuple[str, FileKind], ...] = (
    ("maps", FileKind.MAP),
    ("files", FileKind.FILE),
    ("certificates", FileKind.CERT),
)


class OwnerKind(StrEnum):
    OUTPUT = "output"
    COLLECTION = "collection"


@dataclass(frozen=True, slots=True)
class Owner:
    """What a validate block is attached to: an output or a watched collection."""

    kind: OwnerKind
    name: str
    spec_path: PathKey
    path: str | None = None
    """Deploy path of an output (``maps/hosts.map``); None for collections."""

    @property
    def key(self) -> str:
        return f"{self.kind.value}:{self.name}"

    @property
    def label(self) -> str:
        return f"{self.kind.value} {self.name}"


@dataclass(frozen=True)
class CompiledRule:
    owner: Owner
    index: int
    spec: ValidationRule
    expression: Program
    message: Program | None
    when: Program | None
    block_when: Program | None
    refs: Refs
    deferred: bool

    @property
    def spec_path(self) -> PathKey:
        return (*self.owner.spec_path, "validate", "rules", self.index)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def is_error(self) -> bool:
        return self.spec.severity is RuleSeverity.ERROR

    @property
    def title(self) -> str:
        """How messages name the rule: ``hosts.map rule unique-hosts``."""
        return f"{self.owner.name} rule {self.spec.name}"

    @property
    def reads(self) -> frozenset[str]:
        """Keys of the other owners this rule reads (``output:hosts.map``), ANY expanded
        by the rule set."""
        return frozenset(
            {f"{OwnerKind.OUTPUT.value}:{n}" for n in self.refs.outputs}
            | {f"{OwnerKind.COLLECTION.value}:{n}" for n in self.refs.collections}
        )


@dataclass
class _Part:
    path: PathKey
    source: str
    want: frozenset[str]
    what: str


@dataclass
class RuleSet:
    """Every compiled rule of one spec, the owners, and what was wrong with the sources."""

    rules: tuple[CompiledRule, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    """E5001/E5002/E5009 for sources that cannot be evaluated; those rules are not in
    ``rules``, and every run reports these again (a broken rule must never pass)."""
    outputs: Mapping[str, Owner] = field(default_factory=dict)
    collections: Mapping[str, Owner] = field(default_factory=dict)
    extra_context: Mapping[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    _all_pass: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    token: int = field(default_factory=_TOKENS.__next__, init=False, repr=False, compare=False)
    """This rule set's name in the evaluation worker (``pool.py``): sent there once, then
    referred to by this number. Not an argument, so a copy made by ``dataclasses.replace``
    gets a number of its own."""

    def __getstate__(self) -> dict[str, Any]:
        # A copy: another thread may add a combined program while this one pickles.
        return {**self.__dict__, "_all_pass": dict(self._all_pass)}

    @classmethod
    def from_spec(cls, spec: HAProxyTemplateConfigSpec, locate: Locator | None = None) -> RuleSet:
        outputs = _output_owners(spec)
        collections = {
            name: Owner(OwnerKind.COLLECTION, name, ("spec", "watchedResources", name))
            for name in sorted(spec.watched_resources)
        }
        blocks: list[tuple[Owner, ValidateBlock]] = []
        for owner in outputs.values():
            block = _output_block(spec, owner)
            if block is not None:
                blocks.append((owner, block))
        for name, owner in collections.items():
            block = spec.watched_resources[name].validate_
            if block is not None:
                blocks.append((owner, block))
        builder = _Builder(outputs, collections, locate)
        for owner, block in blocks:
            builder.block(owner, block)
        return cls(
            rules=tuple(builder.rules),
            diagnostics=tuple(builder.diagnostics),
            outputs=outputs,
            collections=collections,
            extra_context=dict(spec.extra_context),
            fingerprint=_fingerprint(blocks),
        )

    # --- views -------------------------------------------------------------------------

    @property
    def inline(self) -> tuple[CompiledRule, ...]:
        return tuple(r for r in self.rules if not r.deferred)

    @property
    def deferred(self) -> tuple[CompiledRule, ...]:
        return tuple(r for r in self.rules if r.deferred)

    def inline_for(self, owner: Owner) -> tuple[CompiledRule, ...]:
        return tuple(r for r in self.rules if not r.deferred and r.owner == owner)

    def all_pass(
        self,
        owner: str,
        rules: tuple[CompiledRule, ...],
        build: Callable[[tuple[CompiledRule, ...]], T],
    ) -> T:
        """``build(rules)`` once per owner (the inline rules of one owner never change):
        the combined program of :func:`controller.validation.rules.inline.all_pass_program`."""
        found = self._all_pass.get(owner, _MISSING)
        if found is _MISSING:
            found = self._all_pass[owner] = build(rules)
        return found  # type: ignore[no-any-return]

    def owner_keys(self, rule: CompiledRule) -> frozenset[str]:
        """The owners ``rule`` reads, with ANY expanded to every output / collection."""
        keys: set[str] = set()
        for n in rule.refs.outputs:
            names: Iterable[str] = self.outputs if n == ANY else (n,)
            keys.update(f"{OwnerKind.OUTPUT.value}:{x}" for x in names)
        for n in rule.refs.collections:
            names = self.collections if n == ANY else (n,)
            keys.update(f"{OwnerKind.COLLECTION.value}:{x}" for x in names)
        keys.discard(rule.owner.key)
        return frozenset(keys)

    def reads_inputs(self) -> bool:
        """Does a deferred verdict depend on anything besides the rendered outputs?

        True when a deferred rule reads resources or extraContext, and also whenever a
        deferred rule belongs to a collection: it is evaluated once per object, so the
        objects are its inputs even when the expression itself only reads ``outputs``. A
        new object that changes no rendered byte must still be judged, not meet a cached
        "valid" keyed on the file checksum alone.
        """
        return any(
            r.refs.collections
            or "extraContext" in r.refs.variables
            or r.owner.kind is OwnerKind.COLLECTION
            for r in self.deferred
        )


def _output_owners(spec: HAProxyTemplateConfigSpec) -> dict[str, Owner]:
    owners = {
        MAIN_CONFIG: Owner(OwnerKind.OUTPUT, MAIN_CONFIG, ("spec", "haproxyConfig"), MAIN_CONFIG)
    }
    for spec_field, kind in _OUTPUT_FIELDS:
        for name in sorted(getattr(spec, spec_field)):
            try:
                path = path_for(kind, name)
            except ValueError:
                continue  # the renderer reports E1011; there is nothing to validate
            owners.setdefault(name, Owner(OwnerKind.OUTPUT, name, ("spec", spec_field, name), path))
    return owners


def _output_block(spec: HAProxyTemplateConfigSpec, owner: Owner) -> ValidateBlock | None:
    if owner.spec_path == ("spec", "haproxyConfig"):
        return spec.haproxy_config.validate_
    spec_field = str(owner.spec_path[1])
    out = getattr(spec, spec_field).get(owner.name)
    return out.validate_ if out is not None else None


def _fingerprint(blocks: list[tuple[Owner, ValidateBlock]]) -> str:
    parts = [[owner.key, block.model_dump(mode="json", by_alias=True)] for owner, block in blocks]
    text = json.dumps([SEMANTICS_VERSION, parts], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class _Builder:
    def __init__(
        self, outputs: Mapping[str, Owner], collections: Mapping[str, Owner], locate: Locator | None
    ) -> None:
        self.outputs = outputs
        self.collections = collections
        self.locate = locate
        self.rules: list[CompiledRule] = []
        self.diagnostics: list[Diagnostic] = []

    def block(self, owner: Owner, block: ValidateBlock) -> None:
        base: PathKey = (*owner.spec_path, "validate")
        block_when: Analysis | None = None
        if block.when is not None:
            block_when = self._analyse(_Part((*base, "when"), block.when, _BOOL, "when"))
            if block_when is None:
                return  # every rule depends on it; reported once
        for i, rule in enumerate(block.rules):
            path: PathKey = (*base, "rules", i)
            parts = [_Part((*path, "expression"), rule.expression, _BOOL, "expression")]
            if rule.message_expression is not None:
                parts.append(
                    _Part((*path, "messageExpression"), rule.message_expression, _STRING, "message")
                )
            if rule.when is not None:
                parts.append(_Part((*path, "when"), rule.when, _BOOL, "when"))
            found = {p.what: self._analyse(p) for p in parts}
            if any(a is None for a in found.values()):
                continue
            analyses = [a for a in found.values() if a is not None]
            if block_when is not None:
                analyses.append(block_when)
            refs = Refs()
            for a in analyses:
                refs = refs | a.refs
            expression = found["expression"]
            assert expression is not None
            message = found.get("message")
            when = found.get("when")
            self.rules.append(
                CompiledRule(
                    owner=owner,
                    index=i,
                    spec=rule,
                    expression=expression.program,
                    message=message.program if message is not None else None,
                    when=when.program if when is not None else None,
                    block_when=block_when.program if block_when is not None else None,
                    refs=refs,
                    deferred=not all(a.self_only for a in analyses),
                )
            )

    def _analyse(self, part: _Part) -> Analysis | None:
        try:
            a = analysed(part.source)  # compiled once per process, kept by commands
        except CompileError as exc:
            at = f" (at {exc.line}:{exc.column})" if exc.line is not None else ""
            self._report("E5001", part.path, f"{exc.message}{at}")
            return None
        if a.program.result_type not in part.want:
            want = "bool" if part.want is _BOOL else "string"
            self._report(
                "E5009",
                part.path,
                f"must evaluate to {want}, but the type checker found "
                f"{a.program.result_type.lower()}",
            )
            return None
        unknown = sorted(n for n in a.refs.outputs if n != ANY and n not in self.outputs)
        missing = sorted(n for n in a.refs.collections if n != ANY and n not in self.collections)
        for name in unknown:
            self._report(
                "E5002",
                part.path,
                f"outputs[{name!r}] is not an output (defined: {', '.join(self.outputs)})",
            )
        for name in missing:
            defined = ", ".join(self.collections) or "none"
            self._report(
                "E5002",
                part.path,
                f"resources.{name} is not a watched collection (defined: {defined})",
            )
        return None if unknown or missing else a

    def _report(self, rule_id: RuleId, path: PathKey, message: str) -> None:
        location = self.locate(path) if self.locate is not None else None
        self.diagnostics.append(
            make(rule_id, Phase.RULES, f"{format_path(path)}: {message}", location=location)
        )
