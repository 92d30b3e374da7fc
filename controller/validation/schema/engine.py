"""Judging parsed sections against one family schema (with overlays), fast and cached.

Validation is per directive against that keyword's compiled sub-schema, so a config costs one
small compiled-function call per line rather than one huge validation. Results are cached per
section, keyed by the section's text hash under this engine's fingerprint: a candidate that
differs from the last one in one backend re-validates only that backend. Cached findings are
position-free (directive and token indexes), so a section that moved to other lines is still
reused and reported at its new lines.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count, repeat
from operator import attrgetter, is_
from typing import Any

import fastjsonschema

from controller.diagnostics import Diagnostic, Location, Phase, RuleId, make
from controller.render import SourceMap
from controller.validation.parsed import Directive, ParsedConfig, Section
from controller.validation.schema import generate
from controller.validation.schema.catalog import (
    Family,
    KeywordSpec,
    data_hash,
    family,
    first_family_with,
    first_family_with_section,
    version_key,
)
from controller.validation.schema.normalize import Issue, Normalized, normalize, suggest
from controller.validation.schema.overlay import OverlayResult, apply_overlays

_TRACK_SC = re.compile(r"^track-sc\d+$")
_MASK = object()
"""Stands for a masked word in memo keys (compared by identity, never equal to a word)."""
_COMPILED: dict[str, Callable[[Any], Any]] = {}
"""Compiled validators by sub-schema content hash, shared by every engine in the process."""


@dataclass(frozen=True, slots=True)
class Finding:
    """A position-free finding inside one section (what the section cache stores)."""

    rule_id: RuleId
    message: str
    directive: int
    """Index in ``Section.directives``; -1 for the section header."""
    first: int
    last: int
    fix: str | None = None


@dataclass
class Stats:
    """Work counters; tests use them to prove what the cache saved."""

    sections_checked: int = 0
    sections_reused: int = 0
    directives_checked: int = 0
    directives_skipped: int = 0
    """Directives inside undecidable ``.if`` blocks, left to ``haproxy -c``."""


class _Node:
    __slots__ = ("children", "spec")

    def __init__(self) -> None:
        self.spec: KeywordSpec | None = None
        self.children: dict[str, _Node] = {}


def _norm(word: str) -> str:
    """Action words carry arguments (``set-var(txn.x)``, ``track-sc0``); look up the name."""
    if "(" in word and not word.startswith("("):
        word = word.split("(", 1)[0]
    if _TRACK_SC.match(word):
        return "track-sc"
    return word


def _trie(specs: Iterable[KeywordSpec]) -> _Node:
    root = _Node()
    for spec in specs:
        node = root
        for word in spec.words:
            node = node.children.setdefault(word, _Node())
        node.spec = spec
    return root


def fingerprint_of(family_name: str, overlays: Sequence[Mapping[str, Any]]) -> str:
    payload = json.dumps(
        {"family": family_name, "data": data_hash(), "overlays": list(overlays)},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


_TEXT_HASH = attrgetter("text_hash")


class SchemaEngine:
    """One family's schema with overlays applied; validates sections and caches the results."""

    def __init__(
        self,
        family_name: str,
        overlays: Sequence[Mapping[str, Any]] = (),
        *,
        cache_size: int = 100_000,
    ) -> None:
        self.family: Family = family(family_name)
        self.overlays = list(overlays)
        base = generate.shared_document(family_name)
        self.overlay_result: OverlayResult | None = None
        if self.overlays:
            self.overlay_result = apply_overlays(base, self.overlays)
            self.document: Mapping[str, Any] = self.overlay_result.document
        else:
            self.document = base
        self.fingerprint = fingerprint_of(family_name, self.overlays)
        self._tries = {g: _trie(specs.values()) for g, specs in self.family.keywords.items()}
        self._validators: dict[
            tuple[str, str], tuple[Callable[[Any], Any], Mapping[str, Any] | None]
        ] = {}
        self._option_validators: dict[tuple[str, str], dict[str, Callable[[Any], Any]]] = {}
        self._cache: OrderedDict[tuple[str, ...], tuple[Finding, ...]] = OrderedDict()
        self._by_hash: dict[str, tuple[Finding, ...]] = {}
        """A section's findings by its text's hash alone, for parses without conditional
        blocks (see :meth:`_check_plain`); emptied when it holds ``cache_size``."""
        self._cache_size = cache_size
        self._memo: dict[tuple[Any, ...], tuple[tuple[RuleId, str, int, int, str | None], ...]] = {}
        self._memo_size = 200_000
        self._masks: dict[tuple[str, str], tuple[tuple[int, ...], int | None, bool]] = {}
        self.stats = Stats()

    # --- public ------------------------------------------------------------------------------

    def warm_up(self) -> int:
        """Compile every keyword's validator, and every option's, before any candidate.

        Validators are otherwise compiled on first use, and compiling (code generation plus
        ``exec``) costs far more than validating: a process's first configuration spends most
        of its schema time there. A long-running controller calls this once at start-up so its
        first candidate is judged at the speed of every later one. Idempotent; the compiled
        functions are shared by every engine in the process, so a second engine of the same
        family only pays for hashing. Returns the number of keyword validators ready.
        """
        ready = 0
        for section, node in self.document["definitions"].items():
            props = node.get("properties") if isinstance(node, dict) else None
            if not isinstance(props, dict):
                continue
            for key in props:
                plan = self._validators.get((section, key)) or self._compile(section, key)
                options = plan[1]
                if options:
                    compiled = self._option_validators.setdefault((section, key), {})
                    for name, sub in options.items():
                        if name not in compiled:
                            compiled[name] = _compiled(sub)
                ready += 1
        return ready

    def check(self, parsed: ParsedConfig) -> list[tuple[Section, Finding]]:
        """Findings of every section, reusing cached results of unchanged sections."""
        if not parsed.macros:
            hashes = list(map(_TEXT_HASH, parsed.sections))
            if "" not in hashes:
                return self._check_plain(parsed.sections, hashes)
        out: list[tuple[Section, Finding]] = []
        has_conditions = bool(parsed.macros)
        for section in parsed.sections:
            key: tuple[str, ...] = (section.keyword, section.text_hash or _hash_section(section))
            if has_conditions:
                # the same text may sit inside an undecidable .if block this time
                flags = [str(i) for i, d in enumerate(section.directives) if d.conditional]
                key = (*key, *flags)
            found = self._cached(section, key)
            for f in found:
                out.append((section, f))
        return out

    def _cached(self, section: Section, key: tuple[str, ...]) -> tuple[Finding, ...]:
        """The findings of ``section`` from the cache of findings by ``key``, checked and
        kept (the oldest dropped beyond the cache size) when not there."""
        cache = self._cache
        found = cache.get(key)
        if found is None:
            found = self.check_section(section)
            cache[key] = found
            if len(cache) > self._cache_size:
                cache.popitem(last=False)
        else:
            cache.move_to_end(key)
            self.stats.sections_reused += 1
        return found

    def _check_plain(
        self, sections: Sequence[Section], hashes: list[str]
    ) -> list[tuple[Section, Finding]]:
        """:meth:`check` of a parse without conditional blocks, whose sections all carry
        their text's hash: each section's findings follow from its text alone, so they are
        looked up by that hash, all sections at once in C, and only the sections never seen
        go through the cache of findings (and :meth:`check_section`). At 1,000 Ingresses a
        proposal's 1,005 sections cost 0.7 ms one by one, for the one or two that changed."""
        by_hash = self._by_hash
        found_all: list[tuple[Finding, ...] | None] = list(map(by_hash.get, hashes))
        misses = list(compress(count(), map(is_, found_all, repeat(None))))
        self.stats.sections_reused += len(sections) - len(misses)
        if len(by_hash) + len(misses) > self._cache_size:
            by_hash.clear()
        for i in misses:
            section, text_hash = sections[i], hashes[i]
            found = self._cached(section, (section.keyword, text_hash))
            by_hash[text_hash] = found_all[i] = found
        return [(sections[i], f) for i in compress(count(), found_all) for f in found_all[i] or ()]

    def diagnostics(
        self, parsed: ParsedConfig, path: str, source_map: SourceMap | None = None
    ) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        for section, f in self.check(parsed):
            d = section.header if f.directive < 0 else section.directives[f.directive]
            first = d.tokens[min(f.first, len(d.tokens) - 1)] if d.tokens else None
            last = d.tokens[min(f.last, len(d.tokens) - 1)] if d.tokens else None
            location = Location(
                file=path,
                line=d.line,
                column=first.column if first else None,
                end_line=d.line,
                end_column=last.end_column if last else None,
            )
            fields: dict[str, Any] = {"location": location}
            if source_map is not None:
                tl = source_map.lookup(path, d.line)
                if tl is not None:
                    fields["template_location"] = tl
            if f.fix:
                fields["suggested_fix"] = f.fix
            out.append(make(f.rule_id, Phase.SCHEMA, f.message, **fields))
        return out

    def check_section(self, section: Section) -> tuple[Finding, ...]:
        self.stats.sections_checked += 1
        fam = self.family
        spec = fam.sections.get(section.keyword)
        header_span = max(len(section.header.tokens) - 1, 0)
        if spec is None:
            since = first_family_with_section(section.keyword)
            if since is not None and version_key(since) > version_key(fam.name):
                return (
                    Finding(
                        "E3009",
                        f"section '{section.keyword}' is not available in HAProxy {fam.name} "
                        f"(it exists since {since})",
                        -1,
                        0,
                        0,
                    ),
                )
            return (
                Finding(
                    "I3014",
                    f"section '{section.keyword}' is not described by the HAProxy {fam.name} "
                    "schema; its directives were not checked",
                    -1,
                    0,
                    0,
                ),
            )
        findings: list[Finding] = []
        if spec.deprecated is not None:
            use = spec.deprecated.use
            findings.append(
                Finding(
                    "W3008",
                    f"section '{section.keyword}' is deprecated {spec.deprecated.when()}",
                    -1,
                    0,
                    header_span,
                    f"use {use} instead" if use else None,
                )
            )
        if spec.open:
            return tuple(findings)
        trie = self._tries.get(spec.group, _Node())
        named = section.name is not None
        for index, directive in enumerate(section.directives):
            if not directive.tokens:
                continue
            if directive.conditional:
                # inside an .if HAProxy may skip: haproxy -c judges it when it is active
                self.stats.directives_skipped += 1
                continue
            self.stats.directives_checked += 1
            findings.extend(self._directive(section.keyword, trie, index, directive, named))
        return tuple(findings)

    def instance(self, parsed: ParsedConfig) -> dict[str, Any]:
        """The parsed-form JSON document the family schema describes (for export and for
        checking the document against a plain JSON Schema validator). Directives whose
        keyword is unknown keep their words under their first word."""
        doc: dict[str, list[dict[str, Any]]] = {}
        for section in parsed.sections:
            spec = self.family.sections.get(section.keyword)
            trie = self._tries.get(spec.group, _Node()) if spec else _Node()
            directives: list[dict[str, Any]] = []
            for d in section.directives:
                if not d.tokens or d.conditional:
                    continue
                directives.append(self._directive_instance(trie, d))
            doc.setdefault(section.keyword, []).append(
                {"name": section.name, "directives": directives}
            )
        return doc

    def _directive_instance(self, trie: _Node, d: Directive) -> dict[str, Any]:
        values = [t.value for t in d.tokens]
        start, prefix = (
            (1, values[0]) if values[0] in ("no", "default") and len(values) > 1 else (0, None)
        )
        node = trie.children.get(values[start])
        best: tuple[KeywordSpec, int] | None = None
        depth = start + 1
        if node is not None:
            best = (node.spec, depth) if node.spec else None
            while node.children and depth < len(values):
                child = node.children.get(_norm(values[depth]))
                if child is None:
                    break
                node, depth = child, depth + 1
                if child.spec is not None:
                    best = (child.spec, depth)
        if best is None:
            return {" ".join(values[start:depth]): {"_words": values[depth:]}}
        spec, consumed = best
        table = self.family.option_tables.get(spec.options) if spec.options else None
        return {spec.key: normalize(d, spec, consumed, prefix, table).instance}

    # --- one directive ----------------------------------------------------------------------

    def _directive(
        self, section: str, trie: _Node, index: int, d: Directive, named: bool
    ) -> list[Finding]:
        values = [t.value for t in d.tokens]
        start = 0
        prefix: str | None = None
        if values[0] in ("no", "default") and len(values) > 1:
            prefix, start = values[0], 1
        node = trie.children.get(values[start])
        if node is None:
            return [self._unknown_keyword(section, index, values, start)]
        depth = start + 1
        best: tuple[KeywordSpec, int] | None = (node.spec, depth) if node.spec else None
        while node.children and depth < len(values):
            child = node.children.get(_norm(values[depth]))
            if child is None:
                break
            node = child
            depth += 1
            if child.spec is not None:
                best = (child.spec, depth)
        if best is None or (node.spec is None and best[1] < depth):
            return [self._unknown_child(section, index, values, start, depth, node)]
        spec, consumed = best
        env = False
        for t in d.tokens:
            if t.has_env:
                env = True
                break
        memo_key = self._memo_key(section, spec, consumed, values, env, named)
        cached = self._memo.get(memo_key)
        if cached is None:
            found = self._known(section, 0, d, spec, consumed, prefix, named, env)
            cached = tuple((f.rule_id, f.message, f.first, f.last, f.fix) for f in found)
            if len(self._memo) >= self._memo_size:
                self._memo.clear()
            self._memo[memo_key] = cached
        return [Finding(r, m, index, a, b, x) for r, m, a, b, x in cached]

    def _memo_key(
        self,
        section: str,
        spec: KeywordSpec,
        consumed: int,
        values: list[str],
        env: bool,
        named: bool,
    ) -> tuple[Any, ...]:
        """Directives are memoized by their words, with words that cannot affect the verdict
        (values of unconstrained string arguments, condition terms) masked, so the 5,000
        ``server`` lines of a large configuration share one validation."""
        masks = self._masks.get((section, spec.key))
        if masks is None:
            masks = self._mask_plan(section, spec)
        singles, rest, cond_terms = masks
        n = len(values)
        cut = n
        if spec.cond:
            for i in range(consumed, n):
                if values[i] == "if" or values[i] == "unless":
                    cut = i
                    break
        key: list[object] = list(values)
        for offset in singles:
            pos = consumed + offset
            if pos < cut:
                key[pos] = _MASK
        if rest is not None:
            for pos in range(consumed + rest, cut):
                key[pos] = _MASK
        if cond_terms:
            for pos in range(cut + 1, n):
                key[pos] = _MASK
        return (section, named, env, *key)

    def _mask_plan(
        self, section: str, spec: KeywordSpec
    ) -> tuple[tuple[int, ...], int | None, bool]:
        node = self._schema_node(section, spec.key)
        props = node.get("properties", {}) if isinstance(node, dict) else {}
        singles: list[int] = []
        rest: int | None = None
        for offset, arg in enumerate(spec.args):
            pristine = _is_plain_string(props.get(arg.name), many=arg.many)
            if arg.many:
                if pristine and not spec.options:
                    rest = offset
                break
            if pristine and arg.type.kind == "str":
                singles.append(offset)
        cond_terms = spec.cond and props.get("condition") == generate.CONDITION_SCHEMA
        if spec.parser is not None:
            singles, rest = [], None
        plan = (tuple(singles), rest, cond_terms)
        self._masks[(section, spec.key)] = plan
        return plan

    def _known(
        self,
        section: str,
        index: int,
        d: Directive,
        spec: KeywordSpec,
        consumed: int,
        prefix: str | None,
        named: bool,
        env: bool = False,
    ) -> list[Finding]:
        key = spec.key
        kw_last = consumed - 1
        if spec.removed is not None:
            use = spec.removed.use
            return [
                Finding(
                    "E3007",
                    f"'{key}' was removed {spec.removed.when()}",
                    index,
                    0,
                    kw_last,
                    f"use {use} instead" if use else None,
                )
            ]
        out: list[Finding] = []
        placement = spec.placement(section, named=named)
        if placement == "error":
            where = (
                "an anonymous 'defaults' section (name the section to use it there)"
                if section == "defaults" and spec.sections and spec.sections[0] == "n"
                else f"a '{section}' section"
            )
            return [Finding("E3002", f"'{key}' is not allowed in {where}", index, 0, kw_last)]
        if placement == "warn":
            need = {
                "backend": ": it needs the frontend capability",
                "frontend": ": it needs the backend capability",
            }
            out.append(
                Finding(
                    "W3003",
                    f"'{key}' is ignored in a '{section}' section{need.get(section, '')}",
                    index,
                    0,
                    kw_last,
                )
            )
        if prefix is not None and prefix not in spec.prefixes:
            out.append(
                Finding(
                    "E3005",
                    f"the '{prefix}' prefix is not supported for '{key}'",
                    index,
                    0,
                    kw_last,
                    f"remove '{prefix}'",
                )
            )
            return out
        if spec.deprecated is not None:
            use = spec.deprecated.use
            out.append(
                Finding(
                    "W3008",
                    f"'{key}' is deprecated {spec.deprecated.when()}",
                    index,
                    0,
                    kw_last,
                    f"use {use} instead" if use else None,
                )
            )
        table = self.family.option_tables.get(spec.options) if spec.options else None
        norm = normalize(
            d,
            spec,
            consumed,
            prefix,
            table,
            env=env,
            timer_trailing_error=self.family.timer_trailing_error,
        )
        blocking = False
        for issue in norm.issues:
            out.append(_from_issue(index, issue))
            blocking = blocking or issue.rule_id.startswith("E")
        if blocking or not norm.verifiable:
            return out
        error = self._validate(section, key, norm)
        if error is not None:
            out.append(self._from_schema_error(index, d, key, section, norm, error))
        return out

    def _validate(self, section: str, key: str, norm: Normalized) -> _SchemaError | None:
        plan = self._validators.get((section, key))
        if plan is None:
            plan = self._compile(section, key)
        whole, options = plan
        instance = norm.instance
        opts = instance.get("options")
        try:
            if options is None or not isinstance(opts, dict):
                whole(instance)
                return None
            # options are judged one by one: a compiled 100-option object is slow to build
            # and to run, while the few option schemas in use are tiny and shared
            whole({**instance, "options": dict.fromkeys(opts)})
        except fastjsonschema.JsonSchemaValueException as exc:
            return _SchemaError.of(exc, [])
        compiled = self._option_validators.setdefault((section, key), {})
        for name, value in opts.items():
            check = compiled.get(name)
            if check is None:
                check = compiled[name] = _compiled(options.get(name, False))
            try:
                check(value)
            except fastjsonschema.JsonSchemaValueException as exc:
                return _SchemaError.of(exc, ["options", name])
        return None

    def _schema_node(self, section: str, key: str) -> Any:
        """The keyword's schema in that section, or None when the section does not admit it."""
        return self.document["definitions"].get(section, {}).get("properties", {}).get(key)

    def _compile(
        self, section: str, key: str
    ) -> tuple[Callable[[Any], Any], Mapping[str, Any] | None]:
        """The directive's validator, and the option schemas when options are split off."""
        node = self._schema_node(section, key)
        options = _splittable_options(node)
        if options is None:
            plan = (_compiled(node), None)
        else:
            shell = {
                k: v for k, v in options.items() if k not in ("properties", "additionalProperties")
            }
            outer = {**node, "properties": {**node["properties"], "options": shell}}
            plan = (_compiled(outer), options["properties"])
        self._validators[(section, key)] = plan
        return plan

    # --- messages ---------------------------------------------------------------------------

    def _unknown_keyword(self, section: str, index: int, values: list[str], start: int) -> Finding:
        fam = self.family
        word = values[start]
        group = fam.sections[section].group
        here = fam.keywords.get(group, {})
        firsts = {k.split(" ", 1)[0] for k in here}
        for other, specs in fam.keywords.items():
            if other != group and any(k.split(" ", 1)[0] == word for k in specs):
                owners = sorted(s for s, sp in fam.sections.items() if sp.group == other)
                return Finding(
                    "W3015",
                    f"unknown keyword '{word}' in a '{section}' section "
                    f"(it belongs in {' or '.join(repr(o) for o in owners)} sections)",
                    index,
                    start,
                    start,
                )
        later = first_family_with(group, word)
        if later is not None and version_key(later) > version_key(fam.name):
            return Finding(
                "W3015",
                f"'{word}' is not in the HAProxy {fam.name} schema (it exists since {later})",
                index,
                start,
                start,
            )
        close = suggest(word, firsts)
        return Finding(
            "W3015",
            f"unknown keyword '{word}' in a '{section}' section",
            index,
            start,
            start,
            f"did you mean '{close}'?" if close else None,
        )

    def _unknown_child(
        self, section: str, index: int, values: list[str], start: int, depth: int, node: _Node
    ) -> Finding:
        head = " ".join(_norm(v) if i else v for i, v in enumerate(values[start:depth]))
        if depth >= len(values):
            choices = ", ".join(sorted(node.children)[:12])
            return Finding(
                "E3005",
                f"'{head}' expects one of: {choices}",
                index,
                start,
                depth - 1,
            )
        word = _norm(values[depth])
        group = self.family.sections[section].group
        later = first_family_with(group, f"{head} {word}")
        if later is not None and version_key(later) > version_key(self.family.name):
            return Finding(
                "W3016",
                f"'{head} {word}' is not in the HAProxy {self.family.name} schema "
                f"(it exists since {later})",
                index,
                depth,
                depth,
            )
        close = suggest(word, node.children)
        return Finding(
            "W3016",
            f"unknown '{head}' keyword '{word}'",
            index,
            depth,
            depth,
            f"did you mean '{close}'?" if close else None,
        )

    def _from_schema_error(
        self,
        index: int,
        d: Directive,
        key: str,
        section: str,
        norm: Normalized,
        exc: _SchemaError,
    ) -> Finding:
        root = self._schema_node(section, key)
        path: list[str | int] = []
        node: Any = root
        for part in exc.path:
            if (
                isinstance(node, dict)
                and isinstance(node.get("properties"), dict)
                and (part in node["properties"])
            ):
                node = node["properties"][part]
                path.append(part)
            elif isinstance(node, dict) and isinstance(node.get("items"), dict):
                node = node["items"]
                path.append(int(part) if str(part).isdigit() else part)
            else:
                break
        first, last = _span(norm, tuple(path), len(d.tokens))
        raw = d.tokens[last].value if d.tokens else ""
        label = _label(key, path)
        rule = exc.rule
        touched = (
            self.overlay_result.touched.get(id(node), frozenset())
            if self.overlay_result
            else frozenset()
        )
        rule_id: RuleId = "E3013" if rule in touched or root is False else "E3004"
        fix: str | None = None
        advisory = _advisory(rule, node, _at(norm.instance, path))
        if root is False or node is False:
            message = f"{label} is forbidden by a schema overlay"
            rule_id = "E3013"
        elif rule == "required":
            missing = [n for n in (exc.definition or []) if n not in _at(norm.instance, path)]
            message = f"{label}: missing argument <{', '.join(missing)}>"
            rule_id = "E3013" if rule_id == "E3013" else "E3005"
        elif rule in ("additionalProperties", "maxProperties"):
            inst = _at(norm.instance, path)
            extra = inst.get("_extra") if isinstance(inst, dict) else None
            if extra:
                message = f"{label}: unexpected argument(s) '{' '.join(map(str, extra))}'"
                first, last = norm.spans.get(("_extra",), (first, last))
                advisory = "HAProxy ignores surplus words for many keywords"
            else:
                message = f"{label}: takes no further arguments"
            rule_id = "E3013" if rule_id == "E3013" else "E3005"
        elif rule == "type":
            message = f"{label} must be {_hint(node)} (got '{raw}')"
        elif rule == "enum":
            choices = [str(v) for v in (exc.definition or [])]
            message = f"{label} must be one of {', '.join(choices)} (got '{raw}')"
            close = suggest(raw, choices)
            fix = f"did you mean '{close}'?" if close else None
        elif rule in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            op = {
                "minimum": ">=",
                "maximum": "<=",
                "exclusiveMinimum": ">",
                "exclusiveMaximum": "<",
            }
            unit = f" {node['x-unit']}" if isinstance(node, dict) and "x-unit" in node else ""
            message = f"{label} must be {op[rule]} {exc.definition}{unit} (got '{raw}')"
        elif rule == "pattern":
            message = f"{label}: '{raw}' is not an accepted value"
        elif rule == "minItems" and path and path[0] == "condition":
            message = (
                f"'{key}': empty condition after '{_at(norm.instance, ['condition']).get('kind')}'"
            )
            rule_id = "E3013" if rule_id == "E3013" else "E3005"
            advisory = "HAProxy loads a rule whose condition is empty"
        else:
            detail = exc.message.replace(exc.name, "", 1).strip()
            message = f"{label} {detail} (got '{raw}')"
        if rule_id == "E3013" and "overlay" not in message:
            message += " [constraint from validation.schemaOverlays]"
        elif advisory is not None and rule_id in ("E3004", "E3005"):
            rule_id = "W3017"
            message += f" ({advisory})"
        return Finding(rule_id, message, index, first, last, fix)


@dataclass(frozen=True, slots=True)
class _SchemaError:
    """A validator's complaint, with its path relative to the whole directive instance."""

    path: list[str]
    rule: str
    definition: Any
    message: str
    name: str

    @classmethod
    def of(cls, exc: fastjsonschema.JsonSchemaValueException, prefix: list[str]) -> _SchemaError:
        inner = [str(p) for p in (exc.path or ["data"])[1:]]
        name = exc.name or "data"
        label = "data" + "".join(f".{p}" for p in prefix)
        return cls(
            [*prefix, *inner],
            exc.rule or "",
            exc.rule_definition,
            exc.message.replace(name, label, 1),
            label,
        )


#: Numbers beyond a C int wrap or saturate in HAProxy's parsers, whatever range they check.
_INT_LIMIT = 2**31


def _advisory(rule: str, node: Any, value: Any) -> str | None:
    """Why a number finding is only advice, or None when a real binary would refuse it too.

    Most HAProxy parsers read numbers with ``atoi``/``strtol`` and keep what comes out: ``10x``
    loads as 10, ``abc`` as 0, ``-1`` may wrap. Only a range marked ``x-checked`` (``!`` in the
    data, confirmed against both binaries) is known to be refused.
    """
    if not isinstance(node, dict) or node.get("type") != "integer":
        return None
    if rule == "type":
        return "HAProxy reads numbers up to the first non-digit and loads the line"
    if rule not in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return None
    if node.get("x-checked") and isinstance(value, int) and abs(value) < _INT_LIMIT:
        return None
    return "HAProxy does not refuse it, but will not use the value as written"


def _compiled(node: Any) -> Callable[[Any], Any]:
    digest = hashlib.sha256(json.dumps(node, sort_keys=True).encode()).hexdigest()
    validator = _COMPILED.get(digest)
    if validator is None:
        validator = fastjsonschema.compile(node)
        _COMPILED[digest] = validator
    return validator


_OPTION_OBJECT_KEYS = frozenset({"type", "properties", "additionalProperties", "required"})


def _splittable_options(node: Any) -> Mapping[str, Any] | None:
    """The ``options`` schema when it can be judged option by option: a plain object of named
    options (overlays may add ``required``); anything fancier is validated whole."""
    if not isinstance(node, dict):
        return None
    options = node.get("properties", {}).get("options")
    if not isinstance(options, dict) or not isinstance(options.get("properties"), dict):
        return None
    if options.get("additionalProperties", False) is not False:
        return None
    if any(k not in _OPTION_OBJECT_KEYS and not k.startswith("x-") for k in options):
        return None
    return options


def _is_plain_string(node: Any, *, many: bool) -> bool:
    """True when a schema accepts any string (or list of strings): nothing to check there."""
    if many:
        if not isinstance(node, dict) or set(node) - {"type", "items", "minItems"}:
            return False
        if node.get("type") != "array" or node.get("minItems", 1) > 1:
            return False
        node = node.get("items")
    return bool(node == {"type": "string"})


def _from_issue(index: int, issue: Issue) -> Finding:
    return Finding(issue.rule_id, issue.message, index, issue.first, issue.last, issue.fix)


def _hash_section(section: Section) -> str:
    h = hashlib.sha256()
    for d in (section.header, *section.directives):
        h.update(b"\n")
        for t in d.tokens:
            h.update(t.raw.encode())
            h.update(b"\x00")
    return h.hexdigest()


def _at(instance: Any, path: Sequence[str | int]) -> Any:
    node = instance
    for part in path:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if not (in_dict or in_list):
            return {}
        node = node[part]
    return node


def _span(norm: Normalized, path: tuple[str | int, ...], ntokens: int) -> tuple[int, int]:
    for n in range(len(path), 0, -1):
        span = norm.spans.get(path[:n])
        if span is not None:
            return span
    return 0, max(ntokens - 1, 0)


def _label(key: str, path: Sequence[str | int]) -> str:
    if not path:
        return f"'{key}'"
    if path[0] == "options" and len(path) > 1:
        return f"'{key}' option '{path[1]}'"
    if path[0] == "condition":
        return f"'{key}' condition"
    return f"'{key}' argument <{path[0]}>"


def _hint(node: Any) -> str:
    if not isinstance(node, dict):
        return "a valid value"
    if node.get("x-unit") == "ms":
        unit = node.get("x-default-unit")
        return "a time such as 5s or 250ms" + (f" (plain numbers are {unit})" if unit else "")
    if node.get("x-unit") == "bytes":
        return "a size such as 16384 or 64k"
    kind = node.get("type")
    return {
        "integer": "an integer",
        "number": "a number",
        "string": "a word",
        "array": "a list",
        "boolean": "a boolean",
    }.get(kind if isinstance(kind, str) else "", "a valid value")


__all__ = ["Finding", "SchemaEngine", "Stats", "fingerprint_of"]
