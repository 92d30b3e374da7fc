"""Reading ``haproxy -dKall`` and comparing it with a family's catalog.

``haproxy -dKall -q -c -f /dev/null`` prints every keyword registered through HAProxy's keyword
tables: configuration keywords per class (``global``, ``listen`` for all proxy sections,
``userlist``, ``peers``, ``crt-list``), ``bind``/``server`` options, ``option`` names with their
capabilities, and the actions of each rule set. Keywords handled directly by the core section
parsers (``mode``, ``balance``, ``server``, ``option httplog``, ...) are *not* listed; the catalog
marks them ``core`` and they are proven instead by feeding examples to the real binary.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field

from controller.validation.schema.catalog import Family, KeywordSpec

_RULESETS = (
    "tcp-request connection",
    "tcp-request session",
    "tcp-request content",
    "tcp-response content",
    "http-request",
    "http-response",
    "http-after-response",
)
_OPTION_RE = re.compile(r"^option (\S+)(?: \[ (.*) \])?$")
_FEATURE_RE = re.compile(r"([+-])([A-Z0-9_]+)")


@dataclass
class KeywordDump:
    """The configuration part of one binary's ``-dKall`` output."""

    classes: dict[str, set[str]] = field(default_factory=dict)
    """Plain keywords per class: ``global``, ``listen``, ``userlist``, ``peers``, ``crt-list``."""
    bind: set[str] = field(default_factory=set)
    server: set[str] = field(default_factory=set)
    options: dict[str, set[str]] = field(default_factory=dict)
    """``option`` name → capabilities (``FE``, ``BE``, ``HTTP``)."""
    actions: dict[str, set[str]] = field(default_factory=dict)
    """Rule set → action names (``set-var*`` style names keep their ``*``)."""

    def entries(self) -> set[str]:
        """Every listed entry, each named once, for coverage counting."""
        out = {f"{cls}/{kw}" for cls, kws in self.classes.items() for kw in kws}
        out |= {f"bind/{kw}" for kw in self.bind}
        out |= {f"server/{kw}" for kw in self.server}
        out |= {f"option/{kw}" for kw in self.options}
        out |= {f"{rs}/{a}" for rs, acts in self.actions.items() for a in acts}
        return out


def parse_dump(text: str) -> KeywordDump:
    dump = KeywordDump()
    in_cfg = False
    cls = None
    for line in text.splitlines():
        if line.startswith("#"):
            in_cfg = line.startswith("# List of registered configuration keywords")
            cls = None
            continue
        if not in_cfg or not line.strip():
            continue
        if not line.startswith("\t"):
            cls = line.strip()
            dump.classes.setdefault(cls, set())
            continue
        entry = line.strip()
        if cls is None:
            continue
        if entry.startswith("bind <addr> "):
            dump.bind.add(_strip_arity(entry[len("bind <addr> ") :].removeprefix("ssl ")))
        elif entry.startswith("server <name> <addr> "):
            dump.server.add(_strip_arity(entry[len("server <name> <addr> ") :]))
        elif m := _OPTION_RE.match(entry):
            dump.options[m.group(1)] = set((m.group(2) or "").split())
        elif ruleset := next((rs for rs in _RULESETS if entry.startswith(rs + " ")), None):
            dump.actions.setdefault(ruleset, set()).add(entry[len(ruleset) + 1 :])
        else:
            dump.classes[cls].add(_strip_arity(entry))
    return dump


def _strip_arity(entry: str) -> str:
    return entry.split(" ")[0]


def run_dump(binary: str, *, timeout: float = 10.0) -> str:
    """The raw ``-dKall`` text of a binary (it exits non-zero on /dev/null; that is expected)."""
    proc = subprocess.run(
        [binary, "-dKall", "-q", "-c", "-f", "/dev/null"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={},
        check=False,
    )
    return proc.stdout + proc.stderr


def features(binary: str, *, timeout: float = 10.0) -> set[str]:
    """Build features the binary reports as enabled in ``haproxy -vv`` (``LUA``, ``OT``...)."""
    proc = subprocess.run(
        [binary, "-vv"], capture_output=True, text=True, timeout=timeout, env={}, check=False
    )
    enabled: set[str] = set()
    for line in proc.stdout.splitlines():
        if line.startswith("Feature list"):
            enabled |= {m.group(2) for m in _FEATURE_RE.finditer(line) if m.group(1) == "+"}
        if line.strip().startswith("OPTIONS ="):
            enabled |= {
                opt.split("=")[0].removeprefix("USE_") for opt in line.split("=", 1)[1].split()
            }
    if "OPENSSL" in enabled:
        enabled.add("SSL")
    return enabled


_CLASS_OF_GROUP = {"global": "global", "proxy": "listen", "userlist": "userlist", "peers": "peers"}


def dump_candidates(spec: KeywordSpec) -> list[str]:
    """Dump entries (``class/keyword`` form of :meth:`KeywordDump.entries`) that list ``spec``."""
    if spec.kind == "action":
        ruleset, _, action = spec.key.rpartition(" ")
        return [f"{ruleset}/{action}", f"{ruleset}/{action}*"]
    if spec.kind == "option":
        return [f"option/{spec.key.split(' ', 1)[1]}"]
    cls = _CLASS_OF_GROUP.get(spec.group)
    if cls is None:
        return []
    words = spec.words
    out = [f"{cls}/{spec.key}"]
    if len(words) > 1:
        out.append(f"{cls}/{words[0]}")
    return out


@dataclass
class CrossCheck:
    """Outcome of comparing one family's catalog with one binary's dump."""

    missing: list[str] = field(default_factory=list)
    """Non-core keywords/options the schema lists but the binary does not register."""
    misclassified_core: list[str] = field(default_factory=list)
    """Keywords marked core although the dump lists them."""
    covered: set[str] = field(default_factory=set)
    """Dump entries the schema describes."""
    total: int = 0
    uncovered: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return len(self.covered) / self.total if self.total else 1.0


def cross_check(fam: Family, dump: KeywordDump, enabled: Iterable[str]) -> CrossCheck:
    """Compare a family with a binary: every registered keyword we list must be in its dump."""
    have = dump.entries()
    feats = set(enabled)
    result = CrossCheck(total=len(have))
    for group, specs in fam.keywords.items():
        for spec in specs.values():
            if spec.removed is not None and spec.removed.since is None:
                continue
            cands = dump_candidates(spec)
            hits = [c for c in cands if c in have]
            result.covered.update(hits)
            if not cands:
                continue
            if spec.core:
                if hits:
                    result.misclassified_core.append(f"{group}/{spec.key}")
                continue
            if spec.feature and spec.feature not in feats:
                continue
            if not hits and spec.removed is None:
                result.missing.append(f"{group}/{spec.key}")
    for table, label in (("bind", "bind"), ("server", "server")):
        for name, entry in fam.option_tables.get(table, {}).items():
            entry_key = f"{label}/{name}"
            if entry_key in have:
                result.covered.add(entry_key)
                if entry.core:
                    result.misclassified_core.append(entry_key)
            elif (
                not entry.core
                and entry.removed is None
                and (entry.feature is None or entry.feature in feats)
            ):
                result.missing.append(entry_key)
    result.uncovered = sorted(have - result.covered)
    return result
