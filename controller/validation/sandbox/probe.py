"""Which isolation layers work on this host: found by trying them, once, and logged."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import replace

from controller.observability import get_logger
from controller.validation.sandbox import linux
from controller.validation.sandbox.plan import build_plan
from controller.validation.sandbox.policy import Isolation, SandboxPolicy
from controller.validation.sandbox.uids import uids

__all__ = ["isolation_for"]

log = get_logger("controller.validation.sandbox")


_probe_lock = threading.Lock()
_probed: dict[tuple[bool, bool, bool], Isolation] = {}
_logged: set[str] = set()


def _trial(iso: Isolation) -> bool:
    """Spawn ``true`` under ``iso``; a layer is used only if it provably works here."""
    prog = shutil.which("true", path="/usr/bin:/bin")
    if prog is None:
        return False
    base = tempfile.mkdtemp(prefix="htc-probe-")
    uid = uids.take() if iso.privilege_drop else None
    try:
        workdir = os.path.join(base, "d")
        root = os.path.join(base, "r")
        os.mkdir(workdir, 0o700)
        os.mkdir(root, 0o755)
        os.chmod(base, 0o711)
        if uid is not None:
            os.chown(workdir, uid, uid)
        plan = build_plan(prog, SandboxPolicy(), iso, workdir, root, uid, 2.0)
        try:
            rc = subprocess.run(
                [prog],
                cwd=workdir,
                env={},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=plan.child,
                start_new_session=True,
                timeout=5,
                check=False,
            ).returncode
        finally:
            plan.close()
        return rc == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        if uid is not None:
            uids.give(uid)
        shutil.rmtree(base, ignore_errors=True)


def isolation_for(policy: SandboxPolicy) -> Isolation:
    """The layers ``policy`` gets on this host, probed once per combination and logged."""
    key = (policy.landlock, policy.namespaces, policy.drop_privileges)
    with _probe_lock:
        iso = _probed.get(key)
        if iso is None:
            iso = _probe(*key)
            _probed[key] = iso
    desc = iso.describe()
    if desc not in _logged:
        _logged.add(desc)
        if iso.confined_filesystem:
            log.info("sandbox isolation active", isolation=desc)
        else:
            log.warning(
                "sandbox isolation is weak: no Landlock and no namespaces on this host; "
                "checked programs can read what the controller's uid can read",
                isolation=desc,
            )
    return iso


def _probe(landlock: bool, namespaces: bool, drop: bool) -> Isolation:
    abi = linux.landlock_abi() if landlock else 0
    if abi and not _trial(Isolation(landlock_abi=abi)):
        abi = 0
    uid = drop and os.geteuid() == 0 and linux.has_cap(linux.CAP_SETUID)
    uid = uid and _trial(Isolation(privilege_drop=True))
    # A process that stays root inside a chroot can leave it; the private root is only used
    # together with the privilege drop.
    ns = uid and namespaces and linux.has_cap(linux.CAP_SYS_ADMIN)
    ns = ns and _trial(Isolation(namespaces=True, privilege_drop=True))
    full = Isolation(landlock_abi=abi, namespaces=ns, privilege_drop=uid)
    if _trial(full):
        return full
    # Layers that work alone but not together: keep the strongest single allow-list layer.
    for fallback in (replace(full, namespaces=False), replace(full, landlock_abi=0)):
        if _trial(fallback):
            return fallback
    return Isolation()
