"""Keep temp paths and key material out of diagnostics.

Reports travel far — admission responses, Kubernetes Events, CI logs — so a checked program's
output is scrubbed before it becomes a message: the sandbox directory is replaced by the
deploy-relative path it stands for, PEM blocks are cut, and any long base64 run that occurs
in a certificate or key of the file set is replaced, even when a program echoed only part of
a line.
"""

from __future__ import annotations

import os
import re

from controller.render import FileKind, FileSet

__all__ = ["Redactor"]

_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|\Z)", re.S
)  # fmt: skip
_B64_RUN = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_LONG_B64 = re.compile(r"[A-Za-z0-9+/]{64,}={0,2}")
REDACTED = "[redacted]"


class Redactor:
    def __init__(self, workdir: str | None, files: FileSet | None = None) -> None:
        roots: set[str] = set()
        if workdir:
            roots |= {workdir.rstrip("/"), os.path.realpath(workdir).rstrip("/")}
        self._roots = sorted(roots, key=len, reverse=True)
        secret_parts: list[str] = []
        for entry in files or ():
            text = entry.content.decode("utf-8", "replace")
            if entry.kind is FileKind.CERT or "-----BEGIN" in text:
                secret_parts.append(text)
        self._corpus = "\n".join(secret_parts)

    def __call__(self, text: str) -> str:
        for root in self._roots:
            text = text.replace(root + "/", "").replace(root, ".")
        text = _PEM.sub("[redacted PEM block]", text)
        if self._corpus:
            text = _B64_RUN.sub(self._maybe_secret, text)
        return _LONG_B64.sub(_key_like, text)

    def _maybe_secret(self, m: re.Match[str]) -> str:
        return REDACTED if m.group(0) in self._corpus else m.group(0)


def _key_like(m: re.Match[str]) -> str:
    """A long run mixing cases and digits is key material far more often than prose."""
    s = m.group(0)
    mixed = any(c.isupper() for c in s) and any(c.islower() for c in s)
    return REDACTED if mixed and any(c.isdigit() for c in s) else s
