"""The Linux primitives the sandbox needs, through ctypes: Landlock, namespaces, mounts.

Nothing here decides policy; :mod:`.plan` does. Everything is usable from the forked child
(no allocation-heavy work, no imports) or runs in the parent before the fork.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import struct
from collections.abc import Iterable

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
libc.unshare.argtypes = [ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4

_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_TRUNCATE = 1 << 14
_FS_ALL_V1 = (1 << 13) - 1
_FS_REFER = 1 << 13
_FS_IOCTL_DEV = 1 << 15
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | _FS_IOCTL_DEV
_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX = 1 << 0
_SCOPE_SIGNAL = 1 << 1

PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def errno_error(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


def landlock_abi() -> int:
    """Highest Landlock ABI the kernel offers; 0 when absent, disabled or filtered."""
    r = libc.syscall(
        _SYS_LANDLOCK_CREATE_RULESET,
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return int(r) if r > 0 else 0


def _handled_fs(abi: int) -> int:
    bits = _FS_ALL_V1
    if abi >= 2:
        bits |= _FS_REFER
    if abi >= 3:
        bits |= FS_TRUNCATE
    if abi >= 5:
        bits |= _FS_IOCTL_DEV
    return bits


def landlock_ruleset(abi: int, rules: Iterable[tuple[str, int]], *, deny_tcp: bool) -> int:
    """Build a ruleset in the parent (it restricts nobody yet); the child enforces it."""
    handled_fs = _handled_fs(abi)
    handled_net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if (deny_tcp and abi >= 4) else 0
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", handled_fs, handled_net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled_fs, handled_net)
    else:
        attr = struct.pack("=Q", handled_fs)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = int(
        libc.syscall(
            _SYS_LANDLOCK_CREATE_RULESET, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)
        )
    )
    if fd < 0:
        raise errno_error("landlock_create_ruleset")
    try:
        for path, access in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # an allowed path that does not exist grants nothing
            try:
                rights = access & handled_fs
                if not os.path.isdir(path):
                    rights &= _FILE_RIGHTS
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, pfd), 12)
                r = libc.syscall(
                    _SYS_LANDLOCK_ADD_RULE,
                    ctypes.c_int(fd),
                    ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                    rule,
                    ctypes.c_uint32(0),
                )
                if r != 0:
                    raise errno_error(f"landlock_add_rule({path})")
            finally:
                os.close(pfd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _capabilities() -> int:
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


CAP_SETUID = 7
CAP_SYS_ADMIN = 21


def has_cap(cap: int) -> bool:
    return bool(_capabilities() >> cap & 1)


def elf_interpreter(path: str) -> str | None:
    """PT_INTERP of an ELF executable: the loader the kernel opens for execution."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            (phoff,) = struct.unpack_from("<Q", head, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(phnum):
                (p_type,) = struct.unpack_from("<I", table, i * phentsize)
                if p_type == 3:
                    (offset,) = struct.unpack_from("<Q", table, i * phentsize + 8)
                    (size,) = struct.unpack_from("<Q", table, i * phentsize + 32)
                    f.seek(offset)
                    return f.read(size).rstrip(b"\x00").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def restrict_self(ruleset_fd: int) -> None:
    """Enforce a ruleset on the calling thread (and everything it executes) for good."""
    r = libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0))
    if r != 0:
        raise errno_error("landlock_restrict_self")
