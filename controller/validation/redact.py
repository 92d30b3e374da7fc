"""Keep temp paths, key material and credentials out of diagnostics.

Reports travel far — admission responses, Kubernetes Events, CI logs — so a checked program's
output is scrubbed before it becomes a message: the sandbox directory is replaced by the
deploy-relative path it stands for, PEM blocks are cut, and any long base64 run that occurs
in a certificate or key of the file set is replaced, even when a program echoed only part of
a line. Credentials a configuration spells inline — userlist passwords and their hashes,
``stats auth`` passwords, ``Authorization`` header values a rule sets or a health check
sends — are replaced wherever a program repeats them (an external validator quoting the
line, a Lua script printing it).
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

# Each starts with a literal and runs only when its keyword occurs at all: the rendered
# configuration of a large cluster is hundreds of kilobytes, scanned on every check.
_CREDENTIALS = (
    ("password", re.compile(r"password[ \t]+(\S+)", re.I)),  # user … [insecure-]password
    ("auth", re.compile(r"stats[ \t]+auth[ \t]+[^:\s]*:(\S+)", re.I)),
    (
        "authorization",
        re.compile(r"(?:-header|hdr)[ \t]+(?:proxy-)?authorization[ \t]+([^\n]*\S)", re.I),
    ),
)
_MIN_SECRET = 4
"""Shorter values are left alone: replacing them would garble ordinary words."""
_MIN_PART = 6


class Redactor:
    def __init__(self, workdir: str | None, files: FileSet | None = None) -> None:
        roots: set[str] = set()
        if workdir:
            roots |= {workdir.rstrip("/"), os.path.realpath(workdir).rstrip("/")}
        self._roots = sorted(roots, key=len, reverse=True)
        secret_parts: list[str] = []
        credentials: set[str] = set()
        for entry in files or ():
            text = entry.content.decode("utf-8", "replace")
            if entry.kind is FileKind.CERT or "-----BEGIN" in text:
                secret_parts.append(text)
            if entry.kind is FileKind.CONFIG:
                credentials |= _credentials(text)
        self._corpus = "\n".join(secret_parts)
        self._credentials = sorted(credentials, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for root in self._roots:
            text = text.replace(root + "/", "").replace(root, ".")
        for secret in self._credentials:
            text = text.replace(secret, REDACTED)
        text = _PEM.sub("[redacted PEM block]", text)
        if self._corpus:
            text = _B64_RUN.sub(self._maybe_secret, text)
        return _LONG_B64.sub(_key_like, text)

    def _maybe_secret(self, m: re.Match[str]) -> str:
        return REDACTED if m.group(0) in self._corpus else m.group(0)


def _credentials(config: str) -> set[str]:
    """The credentials ``config`` spells inline: each value as written and unquoted, and for
    a header value its longer words too (``Basic <token>``: the token alone may be echoed)."""
    found: set[str] = set()
    lower = config.lower()
    values = [
        m.group(1)
        for keyword, pattern in _CREDENTIALS
        if keyword in lower
        for m in pattern.finditer(config)
    ]
    for value in values:
        for v in {value, value.strip("\"'")}:
            if len(v) >= _MIN_SECRET:
                found.add(v)
            found.update(w.strip("\"'") for w in v.split() if len(w.strip("\"'")) >= _MIN_PART)
    return found


def _key_like(m: re.Match[str]) -> str:
    """A long run mixing cases and digits is key material far more often than prose."""
    s = m.group(0)
    mixed = any(c.isupper() for c in s) and any(c.islower() for c in s)
    return REDACTED if mixed and any(c.isdigit() for c in s) else s
