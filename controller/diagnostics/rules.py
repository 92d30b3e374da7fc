"""The rule registry: the only source of rule ids, titles, descriptions and fix hints.

Ids are stable API (reports, filters, dashboards and SARIF results refer to them), so an id is
never reused for a different meaning. The first letter is the severity (F fatal, E error,
W warning, I info); the digits group by area:

    0xxx  internal / pipeline          1xxx  render
    2xxx  syntax + directive policy    3xxx  schema
    4xxx  haproxy -c                   5xxx  CEL rules
    6xxx  external validators          7xxx  deploy / runtime
    8xxx  spec, lint, input files

Each area keeps its entries in its own block below. ``tests/diagnostics`` fails if any code
emits an id that is not registered here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from controller import __version__
from controller.diagnostics.ids import RuleId
from controller.diagnostics.model import Diagnostic, Phase, Severity

DOCS_PAGE = "docs/diagnostics.md"
"""Where every rule is described, relative to the repository root; generated from this
registry (``python -m controller.diagnostics docs``), so a link never points at nothing."""

DOCS_URL_ENV = "HTC_DOCS_URL"
"""The environment variable that names the published diagnostics page: an absolute http(s)
URL in which ``{version}`` stands for the controller's version, e.g.
``https://docs.example.org/htc/v{version}/diagnostics/`` (see :func:`configure_docs_url`)."""


def _docs_page(template: str | None) -> str:
    if not template:
        return DOCS_PAGE
    url = template.replace("{version}", __version__)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
        raise ValueError(
            f"{DOCS_URL_ENV} must be an absolute http(s) URL without a fragment, got {template!r}"
        )
    return url


_docs_url = _docs_page(os.environ.get(DOCS_URL_ENV))


def configure_docs_url(template: str | None) -> str:
    """Where ``documentationUrl`` points from now on; returns the page URL.

    A report read far from this repository (a kubectl Event, a SARIF viewer, a CI log) needs
    an absolute link to the documentation of the version that wrote it, so ``template`` is the
    absolute URL of the published diagnostics page with ``{version}`` for the controller's
    version; each rule's anchor (``#e1001``) is appended. None (and an unset
    :data:`DOCS_URL_ENV`, read at import) keeps the repository-relative ``DOCS_PAGE``: this
    project publishes no documentation site yet, and a link to one that does not exist
    would be worse than a path. Raises ValueError for anything but an absolute http(s) URL.
    """
    global _docs_url
    _docs_url = _docs_page(template)
    return _docs_url


def documentation_url(rule_id: str) -> str:
    """The documentation of ``rule_id``: its entry (the heading ``### E1001``) on the page."""
    return f"{_docs_url}#{rule_id.lower()}"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    title: str
    description: str
    fix: str

    @property
    def severity(self) -> Severity:
        return Severity.from_prefix(self.id)

    @property
    def documentation_url(self) -> str:
        return documentation_url(self.id)


class UnknownRuleError(KeyError):
    """Raised when code emits an id that the registry does not know (a programming error)."""


def _rules(*entries: tuple[str, str, str, str]) -> dict[str, Rule]:
    out: dict[str, Rule] = {}
    for rid, title, description, fix in entries:
        if rid in out:
            raise ValueError(f"duplicate rule id {rid}")
        Severity.from_prefix(rid)
        out[rid] = Rule(rid, title, description, fix)
    return out


# --- 0xxx internal / pipeline ---------------------------------------------------------------
_INTERNAL = _rules(
    (
        "F0001",
        "Internal error",
        "An unexpected error inside the controller stopped the analysis.",
        "Report this as a bug with the report attached; the candidate is treated as invalid, so nothing is deployed from it.",
    ),
    (
        "E0002",
        "Analysis incomplete",
        "A stage ran out of its time or cost budget, so the candidate could not be proven valid.",
        "Simplify the input or rule, or raise a timeout; the CEL loop cap is fixed. Never a pass.",
    ),
    (
        "I0003",
        "Stage skipped",
        "A stage did not run because an earlier stage failed.",
        "Fix the earlier failure first.",
    ),
    (
        "E0004",
        "Main configuration missing",
        "The candidate file set has no haproxy.cfg, so there is nothing HAProxy could load.",
        "Make sure the haproxyConfig output renders (check its `when` condition).",
    ),
    (
        "E0005",
        "Invalid validation options",
        "A rule filter or severity level in the validation options cannot be understood, "
        "so the pipeline refuses to run rather than filter the wrong findings.",
        "Use ids (E3001), ranges (E3000-E3099) or phases (phase:schema) as filters and "
        "error, warning or info as the severity level.",
    ),
    (
        "E0006",
        "Pipeline could not be built",
        "A validation stage could not be set up from spec.validation (binary, schema family, "
        "overlays, validators); no candidate can be validated until this is fixed.",
        "Fix the setting named in the message.",
    ),
)

# --- 1xxx render -----------------------------------------------------------------------------
_RENDER = _rules(
    (
        "E1001",
        "Template syntax error",
        "A template could not be parsed by Jinja2.",
        "Fix the template syntax at the reported line.",
    ),
    (
        "E1002",
        "Undefined value",
        "A template used a variable or attribute that does not exist.",
        "Check the name, or guard it with `is defined` / `default(...)`.",
    ),
    (
        "E1003",
        "Sandbox violation",
        "A template tried an operation the sandbox forbids "
        "(private attributes, mutation, unsafe calls).",
        "Use the documented context and filters.",
    ),
    (
        "E1004",
        "Template raised an error",
        "A filter, test or expression raised an exception while rendering.",
        "Check the values passed to the filter at the reported line.",
    ),
    (
        "E1005",
        "Render cycle",
        "Outputs reference each other through `outputs[...]` so no render order exists.",
        "Break the cycle: one side must not read the other's output.",
    ),
    (
        "E1006",
        "Unknown output referenced",
        "A template references `outputs[...]` with a name that is not defined.",
        "Use the name of a defined output (e.g. `haproxy.cfg`, a map name).",
    ),
    (
        "E1007",
        "Missing snippet",
        "A template includes or imports a snippet that is not defined.",
        "Define the snippet under templateSnippets or fix its name.",
    ),
    (
        "E1008",
        "Output skipped by a dependency",
        "An output was not rendered because an output it depends on failed.",
        "Fix the root cause reported for the dependency.",
    ),
    (
        "E1009",
        "Invalid `when` expression",
        "An output's `when` condition could not be evaluated.",
        "Use a Jinja2 expression that evaluates to true or false.",
    ),
    (
        "E1010",
        "Duplicate output name",
        "Two outputs (e.g. a map and a file) share a name, so `outputs[...]`, `path_for` "
        "and the source map could not tell them apart.",
        "Give every map, file and certificate a distinct name.",
    ),
    (
        "E1011",
        "Invalid output name",
        "An output name is used as a file name under maps/, files/ or certs/: it must start "
        "with a letter or digit and contain only letters, digits, '.', '_' and '-' "
        "(at most 253 characters).",
        "Use a plain file name such as hosts.map.",
    ),
    (
        "E1012",
        "Render budget exceeded",
        "A render ran longer than spec.render.timeout or produced more text than "
        "spec.render.maxOutputBytes, so it was stopped; the candidate is analysis incomplete, "
        "never a pass, and the last good configuration keeps serving.",
        "Look for loops over large or nested collections and for large repeated strings at "
        "the reported line; raise the budget only when the input really is that large.",
    ),
)

# --- 2xxx syntax + directive policy ----------------------------------------------------------
# 20xx: how HAProxy splits lines and blocks; 21xx: the directive policy; 22xx: file references.
_SYNTAX: dict[str, Rule] = _rules(
    (
        "E2001",
        "Unterminated quote",
        "A single or double quote is opened and never closed on its line; HAProxy has no "
        "line continuation, so the line is refused.",
        "Close the quote on the same line, or escape the quote character with a backslash.",
    ),
    (
        "E2002",
        "Invalid hexadecimal escape",
        "A backslash escape `\\x` is not followed by two hexadecimal digits.",
        "Write `\\xNN` with two hex digits, or `\\\\x` for a literal backslash.",
    ),
    (
        "E2003",
        "Invalid variable name",
        "Inside double quotes `$` starts a variable reference, and what follows is not a "
        "name (letter or `_`), or is an unknown pseudo-variable (only `.LINE`, `.FILE`, "
        "`.SECTION` exist).",
        "Escape the dollar as `\\$` inside double quotes, or use single quotes.",
    ),
    (
        "E2004",
        "Unmatched brace in variable reference",
        "A `${` inside double quotes has no closing `}` on the line.",
        "Close the reference with `}`, or escape the dollar as `\\$`.",
    ),
    (
        "E2005",
        "Invalid word expansion",
        "Only `[*]` may follow a variable name inside `${...}`.",
        "Write `${NAME[*]}` or remove the brackets.",
    ),
    (
        "E2006",
        "Too many words on a line",
        "HAProxy splits a line into at most 64 words; a 65th word (or blanks after the 64th) "
        "is refused.",
        "Split the directive into several lines (for example several `http-request` rules).",
    ),
    (
        "E2007",
        "NUL character",
        "The file contains a NUL byte; HAProxy stops reading the file there.",
        "Remove the NUL byte; it usually comes from binary data rendered into the config.",
    ),
    (
        "E2008",
        "Missing newline at end of file",
        "The last line does not end with a newline; HAProxy refuses the file as possibly "
        "truncated.",
        "End the file with a newline.",
    ),
    (
        "E2009",
        "Directive outside any section",
        "A directive appears before the first section header (`global`, `defaults`, "
        "`frontend`, ...).",
        "Move the directive into the section it belongs to.",
    ),
    (
        "E2010",
        "Invalid scope line",
        "A line starting with `[` must be `[name]` alone on its line, with a name made of "
        "letters, digits, `.`, `:`, `_` or `-`.",
        "Fix the scope name or remove the line.",
    ),
    (
        "E2011",
        "Unbalanced conditional block",
        "A `.elif`, `.else` or `.endif` has no matching `.if`, comes after `.else`, carries "
        "arguments, a `.if` is never closed, or blocks are nested 100 deep.",
        "Balance every `.if` with one `.endif`; put `.else` last.",
    ),
    (
        "E2012",
        "Invalid condition",
        "HAProxy cannot parse the condition of a `.if` or `.elif` (unknown predicate, missing "
        "parenthesis, wrong argument count, trailing characters) and aborts.",
        "Use the documented predicates, e.g. `.if defined(NAME)` or "
        "`.if version_atleast(2.8)`, joined with `&&`, `||` and `!`.",
    ),
    (
        "E2013",
        "`.alert` reached",
        "A `.alert` directive in an active block makes HAProxy refuse the configuration.",
        "Guard it with a condition that is false for this configuration, or remove it.",
    ),
    (
        "E2014",
        "Unknown dot directive",
        "A line starts with `.` but is not one of `.if`, `.elif`, `.else`, `.endif`, "
        "`.diag`, `.notice`, `.warning`, `.alert`.",
        "Fix the spelling; dot directives are case-sensitive.",
    ),
    (
        "E2015",
        "Message directive with several words",
        "`.diag`, `.notice`, `.warning` and `.alert` take exactly one word.",
        'Quote the message: `.warning "two words"`.',
    ),
    (
        "W2016",
        "`.warning` reached",
        "A `.warning` directive in an active block makes HAProxy emit a warning.",
        "Remove it or guard it when the warning no longer applies.",
    ),
    (
        "I2017",
        "`.notice` or `.diag` reached",
        "A `.notice` or `.diag` directive in an active block emits a message when HAProxy starts.",
        "Nothing to do unless the message is unexpected.",
    ),
    (
        "W2018",
        "Problem in an undecided conditional branch",
        "A line HAProxy would refuse sits in a `.if` branch whose condition depends on the "
        "machine running HAProxy (environment, build features); it breaks the configuration "
        "wherever the branch is taken.",
        "Fix the line, or make the condition decidable.",
    ),
    (
        "W2019",
        "Unknown allowDirectives name",
        "`validation.policy.allowDirectives` names something the directive policy does not "
        "know, so it allows nothing.",
        "Use one of the names listed in docs/policy.md (for example `lua-load` or "
        "`env-expansion`).",
    ),
    (
        "I2020",
        "Condition decided only at run time",
        "The condition of a `.if`/`.elif` depends on the environment, build or TLS library of "
        "the machine running HAProxy; the lines it guards are checked as possibly active.",
        "Nothing to do; prefer template logic when the answer is known at render time.",
    ),
    (
        "E2101",
        "Lua code loading denied",
        "`lua-load`, `lua-load-per-thread` and `lua-prepend-path` make HAProxy run Lua code "
        "while it parses the configuration, including during validation.",
        "Remove the directive, or list it in `validation.policy.allowDirectives` if the "
        "script is trusted and shipped in the file set.",
    ),
    (
        "E2102",
        "Native module loading denied",
        "`ssl-engine`, `ssl-provider` and `ssl-provider-path` load native code into HAProxy "
        "at parse time.",
        "Remove the directive, or allow it explicitly in `validation.policy.allowDirectives`.",
    ),
    (
        "E2103",
        "Command execution denied",
        "`ssl-passphrase-cmd`, `program` sections, `external-check`, `insecure-fork-wanted` "
        "and `insecure-setuid-wanted` let HAProxy start other programs.",
        "Remove the directive, or allow it explicitly in `validation.policy.allowDirectives`.",
    ),
    (
        "E2104",
        "File creation denied",
        "`backing-file` in a `ring` section makes HAProxy create and map a file at the given path.",
        "Remove the directive, or allow `backing-file` in `validation.policy.allowDirectives`.",
    ),
    (
        "E2105",
        "Environment modification denied",
        "`setenv`, `presetenv`, `resetenv` and `unsetenv` change the environment HAProxy "
        "later expands into the configuration.",
        "Render the value into the configuration instead, or allow the directive explicitly.",
    ),
    (
        "E2106",
        "Environment variable expansion denied",
        "A double-quoted word expands `$NAME` or `${NAME}` from the environment of the "
        "HAProxy process, which validation cannot see and which may hold secrets.",
        "Render the value with the template instead, write `\\$` for a literal dollar, or "
        "allow `env-expansion` in `validation.policy.allowDirectives`.",
    ),
    (
        "E2107",
        "Experimental directives denied",
        "`expose-experimental-directives` unlocks directives HAProxy itself marks as unsafe.",
        "Remove it, or allow it explicitly in `validation.policy.allowDirectives`.",
    ),
    (
        "E2201",
        "Absolute file path",
        "A directive references a file by absolute path; only files of the file set, "
        "relative to the deploy directory, may be referenced.",
        "Ship the file as a map, certificate or general file and reference it relative to "
        "the deploy directory (for example `maps/hosts.map`).",
    ),
    (
        "E2202",
        "Path escapes the deploy directory",
        "A file reference (or a base directory such as `crt-base`, or `default-path`) "
        "contains `..` or otherwise points outside the deploy directory.",
        "Reference files inside the deploy directory without `..`.",
    ),
    (
        "E2203",
        "Referenced file not in the file set",
        "A directive references a file that the file set does not contain.",
        "Add the file to the rendered outputs (maps, certificates, files) or fix the path.",
    ),
    (
        "E2204",
        "File path not verifiable",
        "A file reference contains an environment variable, so the file it names is known "
        "only when HAProxy runs.",
        "Render the path with the template instead of expanding a variable.",
    ),
)

# --- 3xxx schema -----------------------------------------------------------------------------
_SCHEMA: dict[str, Rule] = _rules(
    (
        "E3001",
        "Unknown keyword",
        "No longer reported: a keyword the schema does not know is the warning W3015, because "
        "the schema cannot prove a keyword absent from every build and patch release.",
        "Filter on W3015 instead.",
    ),
    (
        "E3002",
        "Keyword not allowed in this section",
        "HAProxy refuses this keyword in this kind of section (for example 'server' in a "
        "frontend, 'bind' in defaults, or 'acl' in an anonymous defaults section).",
        "Move the directive to a section that accepts it, or name the defaults section.",
    ),
    (
        "W3003",
        "Keyword ignored in this section",
        "HAProxy accepts the keyword here but ignores it because the section lacks the "
        "frontend or backend capability it needs.",
        "Move the directive to a section where it takes effect, or remove it.",
    ),
    (
        "E3004",
        "Invalid argument value",
        "An argument or option value has the wrong type, is out of range, or is not one of "
        "the accepted values for this HAProxy version.",
        "Use a value of the documented form (times like 5s or 250ms, integers within range, "
        "one of the listed words).",
    ),
    (
        "E3005",
        "Wrong number of arguments",
        "A required argument is missing, an option lacks its value, a 'no'/'default' prefix "
        "is used where HAProxy does not support it, or unexpected words follow the directive.",
        "Compare the directive with its documented form in the HAProxy manual.",
    ),
    (
        "E3006",
        "Unknown option or sub-keyword",
        "No longer reported: an option, action or sub-keyword the schema does not know is the "
        "warning W3016, for the same reason as W3015.",
        "Filter on W3016 instead.",
    ),
    (
        "E3007",
        "Removed keyword",
        "The keyword or option was removed from HAProxy; this version rejects it.",
        "Replace it with the suggested successor.",
    ),
    (
        "W3008",
        "Deprecated keyword",
        "The keyword, option or section is deprecated: it still works in this version but "
        "will be removed.",
        "Migrate to the suggested successor before upgrading HAProxy.",
    ),
    (
        "E3009",
        "Section not available in this version",
        "The section kind exists only in other HAProxy versions than the one validated.",
        "Upgrade HAProxy or remove the section.",
    ),
    (
        "W3010",
        "No schema for this HAProxy version",
        "No bundled schema matches this HAProxy version exactly; the nearest older family "
        "is used, so newer keywords may be reported as unknown.",
        "Use a supported HAProxy version, or treat unknown-keyword findings with care.",
    ),
    (
        "E3011",
        "Unsupported HAProxy version",
        "The HAProxy version is older than the oldest bundled schema family (2.6).",
        "Upgrade HAProxy to 2.6 or newer.",
    ),
    (
        "E3012",
        "Invalid schema overlay",
        "A validation.schemaOverlays entry is malformed (not a valid JSON Schema), "
        "contradictory (no value could satisfy it) or unenforceable (it targets a section "
        "or keyword that does not exist, or uses a keyword the validator cannot enforce).",
        "Fix the overlay at the reported JSON pointer; see docs/schema.md for the addressing.",
    ),
    (
        "E3013",
        "Schema overlay constraint violated",
        "The value satisfies HAProxy but not a constraint added by validation.schemaOverlays.",
        "Change the value, or the overlay if the constraint is wrong.",
    ),
    (
        "I3014",
        "Section not described by the schema",
        "The section kind is not described by the bundled schemas; its directives are not "
        "checked by this stage (haproxy -c still checks them).",
        "Nothing to do; this is informational.",
    ),
    (
        "W3015",
        "Keyword not known to the schema",
        "The schema does not describe this keyword in this section for this HAProxy version. "
        "It may be a typo, a keyword of another section or version, or one that only some "
        "builds or patch releases have (QUIC, 51Degrees, DeviceAtlas, WURFL, Lua, backports), "
        "so the schema does not refuse it: haproxy -c, which always runs next, decides.",
        "Check the spelling (see the suggestion); if haproxy -c accepts the line, nothing to do.",
    ),
    (
        "W3016",
        "Option or sub-keyword not known to the schema",
        "A bind/server/cookie option, an 'option' name, a rule action or a sub-keyword "
        "(timeout name, stats parameter, ...) that the schema does not describe. The rest of "
        "the line is not checked, since the schema does not know how many words it takes; "
        "haproxy -c decides.",
        "Check the spelling (see the suggestion); if haproxy -c accepts the line, nothing to do.",
    ),
    (
        "W3017",
        "Argument HAProxy may misread",
        "The argument does not have the documented form, but the HAProxy parser of this "
        "keyword is known to load such lines anyway: numbers are read up to the first "
        "non-digit (or wrap when too large), surplus words and empty conditions are ignored, "
        "a missing option value reads as empty. The configuration loads with a value other "
        "than the one written, or with words that have no effect.",
        "Write the value in its documented form (see the message), or remove the extra words.",
    ),
)

# --- 4xxx haproxy -c -------------------------------------------------------------------------
_HAPROXY: dict[str, Rule] = _rules(
    (
        "E4001",
        "HAProxy parse error",
        "`haproxy -c` rejected a line while parsing the configuration.",
        "Fix the directive at the reported line; the message is HAProxy's own.",
    ),
    (
        "E4002",
        "HAProxy configuration error",
        "`haproxy -c` parsed the configuration but a later consistency check failed "
        "(missing backend, incompatible modes, duplicate names, unresolvable server, ...).",
        "Fix the object named in the message; the location points at its definition.",
    ),
    (
        "W4003",
        "HAProxy warning",
        "`haproxy -c` accepted the configuration but warned about it.",
        "Read the warning: it usually marks a setting that does not do what it seems to.",
    ),
    (
        "I4004",
        "HAProxy notice",
        "An informational message printed by `haproxy -c`.",
        "Nothing to fix unless the notice surprises you.",
    ),
    (
        "I4005",
        "HAProxy rejected the configuration",
        "No longer reported: HAProxy's closing summary of a failed check ('Error(s) found in "
        "configuration file', 'Fatal errors found in configuration') is not a finding of its "
        "own; the errors it sums up are.",
        "Fix the errors reported.",
    ),
    (
        "I4006",
        "HAProxy diagnostic",
        "A finding of HAProxy's diagnostic mode (`-dD`): legal but suspicious configuration.",
        "Review the construct named in the message.",
    ),
    (
        "E4007",
        "haproxy -c failed without an explanation",
        "`haproxy -c` exited with a failure status (or was killed) but printed no error the "
        "controller could read. The exit status is authoritative, so the candidate fails.",
        "Run `haproxy -c` on the rendered files by hand (`htc render`) to see its output.",
    ),
    (
        "I4008",
        "Other haproxy output",
        "Lines printed during the check that are not HAProxy messages (for example Lua "
        "`print` output).",
        "Nothing to fix unless the text is an error of your own code.",
    ),
    (
        "E4009",
        "Configuration would not start",
        "The configuration has no listener (no frontend with a bind line), so HAProxy would "
        "refuse to start with it.",
        "Add a frontend with a bind line, or check that the template rendered the frontends.",
    ),
    (
        "W4010",
        "HAProxy alert on a passing check",
        "`haproxy -c` printed an alert but exited successfully; the exit status decides, so "
        "the alert is reported as a warning.",
        "Read the alert; it may still mark a real problem at run time.",
    ),
    (
        "E4011",
        "haproxy binary unavailable",
        "The haproxy binary used for `haproxy -c` is missing, not executable or not haproxy.",
        "Install haproxy or set spec.validation.haproxyBinary (or `--haproxy`) to a working one.",
    ),
    (
        "E4012",
        "Sandbox could not start",
        "The sandbox for `haproxy -c` could not be prepared or the check could not be started "
        "(temporary directory, file set path, process limits).",
        "Check free space and permissions of the temporary directory; report a bug otherwise.",
    ),
    (
        "I4013",
        "Sandbox isolation is partial",
        "Neither Landlock nor a private mount namespace is available, so the checked program "
        "could read files the controller can read. Directive policy, empty environment, "
        "limits and timeout still apply.",
        "Run the controller on a kernel with Landlock enabled (5.13+) or with CAP_SYS_ADMIN.",
    ),
    (
        "I4014",
        "Message caused by the sandbox",
        "`haproxy -c` warned about something that fails only because the check runs in the "
        "sandbox, which has no network (for example, a `resolvers` nameserver socket that "
        "cannot be connected). It says nothing about the configuration where HAProxy runs, "
        "so it is not a warning and does not fail `--strict`.",
        "Nothing to fix; make sure the address is reachable where HAProxy runs.",
    ),
)

# --- 5xxx CEL rules --------------------------------------------------------------------------
_CEL: dict[str, Rule] = _rules(
    (
        "E5001",
        "CEL expression does not compile",
        "A `validate` expression, messageExpression or `when` has a syntax error, uses an "
        "undeclared variable or function, or combines values of incompatible types.",
        "Fix the expression; the variables are self, outputs, resources and extraContext "
        "(docs/rules.md).",
    ),
    (
        "E5002",
        "Rule references an unknown output or collection",
        "A rule names `outputs['x']` or `resources.x` with a name the spec does not define, so "
        "it could never see a value there.",
        "Use the name of a defined output (haproxy.cfg, a map, file or certificate name) or of "
        "a watchedResources collection.",
    ),
    (
        "E5003",
        "Validation rule failed",
        "A `validate` rule with severity error evaluated to false.",
        "Fix the template or the objects so the rule holds, or correct the rule.",
    ),
    (
        "W5004",
        "Validation rule failed (warning)",
        "A `validate` rule with severity warning evaluated to false; validation still passes.",
        "Fix the template or the objects so the rule holds, or correct the rule.",
    ),
    (
        "E5005",
        "Rule references an output that produced no value",
        "A deferred rule reads an output that was skipped by its `when` or failed to render. "
        "Rules are fail-closed: a rule that cannot see what it checks fails.",
        "Attach the rule to the optional output itself (rules of a skipped output are skipped), "
        "or make sure the referenced output renders.",
    ),
    (
        "W5006",
        "Warning rule references an output that produced no value",
        "A deferred rule with severity warning reads an output that was skipped or failed to "
        "render, so it could not be checked.",
        "Attach the rule to the optional output itself, or make sure the output renders.",
    ),
    (
        "E5007",
        "Rule could not be evaluated",
        "Evaluating a rule with severity error raised an error (missing key, index out of "
        "range, division by zero) or returned a value of the wrong type. Rules are "
        "fail-closed, so this counts as a failure.",
        "Guard optional fields with has(...) or the optional syntax (self.?field), and make "
        "the expression return a bool (messageExpression: a string).",
    ),
    (
        "W5008",
        "Warning rule could not be evaluated",
        "Evaluating a rule with severity warning raised an error or returned a value of the "
        "wrong type.",
        "Guard optional fields with has(...) or self.?field, and return a bool.",
    ),
    (
        "E5009",
        "Rule expression has the wrong type",
        "The type checker proved that an expression or `when` is not a bool, or that a "
        "messageExpression is not a string.",
        "Make expressions and conditions return bool and messageExpression return string.",
    ),
    (
        "I5010",
        "Deferred rules reference each other",
        "Deferred rules of two or more owners read each other's values. This is allowed (it "
        "is not a render cycle); they are evaluated in name order and a failure of one does "
        "not suppress the others in the cycle that were evaluated before it.",
        "Nothing to fix; break the mutual reference if the evaluation order matters to you.",
    ),
    (
        "I5011",
        "Cascading rule failures suppressed",
        "Deferred rules that read an owner whose own rules already failed were not evaluated, "
        "so the root cause is reported once.",
        "Fix the root cause named in the message; the suppressed rules run again afterwards.",
    ),
)

# --- 6xxx external validators ----------------------------------------------------------------
_EXTERNAL: dict[str, Rule] = _rules(
    (
        "E6001",
        "External validator rejected the file set",
        "An external validator judged the candidate invalid (exit status 1, or an HTTP 4xx "
        "answer) without reporting a more specific finding.",
        "See the validator's own documentation; its name is in the message.",
    ),
    (
        "E6002",
        "External validator error",
        "An error reported by an external validator; its own rule id, if any, is in the message.",
        "Fix what the validator names; the location points at the rendered file.",
    ),
    (
        "W6003",
        "External validator warning",
        "A warning reported by an external validator.",
        "Review what the validator names.",
    ),
    (
        "I6004",
        "External validator note",
        "An informational finding reported by an external validator.",
        "Nothing to fix unless the note surprises you.",
    ),
    (
        "E6005",
        "External validator failed to run",
        "The validator could not be started, crashed, exited with a status other than 0 or 1, "
        "or (HTTP) could not be reached or answered with a server error.",
        "Fix the validator or its configuration; set failurePolicy: ignore to tolerate outages.",
    ),
    (
        "E6006",
        "External validator timed out",
        "The validator did not answer within its timeout; the candidate is not accepted.",
        "Raise the validator's timeout or make it faster.",
    ),
    (
        "E6007",
        "Unreadable validator output",
        "The validator's output is not the documented JSON diagnostics document.",
        'Print nothing or {"diagnostics": [...]} as documented in docs/security.md.',
    ),
    (
        "W6008",
        "External validator failure ignored",
        "A validator failed to run, timed out or returned garbage, and its failurePolicy is "
        "ignore, so the failure is reported but does not block the candidate.",
        "Fix the validator; with failurePolicy ignore an outage lets candidates through.",
    ),
    (
        "I6009",
        "External validator findings dropped",
        "A validator reported more findings than the contract reads (1000); the rest were "
        "neither read nor shown. Its exit status or HTTP status still decides the verdict.",
        "Make the validator report fewer, more general findings.",
    ),
)

# --- 7xxx deploy / runtime -------------------------------------------------------------------
_DEPLOY: dict[str, Rule] = _rules(
    (
        "E7001",
        "Reload failed",
        "HAProxy refused the validated file set when reloading (typically a runtime condition "
        "`haproxy -c` cannot see, such as an address already in use); the previous file set "
        "was restored and reloaded.",
        "Read HAProxy's messages in this report, fix the cause (free the port, fix the "
        "environment) and the next change or resync deploys again.",
    ),
    (
        "E7002",
        "HAProxy alert",
        "One alert HAProxy printed while loading the configuration during a reload or start.",
        "Fix the line named in the alert.",
    ),
    (
        "F7003",
        "Rollback failed",
        "After a failed reload the previous file set could not be restored or HAProxy did not "
        "accept it again; HAProxy may be running without a confirmed configuration.",
        "Check the HAProxy process and the deploy directory; the next valid change is "
        "deployed as usual.",
    ),
    (
        "E7004",
        "Master CLI unreachable",
        "The HAProxy master CLI socket did not answer, so the reload could not be requested "
        "or confirmed.",
        "Check that HAProxy runs in master-worker mode with `-S <socket>` and that the "
        "socket path is right.",
    ),
    (
        "E7005",
        "Reload not confirmed",
        "HAProxy did not report the outcome of the reload in time.",
        "Check HAProxy's logs; a very large configuration may need a longer reload timeout.",
    ),
    (
        "E7006",
        "Deploy directory not writable",
        "The validated files could not be written to the deploy directory.",
        "Check the directory's permissions and free space.",
    ),
    (
        "W7007",
        "Deployed files drifted",
        "The files in the deploy directory no longer matched the last validated set (edited "
        "or removed outside the controller); the validated set was written back and reloaded.",
        "Do not edit deployed files by hand; change the templates or resources instead.",
    ),
    (
        "E7008",
        "HAProxy did not start",
        "The supervised HAProxy exited or failed to report a worker while starting.",
        "Read HAProxy's messages in this report; the binary, the socket path or the "
        "configuration's runtime resources (ports, files) are the usual causes.",
    ),
    (
        "W7009",
        "HAProxy restarted",
        "The supervised HAProxy master exited unexpectedly (for example because its worker "
        "died) and was started again with the deployed configuration.",
        "Look for the reason in HAProxy's log (crash, OOM kill, signal).",
    ),
    (
        "E7010",
        "Configuration change rejected",
        "A changed HAProxyTemplateConfig did not parse, lint, render or validate, so the "
        "running configuration stays in place.",
        "Fix the findings listed with this report and save the configuration again.",
    ),
    (
        "E7011",
        "Verdict cannot vouch for a deploy",
        "The pipeline that judged the candidate did not include the syntax stage and the "
        "sandboxed `haproxy -c`, so a valid verdict from it does not make the file set safe "
        "to deploy.",
        "Build the pipeline with `Pipeline.from_spec` (or `from_settings`); only tests may "
        "construct a partial one, with `allow_partial=True`.",
    ),
    (
        "F7012",
        "Validated set altered",
        "The file set handed to a deploy target no longer hashes to the checksum its verdict "
        "was given for, so it was not deployed: something changed the bytes after validation.",
        "Report this as a bug; nothing outside the pipeline may build or alter a validated "
        "file set.",
    ),
    (
        "E7013",
        "Dataplane API request failed",
        "A HAProxy Data Plane API did not answer, refused a request, or reported a reload as "
        "failed or unfinished, so the file set could not be deployed to that HAProxy.",
        "Check that the pod's dataplaneapi runs and is reachable on its port, the credentials "
        "and CA bundle, and the message quoted here; the set is tried again.",
    ),
    (
        "F7014",
        "Dataplane API altered the configuration",
        "The Data Plane API stores a configuration by parsing and re-writing it; what it "
        "stored differs from the validated bytes in more than layout (a line changed, went "
        "missing or was added), so it was withdrawn before any reload.",
        "Report the lines named here; until the API keeps them, use the master-socket "
        "topology for this configuration.",
    ),
    (
        "W7015",
        "HTTP source not fetched",
        "An httpSources entry could not be fetched (unreachable, timed out, an HTTP error, or "
        "larger than its maxBytes). Templates keep reading its accepted content, or empty "
        "content when none was ever accepted.",
        "Check the source's url, timeout, maxBytes and credentials, and the message quoted "
        "here; the fetch is tried again at every refreshInterval.",
    ),
    (
        "E7016",
        "Critical HTTP source not fetched",
        "A critical httpSources entry has no accepted content yet, so nothing is rendered or "
        "deployed: the first render waits for its first successful fetch.",
        "Make the source reachable (the message quotes the last error), or set critical: "
        "false to render without it; the fetch is retried until it succeeds.",
    ),
)

# --- 8xxx spec, lint, input files ------------------------------------------------------------
_SPEC: dict[str, Rule] = _rules(
    (
        "E8001",
        "Invalid HAProxyTemplateConfig",
        "The configuration resource does not match its schema.",
        "Fix the field named in the message; docs/api.md (generated from the same models) "
        "documents every field, its type and its allowed values.",
    ),
    (
        "E8002",
        "Unreadable input file",
        "An input manifest could not be read or parsed as YAML.",
        "Fix the YAML at the reported line.",
    ),
    (
        "E8003",
        "Invalid resource manifest",
        "A manifest lacks apiVersion, kind or metadata.name.",
        "Every object needs apiVersion, kind and metadata.name.",
    ),
    (
        "E8004",
        "No single HAProxyTemplateConfig",
        "The configuration file holds no HAProxyTemplateConfig document, or more than one.",
        "Keep exactly one document with kind: HAProxyTemplateConfig in the file.",
    ),
    (
        "E8005",
        "HTTP source content missing",
        "A render from files fetches nothing: every httpSources entry needs its content from "
        "a file (`--http NAME=FILE`), and every such option must name a declared entry.",
        "Give each declared source as --http NAME=FILE, e.g. --http blocklist=list.txt.",
    ),
)


# --- 8010-8049 resource store, manifests, directory input -----------------------------------
_STORE = _rules(
    (
        "E8010",
        "Invalid field path",
        "An indexBy or ignoreFields entry is not a field path the store understands, or an "
        "ignoreFields entry would remove a field objects are keyed by (metadata.name, "
        "metadata.namespace or an indexBy path).",
        "Use dotted names with bracketed quoted keys for keys that contain dots, e.g. "
        "metadata.labels['kubernetes.io/service-name'].",
    ),
    (
        "W8011",
        "Index field missing",
        "A stored object lacks a field named in its collection's indexBy (or the field is not "
        "a string, number or boolean); it is stored under an empty key for that field.",
        "Add the field to the object, or index the collection by fields every object has.",
    ),
    (
        "E8012",
        "Invalid selector",
        "A labelSelector, namespaceSelector or fieldSelector of a watched collection cannot be "
        "evaluated (unknown operator, missing or superfluous values, unparsable field term).",
        "Write the selector as the Kubernetes API expects it, e.g. metadata.name!=default.",
    ),
    (
        "W8013",
        "Duplicate object",
        "The same object (collection, namespace and name) is defined more than once in the "
        "input files; the first definition in file order is used.",
        "Keep one definition per object.",
    ),
    (
        "I8014",
        "Object not watched",
        "A manifest matches no watched collection (apiVersion, kind and selectors), so no "
        "template can see it.",
        "Add a watchedResources entry for its kind, or fix its apiVersion, kind or labels.",
    ),
    (
        "E8015",
        "No single HAProxyTemplateConfig in the directory",
        "The watched directory holds no HAProxyTemplateConfig document, or more than one; the "
        "previously accepted configuration (if any) stays in effect.",
        "Keep exactly one document with kind: HAProxyTemplateConfig in the directory.",
    ),
)


# --- 8050-8099 lint and embedded tests ------------------------------------------------------
_LINT = _rules(
    (
        "W8050",
        "Unused snippet",
        "A templateSnippets entry is not included or imported by any output, directly or "
        "through other snippets.",
        "Remove the snippet or include it where it was meant to be used.",
    ),
    (
        "W8051",
        "Policy-denied directive in a template",
        "A template's literal text (Jinja tags taken out) starts a line with a directive the "
        "directive policy denies (lua-load, ssl-engine, program, setenv, ...) or expands an "
        "environment variable in double quotes; the syntax stage will reject the rendered "
        "output unless validation.policy.allowDirectives allows it.",
        "Remove the directive, or allow it explicitly if it is trusted.",
    ),
    (
        "I8052",
        "Deferred validation is not fail-fast (deferred-validation-not-fail-fast)",
        "An owner has rules that read other outputs, resources or extraContext. They run only "
        "after every output rendered and haproxy -c passed, so a failure does not stop "
        "dependent outputs from rendering.",
        "Nothing to fix; rewrite a rule to read only `self` if it should fail fast.",
    ),
    (
        "I8053",
        "Output reference resolved conservatively",
        "A template reads `outputs` with a computed name (or passes `outputs` around), so the "
        "render graph assumes it depends on every other output.",
        "Use a constant name, e.g. outputs['hosts.map'], to get a precise render order.",
    ),
    (
        "W8054",
        "Condition is constant",
        "A `when` condition is a literal true or false, so it never decides anything.",
        "Remove the condition, or remove the output or rule it always disables.",
    ),
    (
        "W8055",
        "Embedded test names an unknown collection",
        "A test's fixtures name a collection that spec.watchedResources does not define, so "
        "no template could see those objects.",
        "Use a collection name from watchedResources.",
    ),
    (
        "W8056",
        "Embedded test targets an unknown output",
        "An assertion's target is not the name of an output (haproxy.cfg or a map, file or "
        "certificate name).",
        "Set target to a defined output name.",
    ),
    (
        "W8057",
        "Malformed test assertion",
        "An assertion lacks what its type needs (value, count, patterns) or carries an "
        "invalid regular expression.",
        "See docs/testing.md for the fields each assertion type uses.",
    ),
    (
        "W8058",
        "`when` on the main configuration",
        "haproxyConfig has a `when` condition; when it is false there is no haproxy.cfg and "
        "every candidate fails (E0004).",
        "Remove the condition; skip optional parts inside the template instead.",
    ),
    (
        "W8059",
        "Undefined name in a template",
        "A template reads a name that is neither in the render context (resources, http, "
        "extraContext, outputs, path_for and the template functions) nor declared by a loop, "
        "`set`, macro or import — in the template itself or, for a snippet, in a template "
        "that includes it. It renders as undefined, which fails the render or writes nothing.",
        "Check the spelling, or declare the name; guard an optional one with `is defined` or "
        "`default(...)`.",
    ),
    (
        "E8060",
        "Embedded test assertion failed",
        "An assertion of an embedded test (spec.tests) did not hold.",
        "Read the assertion's message and diff; fix the template or the expectation.",
    ),
    (
        "E8061",
        "Embedded test could not run",
        "A test's fixtures could not be loaded into a store (missing name, invalid selector "
        "data) or the pipeline could not be built.",
        "Fix the fixture named in the message.",
    ),
)


def _merge(*tables: dict[str, Rule]) -> dict[str, Rule]:
    merged: dict[str, Rule] = {}
    for table in tables:
        clash = merged.keys() & table.keys()
        if clash:
            raise ValueError(f"rule ids registered twice: {sorted(clash)}")
        merged.update(table)
    return merged


RULES: dict[str, Rule] = _merge(
    _INTERNAL, _RENDER, _SYNTAX, _SCHEMA, _HAPROXY, _CEL, _EXTERNAL, _DEPLOY, _SPEC, _STORE, _LINT
)


def rule(rule_id: str) -> Rule:
    try:
        return RULES[rule_id]
    except KeyError:
        raise UnknownRuleError(f"rule id {rule_id} is not registered") from None


def _no_dangling_colon(message: str) -> str:
    """``could not connect: `` with an empty reason (``str(TimeoutError())`` is ``""``) reads
    as if something was cut off; the message ends where its text does."""
    text = message.rstrip()
    while text.endswith(":") and not text.endswith("::"):
        text = text[:-1].rstrip()
    return text or message


def make(rule_id: RuleId, phase: Phase, message: str, **fields: Any) -> Diagnostic:
    """Build a diagnostic for a registered rule; severity and links come from the registry.

    ``fields`` are the optional Diagnostic fields (location, template_location, object,
    suggested_fix). The rule's fix hint is used when no specific fix is given.
    """
    r = rule(rule_id)
    fields.setdefault("suggested_fix", r.fix)
    return Diagnostic(
        rule_id=r.id,
        severity=r.severity,
        phase=phase,
        message=_no_dangling_colon(message),
        documentation_url=r.documentation_url,
        **fields,
    )
