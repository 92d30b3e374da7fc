"""Where a command's report goes: stdout or ``--output``, with logs kept off stdout.

Every report-producing command (lint, test, validate) writes the same way so that CI sees
one contract: the report alone on stdout (JSON, SARIF and JUnit are parsed by machines), or
in the named file with a one-line summary on stderr, and exit 2 when the file cannot be
written rather than a traceback.

Exit codes, the same for every command (``validate``, ``render``, ``lint``, ``test``) on the
same input:

| code | meaning |
|---|---|
| 0 | the command's checks found nothing wrong (warnings allowed unless ``--strict``) |
| 1 | the inputs were judged, and the judgement failed: an invalid candidate, a render error, a lint error, a failing test |
| 2 | nothing could be judged: a usage error, an unreadable file, a config that is not a valid HAProxyTemplateConfig (wrong ``kind``, ``E8001``), unusable resources, no haproxy binary, no tests to run |
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from controller.observability import configure as configure_logging

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_OK",
    "EXIT_USAGE",
    "finish",
    "is_own_process",
    "own_process",
    "quiet_logs",
    "write_output",
]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class _LiveStderr:
    """Whatever ``sys.stderr`` is at write time (test runners swap it per invocation)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def quiet_logs() -> None:
    """Logs to stderr, and only when something is wrong: stdout carries the report."""
    configure_logging(level="warning", stream=_LiveStderr())  # type: ignore[arg-type]


def write_output(text: str, output: Path | None, *, noun: str = "the report") -> bool:
    """Write ``text`` to stdout, or to ``output``; True when it went to a file (the caller
    then says on stderr what the file holds). Exits 2 when the file cannot be written."""
    if output is None:
        sys.stdout.write(text)
        return False
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        click.echo(f"{output}: cannot write {noun}: {exc.strerror or exc}", err=True)
        raise SystemExit(EXIT_USAGE) from None
    return True


_OWN_PROCESS = False


def own_process() -> None:
    """Say that this process runs one command and nothing else: the ``htc`` program. Test
    runners and programs that call a command in their own process never do."""
    global _OWN_PROCESS
    _OWN_PROCESS = True


def is_own_process() -> bool:
    """Whether :func:`own_process` was called."""
    return _OWN_PROCESS


def finish(code: int) -> NoReturn:
    """Exit with ``code`` once everything is written. In the ``htc`` program (see
    :func:`own_process`) the interpreter is not torn down: freeing every loaded object,
    module and compiled template one by one cost ``htc validate`` over 6,000 manifests about
    150-200 ms of CPU and wall time, for memory the system takes back at once. Files and
    temporary folders are closed and removed by then; standard output and error are flushed
    here, and if that fails the exit is the ordinary one, which reports it."""
    if _OWN_PROCESS:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        else:
            os._exit(code)
    raise SystemExit(code)
