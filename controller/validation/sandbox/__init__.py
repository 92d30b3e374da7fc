"""Run an untrusted check (``haproxy -c``, an external validator) on a file set, contained.

``haproxy -c`` parses attacker-influenced text, and parsing is not passive: ``lua-load`` runs
code, ``ssl-engine`` loads modules, any path is opened. The directive policy of the syntax
stage rejects the dangerous directives, but this module is built so that the check holds even
when that policy is bypassed or has a gap. Every run gets:

* a fresh directory laid out like the deploy directory (``haproxy.cfg``, ``maps/``,
  ``certs/``, ``files/``), used as cwd, so relative references resolve exactly as they will
  after deploy — no path is rewritten;
* an empty environment (``haproxy -c`` in a series of checks: glibc's huge-page tunable
  alone, see ``hugepages.py``), closed file descriptors, stdin on ``/dev/null``, its own
  session and process group, resource limits (CPU, address space, file size, processes, open
  files, no core dumps) and a hard wall-clock timeout after which the whole group is killed;
* the strongest kernel isolation this host offers, probed once and logged:

  - **Landlock** (unprivileged LSM): only the system library directories, a handful of
    ``/etc`` files, three device nodes and the run's own directory are readable; nothing is
    writable; only the named programs may be executed; TCP bind/connect is denied; signals
    and abstract UNIX sockets cannot leave the sandbox;
  - **namespaces** (when the controller holds CAP_SYS_ADMIN): a private mount namespace whose
    root is an empty, read-only tmpfs holding read-only bind mounts of that same allow-list,
    entered with ``chroot``; a private network namespace (no interfaces but a down loopback),
    IPC and UTS namespace; for a policy that asks for it (``haproxy -c``'s) and where the
    spawn helper forks it, a PID namespace whose init the program is, so that nothing it
    starts outlives it;
  - **privilege drop** (when running as root): a per-run unprivileged uid/gid without
    supplementary groups or capabilities, so even a missed path is judged by plain file
    permissions, and every process left behind by the run can be found by uid and killed;
  - ``no_new_privs`` always, so no set-uid program can regain privileges.

Both allow-list layers use the same list, so the mount layer is a fallback for kernels
without Landlock and defence in depth where both work. ``docs/security.md`` explains the
threat model and what each layer stops.

Concurrency is bounded by an ``asyncio.Semaphore`` sized to the CPUs this process may use:
checks are CPU bound, so more parallel checks only make each one slower. There is no global
mutex; independent runs proceed in parallel up to that bound.
"""

from controller.validation.sandbox.policy import (
    SANDBOX_DIR,
    Isolation,
    Limits,
    SandboxError,
    SandboxPolicy,
    SandboxResult,
)
from controller.validation.sandbox.probe import isolation_for
from controller.validation.sandbox.run import max_concurrency, run_sandboxed, set_max_concurrency

__all__ = [
    "SANDBOX_DIR",
    "Isolation",
    "Limits",
    "SandboxError",
    "SandboxPolicy",
    "SandboxResult",
    "isolation_for",
    "max_concurrency",
    "run_sandboxed",
    "set_max_concurrency",
]
