"""Stage ``haproxy``: the real ``haproxy -c`` on the complete file set, in the sandbox.

Our own parser and schemas catch most mistakes early and with better messages, but only
HAProxy itself knows every keyword, every argument and every cross-reference rule of the
version that will run the file set, so its verdict is final: a non-zero exit fails the
candidate even when no line of its output could be read, and a check that does not finish is
an incomplete analysis, never a pass.

Flags: ``-c`` without ``-q`` (``-q`` silences the very messages we map), ``-C <dir>`` so
relative paths resolve against the deploy layout, and ``-dr`` (on by default) because the
sandbox has no network: server names cannot resolve there, and without it every hostname
would fail the check although it may well resolve where HAProxy runs. ``-dD`` (diagnostic
mode) is optional. A fixed prelude file comes first where it is known not to change the
verdict (:mod:`.prelude`: it spares HAProxy loading the system CA store for its HTTP client).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping

from controller.diagnostics import Diagnostic, Location, Phase, RuleId, make
from controller.render import MAIN_CONFIG, FileSet, SourceMap
from controller.validation.haproxy.binary import HaproxyBinary
from controller.validation.haproxy.locate import locate
from controller.validation.haproxy.messages import Level, Message, parse_output
from controller.validation.haproxy.prelude import (
    PRELUDE,
    PRELUDE_ID,
    PRELUDE_NAME,
    applies,
    usable,
)
from controller.validation.haproxy.sandboxed import sandbox_note
from controller.validation.redact import Redactor
from controller.validation.report import BudgetExhaustion
from controller.validation.sandbox import (
    SANDBOX_DIR,
    SandboxError,
    SandboxPolicy,
    SandboxResult,
    isolation_for,
    run_sandboxed,
)
from controller.validation.stage import Stage, StageContext, StageOutcome

__all__ = ["HaproxyStage", "interpret"]

_NOISE = ("haproxy version is ", "path to executable is ")
_SUMMARY = (
    "Fatal errors found in configuration",
    "Error(s) found in configuration file",
    "too many fatal errors",  # "(50), stopping now.": the 50 are findings already
)
_DROPPED_OUTPUT = ("Configuration file is valid", "Warnings were found.")
_NO_LISTENER = "will not start (no listener)"
_OUT_OF_MEMORY = ("out of memory", "failed to map segment", "(null)")
"""Signs of the address-space limit: HAProxy's own message, the loader failing to map a
library, and the ``(null)`` HAProxy prints when it cannot even allocate a message."""
_MAX_OTHER_LINES = 20
_MAX_TEXT = 2000


class HaproxyStage(Stage):
    phase = Phase.HAPROXY

    def __init__(
        self,
        binary: HaproxyBinary,
        timeout: float,
        *,
        policy: SandboxPolicy | None = None,
        ignore_resolution_failures: bool = True,
        diagnostic_mode: bool = False,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.binary = binary
        self.timeout = timeout
        # haproxy -c never counts on dying of a signal it raises itself, so it may be the
        # init of a PID namespace of its own: no sweep of the host's processes after a check.
        # Its heap may take huge pages when checks come in a series (sandbox/hugepages.py).
        self.policy = policy or SandboxPolicy(pid_namespace=True, huge_pages=True)
        self.flags: tuple[str, ...] = tuple(
            (["-dr"] if ignore_resolution_failures else []) + (["-dD"] if diagnostic_mode else [])
        )
        self._prelude = usable(binary, self.flags)
        """Whether this binary checks the same with the prelude: a property of the binary,
        probed once per binary and flags as its version is (here, not on a candidate's first
        check, where a cancelled check could not stop the probe's processes)."""

    def fingerprint(self) -> str:
        return (
            f"haproxy={self.binary.fingerprint()};timeout={self.timeout:g};"
            f"flags={' '.join(self.flags)};sandbox={self.policy.fingerprint()};"
            f"prelude={PRELUDE_ID}"
        )

    def warm_up(self) -> None:
        """Probe the sandbox's isolation now: the probe spawns trial processes, which the
        first candidate would otherwise wait for."""
        isolation_for(self.policy)

    def invocation(self, files: FileSet) -> tuple[list[str], Mapping[str, bytes]]:
        """The argv and the extra files of the check of ``files``."""
        argv = [self.binary.path, "-c", "-C", SANDBOX_DIR]
        if self._prelude and applies(files):
            return [*argv, "-f", PRELUDE_NAME, "-f", MAIN_CONFIG, *self.flags], {
                PRELUDE_NAME: PRELUDE
            }
        return [*argv, "-f", MAIN_CONFIG, *self.flags], {}

    async def run(self, ctx: StageContext) -> StageOutcome:
        argv, extra = self.invocation(ctx.files)
        try:
            result = await run_sandboxed(
                argv, ctx.files, timeout=self.timeout, policy=self.policy, extra_files=extra
            )
        except SandboxError as exc:
            return StageOutcome([make("E4012", Phase.HAPROXY, str(exc))])
        diagnostics = interpret(
            result, _Lazy(result.workdir_name, ctx.files), ctx.render.source_map, _config(ctx)
        )
        if not isolation_for(self.policy).confined_filesystem:
            diagnostics.append(
                make(
                    "I4013",
                    Phase.HAPROXY,
                    f"haproxy -c ran with partial isolation ({result.isolation.describe()})",
                )
            )
        timings = {"haproxyProcessMs": result.elapsed_ms}
        budget = _budget(result, self.policy, self.timeout)
        if budget is not None:
            if budget.budget == "addressSpace":
                what, limit = "ran out of its memory limit of", f"{budget.limit / 2**20:g} MiB"
            elif budget.budget == "cpuTime":
                what, limit = "used up its CPU limit of", f"{budget.limit:g} s"
            else:
                what, limit = "did not finish within", f"{budget.limit:g} s"
            diagnostics.insert(
                0,
                make(
                    "E0002",
                    Phase.HAPROXY,
                    f"haproxy -c {what} {limit}; the configuration could not be proven valid",
                    location=Location(file=MAIN_CONFIG),
                ),
            )
        return StageOutcome(diagnostics, budget=budget, extra_timings=timings)


def _budget(
    result: SandboxResult, policy: SandboxPolicy, timeout: float
) -> BudgetExhaustion | None:
    if result.timed_out:
        return BudgetExhaustion(
            phase=Phase.HAPROXY,
            budget="timeout",
            limit=timeout,
            used=round(result.elapsed_ms / 1000.0, 3),
        )
    if result.signal == signal.SIGXCPU:
        return BudgetExhaustion(
            phase=Phase.HAPROXY, budget="cpuTime", limit=float(policy.limits.cpu_for(timeout))
        )
    text = (result.stderr + result.stdout).lower()
    if result.returncode != 0 and any(sign in text for sign in _OUT_OF_MEMORY):
        # Too big for the address-space limit says nothing about validity either way.
        return BudgetExhaustion(
            phase=Phase.HAPROXY, budget="addressSpace", limit=float(policy.limits.address_space)
        )
    return None


class _Lazy:
    """A :class:`Redactor` built on first use. Building one decodes every file of the set
    and scans the main configuration for credentials (6-8 ms at 10,000 Ingresses, on the
    verdict's critical path after ``haproxy -c`` exits); a passing check usually prints
    nothing that needs it."""

    __slots__ = ("_args", "_redactor")

    def __init__(self, workdir: str | None, files: FileSet) -> None:
        self._args = (workdir, files)
        self._redactor: Redactor | None = None

    def __call__(self, text: str) -> str:
        if self._redactor is None:
            self._redactor = Redactor(*self._args)
        return self._redactor(text)


def _config(ctx: StageContext) -> Callable[[], str]:
    """The main configuration as text, decoded (3 MB at 10,000 Ingresses) only if a message
    needs its lines."""
    main = ctx.files.get(MAIN_CONFIG)
    return lambda: main.content.decode("utf-8", "replace") if main else ""


def interpret(
    result: SandboxResult,
    redact: Callable[[str], str],
    source_map: SourceMap | None = None,
    config: str | Callable[[], str] = "",
) -> list[Diagnostic]:
    """Diagnostics for one run; the exit status decides whether errors must exist.
    ``config``: the main configuration, or how to get it when a message needs it."""
    passed = result.returncode == 0 and not result.timed_out
    loaded: list[str] = []

    def main_config() -> str:
        if not loaded:
            loaded.append(config if isinstance(config, str) else config())
        return loaded[0]

    diagnostics: list[Diagnostic] = []
    other: list[str] = []
    for msg in parse_output(result.stderr, result.stdout):
        if msg.level is Level.OUTPUT:
            if msg.text.startswith(_DROPPED_OUTPUT):
                continue
            if _NO_LISTENER in msg.text:
                diagnostics.append(_diag("E4009", msg, redact, source_map))
                continue
            other.append(redact(msg.full_text))
            continue
        if msg.level is Level.NOTICE and msg.text.startswith(_NOISE):
            continue
        if msg.level is Level.ALERT and msg.text.startswith(_SUMMARY):
            continue  # HAProxy's closing summary: the errors it sums up are findings already
        if msg.level is Level.WARNING or (msg.level is Level.ALERT and passed):
            note = sandbox_note(msg.text, main_config())
            if note is not None:
                if msg.file is None and note.line is not None:
                    msg.file, msg.line = MAIN_CONFIG, note.line
                msg.continuation.append(f"({note.reason})")
                diagnostics.append(_diag("I4014", msg, redact, source_map))
                continue
        if msg.file is None and msg.level is not Level.NOTICE and main_config():
            line = locate(msg.text, main_config())
            if line is not None:
                msg.file, msg.line = MAIN_CONFIG, line
        diagnostics.append(_diag(_rule_for(msg, passed), msg, redact, source_map))
    if other:
        shown = other[:_MAX_OTHER_LINES]
        more = len(other) - len(shown)
        text = " | ".join(shown)[:_MAX_TEXT] + (f" (+{more} more lines)" if more else "")
        if result.truncated:
            text += " (output truncated)"
        diagnostics.append(make("I4008", Phase.HAPROXY, text))
    failed_loudly = any(d.severity.rank <= 1 for d in diagnostics)
    if not passed and not result.timed_out and not failed_loudly:
        how = (
            f"was killed by signal {result.signal}"
            if result.signal
            else f"exited with status {result.returncode}"
        )
        diagnostics.append(
            make(
                "E4007",
                Phase.HAPROXY,
                f"haproxy -c {how} without a readable error",
                location=Location(file=MAIN_CONFIG),
            )
        )
    return diagnostics


def _rule_for(msg: Message, passed: bool) -> RuleId:
    if msg.level is Level.ALERT:
        if passed:
            return "W4010"
        return "E4001" if msg.parsing else "E4002"
    if msg.level is Level.WARNING:
        return "W4003"
    if msg.level is Level.DIAG:
        return "I4006"
    return "I4004"


def _diag(
    rule_id: RuleId, msg: Message, redact: Callable[[str], str], source_map: SourceMap | None
) -> Diagnostic:
    location = None
    template = None
    if msg.file:
        file = _relative(redact(msg.file))
        location = Location(file=file, line=msg.line)
        if source_map is not None and msg.line is not None:
            template = source_map.lookup(file, msg.line)
    text = redact(msg.full_text)[:_MAX_TEXT]
    return make(rule_id, Phase.HAPROXY, text, location=location, template_location=template)


def _relative(path: str) -> str:
    return path[2:] if path.startswith("./") else path
