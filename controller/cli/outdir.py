"""Replace a rendered directory as a whole, so it never holds files from two renders.

Writing files one by one into the target leaves a mix when a render fails half-way, and keeps
files of outputs that no longer exist. Instead the new set is written into a fresh directory
beside the target (same file system, so a rename moves it) and renamed into place; the
previous directory is renamed aside first and removed last. Between the two renames the target
is briefly absent, never partial.

Because the old directory is removed, only a directory that looks like an earlier render
(``haproxy.cfg`` and the ``maps/``, ``certs/``, ``files/`` sub-directories, nothing else) is
replaced; pointing ``--out`` at a home directory by mistake must not delete it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from controller.render import KIND_DIRS, MAIN_CONFIG, FileSet

__all__ = ["OutputDirError", "replace_dir", "write_files"]

_OURS = frozenset({MAIN_CONFIG, *KIND_DIRS.values()})


class OutputDirError(Exception):
    """The target cannot be replaced; the message says why and what to do."""


def write_files(files: FileSet, out: Path) -> list[Path]:
    """Write every file under ``out`` at its deploy path; returns what was written."""
    written: list[Path] = []
    for entry in files:
        target = out / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(entry.content)
        written.append(target)
    return written


def _foreign_entry(out: Path) -> str | None:
    """The first entry of ``out`` that an earlier render would not have written."""
    for item in sorted(out.iterdir()):
        if item.name not in _OURS:
            return item.name
        if item.name == MAIN_CONFIG:
            if item.is_symlink() or not item.is_file():
                return item.name
            continue
        if item.is_symlink() or not item.is_dir():
            return item.name
        for sub in sorted(item.iterdir()):
            if sub.is_symlink() or not sub.is_file():
                return f"{item.name}/{sub.name}"
    return None


def replace_dir(files: FileSet, out: Path) -> list[Path]:
    """Make ``out`` hold exactly ``files``; returns the paths written (under ``out``).

    Raises OutputDirError when ``out`` is not a directory an earlier render produced, and
    OSError when the file system refuses; in both cases ``out`` is left as it was.
    """
    if out.is_symlink():
        raise OutputDirError(f"{out} is a symbolic link; give the directory itself")
    if out.exists():
        if not out.is_dir():
            raise OutputDirError(f"{out} exists and is not a directory")
        foreign = _foreign_entry(out)
        if foreign is not None:
            raise OutputDirError(
                f"refusing to replace {out}: it holds {foreign!r}, which htc render does not "
                "write; use an empty or new directory"
            )
        mode = out.stat().st_mode & 0o7777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o777 & ~umask
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=parent))
    try:
        write_files(files, new)
        new.chmod(mode)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=parent))
            os.replace(out, old)  # an empty directory is replaced by a rename
            try:
                os.replace(new, out)
            except OSError:
                os.replace(old, out)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(new, out)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(new)
        raise
    return [out / entry.path for entry in files]
