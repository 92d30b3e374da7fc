"""The directive policy: what a rendered configuration may not ask HAProxy to do.

``haproxy -c`` is not a passive check. While it parses, HAProxy runs Lua code, loads engine
and provider modules, starts passphrase commands, creates ring files and expands environment
variables — so a configuration an attacker can influence (through a resource a template
reads) would run code inside the validator before any verdict exists. Denying these
directives before any binary sees the text is the first of the defences described in
docs/policy.md; the sandbox of the ``haproxy`` stage is the second, and does not rely on this.

Each denial has an allow name for ``validation.policy.allowDirectives``. The table is data
(``DENIED_DIRECTIVES``) so that ``htc lint`` and the documentation use the same list.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from controller.diagnostics import Diagnostic, Location, Phase, RuleId, make
from controller.validation.parsed import Directive, ParsedConfig, Section, Token

__all__ = [
    "ALLOW_NAMES",
    "DENIED_DIRECTIVES",
    "ENV_EXPANSION",
    "POLICY_KEYWORDS",
    "Denial",
    "check_policy",
    "unknown_allow_names",
]


@dataclass(frozen=True, slots=True)
class Denial:
    name: str
    """What the configuration writes, and the name that allows it."""
    rule_id: RuleId
    danger: str
    """What HAProxy does with it, in one sentence."""
    where: str
    """How it is recognised."""


def _table(*rows: tuple[str, RuleId, str, str]) -> dict[str, Denial]:
    return {name: Denial(name, rule, danger, where) for name, rule, danger, where in rows}


ENV_EXPANSION = "env-expansion"

DENIED_DIRECTIVES: Mapping[str, Denial] = _table(
    ("lua-load", "E2101", "runs a Lua script while the configuration is parsed", "keyword"),
    ("lua-load-per-thread", "E2101", "runs a Lua script in every thread", "keyword"),
    ("lua-prepend-path", "E2101", "chooses where Lua loads modules from", "keyword"),
    ("ssl-engine", "E2102", "loads an OpenSSL engine (native code)", "keyword"),
    ("ssl-provider", "E2102", "loads an OpenSSL provider (native code)", "keyword"),
    ("ssl-provider-path", "E2102", "chooses where providers are loaded from", "keyword"),
    ("ssl-passphrase-cmd", "E2103", "runs a command to obtain key passphrases", "keyword"),
    ("program", "E2103", "a section that starts and supervises an external program", "section"),
    (
        "external-check",
        "E2103",
        "runs a program as health check (`external-check`, `option external-check`)",
        "keyword, or `option external-check`",
    ),
    ("insecure-fork-wanted", "E2103", "lets HAProxy fork other programs", "keyword"),
    ("insecure-setuid-wanted", "E2103", "lets HAProxy run setuid programs", "keyword"),
    ("backing-file", "E2104", "creates and maps a file for a ring buffer", "keyword in `ring`"),
    ("setenv", "E2105", "sets an environment variable", "keyword"),
    ("presetenv", "E2105", "sets an environment variable unless already set", "keyword"),
    ("resetenv", "E2105", "clears the environment except the names given", "keyword"),
    ("unsetenv", "E2105", "removes environment variables", "keyword"),
    (
        ENV_EXPANSION,
        "E2106",
        "expands `$NAME`/`${NAME}` from the process environment in a double-quoted word",
        "any token with a variable reference",
    ),
    (
        "expose-experimental-directives",
        "E2107",
        "unlocks directives HAProxy marks experimental",
        "keyword",
    ),
)

ALLOW_NAMES: frozenset[str] = frozenset(DENIED_DIRECTIVES)

_KEYWORD_DENIALS = {
    name: d
    for name, d in DENIED_DIRECTIVES.items()
    if d.where == "keyword" or name == "backing-file"
}


#: Every keyword :func:`_match` can deny (it looks at nothing else first); the lean gate
#: (``gate``) reads exactly the lines these start.
POLICY_KEYWORDS = frozenset({*_KEYWORD_DENIALS, "external-check", "option"})

#: Section text hashes known to hold nothing the policy denies (whatever is allowed): a warm
#: run skips them.
_CLEAN: dict[str, bool] = {}
_CLEAN_MAX = 50_000


def _remember(text_hash: str) -> None:
    if len(_CLEAN) >= _CLEAN_MAX:
        _CLEAN.clear()
    _CLEAN[text_hash] = True


def _bare_switch_lines(section: Section) -> set[int]:
    """Lines of the global ``external-check`` switch. On its own it runs nothing: it is denied
    only together with a check that would use it (``option external-check``, ``external-check
    command``), since real configurations often carry the switch unused."""
    return {
        d.line
        for d in section.directives
        if len(d.tokens) == 1 and d.tokens[0].value == "external-check"
    }


def unknown_allow_names(allow: Iterable[str]) -> list[str]:
    """Names in an allow-list that allow nothing (usually typos)."""
    return sorted({a for a in allow if a not in ALLOW_NAMES})


def check_policy(parsed: ParsedConfig, allow: Collection[str] = ()) -> list[Diagnostic]:
    """Errors for every denied directive and variable expansion not in ``allow``."""
    out: list[Diagnostic] = []
    plain = not parsed.macros  # then a section's directives follow from its text alone
    bare: list[Diagnostic] = []
    checks_run = False
    for section in parsed.sections:
        if plain and _CLEAN.get(section.text_hash):
            continue
        found = _section_findings(section)
        if not found and plain:
            _remember(section.text_hash)
        switch = _bare_switch_lines(section) if section.keyword == "global" else ()
        for name, d in found:
            if name == "external-check" and d.location is not None and d.location.line in switch:
                bare.append(d)
                continue
            checks_run = checks_run or name == "external-check"
            if name not in allow:
                out.append(d)
    if checks_run and "external-check" not in allow:
        out.extend(bare)  # the global switch of a check that runs a program
    for macro in parsed.macros:
        out.extend(d for name, d in _env(macro) if name not in allow)
    return out


def _section_findings(section: Section) -> list[tuple[str, Diagnostic]]:
    """(allow name, diagnostic) for everything the policy denies, whatever is allowed.

    Every directive of a never-seen section passes through here before ``haproxy -c`` may
    start, so the common case — a keyword no denial names, no variable reference — costs
    one set lookup and one scan of the tokens, without a call or a generator.
    """
    header = section.header
    out: list[tuple[str, Diagnostic]] = []
    if section.keyword == "program":
        out.append(
            ("program", _deny(DENIED_DIRECTIVES["program"], header, header.tokens[0], "section"))
        )
    out.extend(_env(header))
    for d in section.directives:
        tokens = d.tokens
        if tokens[0].value in POLICY_KEYWORDS:
            denial = _match(d)
            if denial is not None:
                out.append((denial.name, _deny(denial, d, tokens[0], "directive")))
        for t in tokens:
            if t.has_env:
                out.extend(_env(d))
                break
    return out


def _match(d: Directive) -> Denial | None:
    tokens = d.tokens
    keyword = tokens[0].value
    denial = _KEYWORD_DENIALS.get(keyword)
    if denial is not None:
        return denial
    if keyword == "external-check":
        return DENIED_DIRECTIVES["external-check"]
    if keyword == "option" and len(tokens) > 1 and tokens[1].value == "external-check":
        return DENIED_DIRECTIVES["external-check"]
    return None  # "no option external-check" / "no insecure-fork-wanted" switch things off


def _env(d: Directive) -> Iterator[tuple[str, Diagnostic]]:
    for t in d.tokens:
        if t.has_env:
            yield (
                ENV_EXPANSION,
                make(
                    "E2106",
                    Phase.SYNTAX,
                    f"'{d.keyword}' at line {d.line} expands an environment variable in {t.raw}: "
                    "the environment of the HAProxy process is invisible to validation. Allow it "
                    f"with validation.policy.allowDirectives: [{ENV_EXPANSION}]",
                    location=_loc(d, t),
                ),
            )


def _deny(denial: Denial, d: Directive, t: Token, what: str) -> Diagnostic:
    shown = (
        " ".join(tok.value for tok in d.tokens[:2]) if denial.name == "external-check" else t.value
    )
    return make(
        denial.rule_id,
        Phase.SYNTAX,
        f"{what} '{shown}' at line {d.line} is denied: it {denial.danger}. Allow it with "
        f"validation.policy.allowDirectives: [{denial.name}]",
        location=_loc(d, t),
    )


def _loc(d: Directive, t: Token) -> Location:
    return Location(
        file=d.file, line=d.line, column=t.column, end_line=d.line, end_column=t.end_column
    )
