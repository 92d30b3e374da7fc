"""A fixed first configuration file for ``haproxy -c`` that skips work no verdict depends on.

While it starts, HAProxy builds its internal HTTP client (used at run time by Lua and the
master CLI), and under the default ``httpclient.ssl.verify required`` it loads the system's
whole CA store for it: on Debian 146 PEM files, about 25 ms of CPU in every ``haproxy -c``
of its 2.6 build, a third of the check of a 1,000-Ingress configuration. No verdict depends on
that load. Unless the configuration sets one of the ``httpclient.*`` options itself, HAProxy
treats a store that does not load as "no TLS for the HTTP client" and says nothing (checked
on both binaries with the store hidden: same status, same output), so the load can only pass
silently or fail silently. An explicit option makes a failed load fatal, so the prelude is
left out whenever the main configuration names the HTTP client at all.

The prelude is ``global`` with ``httpclient.ssl.verify none``, given to HAProxy as its own
``-f`` file before ``haproxy.cfg``: the candidate's bytes, line numbers and file names in
messages stay exactly as rendered. The deployed configuration never contains it. The only way
a configuration could name an ``httpclient.*`` keyword without spelling it is an environment
variable expanded into the keyword; the sandbox's environment is empty, so that variable
would have to be set by the configuration itself (``setenv`` and its kin), and a configuration
naming any of those gets no prelude either.

Each binary is probed once: the prelude is used only where a minimal configuration checks
with the same status and the same messages with and without it (a build without OpenSSL, or
older than the option, does not know the keyword).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
import threading
from pathlib import Path

from controller.render import MAIN_CONFIG, FileSet
from controller.validation.haproxy.binary import HaproxyBinary

__all__ = ["PRELUDE", "PRELUDE_ID", "PRELUDE_NAME", "applies", "usable"]

PRELUDE_NAME = ".htc-check-prelude.cfg"
"""Beside ``haproxy.cfg`` in the check's directory; a rendered file set has no other file at
its top level, so the name cannot collide with an output."""
PRELUDE = b"global\n    httpclient.ssl.verify none\n"
PRELUDE_ID = hashlib.sha256(PRELUDE).hexdigest()[:12]
"""Part of the stage's fingerprint: what the check is given besides the candidate."""

_SPELLED = (b"pclie", b"tenv")
"""Any of these in the main configuration, and the check runs without the prelude: parts of
``httpclient`` and of ``setenv`` (and ``presetenv``, ``resetenv``, ``unsetenv``). The short
forms find every such word and are three times faster to look for than the words (0.75
against 2.35 ms for 2.5 MB here: the search skips ahead by the needle's last byte, and a
configuration is full of ``http``); a word that merely contains one only costs the prelude."""

_PROBE = b"""\
defaults
    mode http
    timeout connect 5s
    timeout client 5s
    timeout server 5s
frontend probe
    bind 127.0.0.1:9
    default_backend probe
backend probe
    server s 127.0.0.1:9
"""
_PID = re.compile(rb"\(\d+\)")
_PROBE_TIMEOUT = 10.0

_lock = threading.Lock()
_probed: dict[tuple[str, tuple[str, ...]], bool] = {}


_last: tuple[bytes, bool] = (b"", False)
"""The last main configuration looked at and its answer. A burst of proposals mostly renders
the live ``haproxy.cfg`` again (new Ingresses change maps), as bytes equal to the last ones
but another object: comparing them stops at the length or the first difference, and equal
ones cost a ``memcmp`` instead of two searches (0.003 against 0.29 ms for the 250 KB of
1,000 Ingresses)."""


def applies(files: FileSet) -> bool:
    """True when nothing in the main configuration can make the HTTP client's store matter."""
    global _last
    main = files.get(MAIN_CONFIG)
    if main is None:
        return False
    content = main.content
    seen, answer = _last  # one tuple, read and replaced whole: safe across threads
    if content != seen:
        answer = not any(word in content for word in _SPELLED)
        _last = (content, answer)
    return answer


def usable(binary: HaproxyBinary, flags: tuple[str, ...]) -> bool:
    """Whether ``binary`` checks the same with the prelude as without it (probed once per
    binary and flags; the probe's files are ours, so it runs outside the sandbox, as
    ``haproxy -vv`` does)."""
    key = (binary.fingerprint(), flags)
    with _lock:
        known = _probed.get(key)
    if known is not None:
        return known
    verdict = _probe(binary.path, flags)
    with _lock:
        _probed[key] = verdict
    return verdict


def _probe(path: str, flags: tuple[str, ...]) -> bool:
    with tempfile.TemporaryDirectory(prefix="htc-prelude-") as tmp:
        (Path(tmp) / MAIN_CONFIG).write_bytes(_PROBE)
        (Path(tmp) / PRELUDE_NAME).write_bytes(PRELUDE)
        runs = []
        for files in ([MAIN_CONFIG], [PRELUDE_NAME, MAIN_CONFIG]):
            argv = [path, "-c", "-C", tmp]
            for name in files:
                argv += ["-f", name]
            try:
                proc = subprocess.run(
                    [*argv, *flags],
                    cwd=tmp,
                    env={},
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=_PROBE_TIMEOUT,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired):
                return False
            runs.append((proc.returncode, _PID.sub(b"", proc.stdout + proc.stderr)))
    return runs[0][0] == 0 and runs[0] == runs[1]
