"""The deploy directory: atomic writes, the previous set, and read-back.

Layout (all paths relative to ``root``, as in the FileSet)::

    haproxy.cfg  maps/…  certs/…  files/…   the running set
    .htc-deployed.json                      manifest of the set HAProxy confirmed
    .previous/                              the set that ran before (for rollback)

Auxiliary files are written before the main config, each through a temporary file and a
rename, so a reader (a reload, or a master restarted at the wrong moment) sees either the old
or the new version of every file and never a config that names a map not written yet. Files
that belonged to the old set and not to the new one are removed only after the config that
stopped using them is in place. The manifest is written last, after HAProxy confirmed the
set, so it always names what HAProxy actually runs.

Only files named in a manifest are ever touched; anything else in the directory is left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from controller.render import MAIN_CONFIG, FileEntry, FileKind, FileSet

MANIFEST = ".htc-deployed.json"
PREVIOUS = ".previous"

__all__ = ["MANIFEST", "PREVIOUS", "DeployDir", "Manifest"]


@dataclass(frozen=True, slots=True)
class Manifest:
    checksum: str
    files: dict[str, tuple[FileKind, str]]
    """path → (kind, sha256)."""

    @classmethod
    def of(cls, files: FileSet) -> Manifest:
        return cls(files.checksum, {e.path: (e.kind, e.sha256) for e in files})

    def to_json(self) -> str:
        return json.dumps(
            {
                "checksum": self.checksum,
                "files": {p: {"kind": k.value, "sha256": h} for p, (k, h) in self.files.items()},
            },
            indent=2,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        return cls(
            str(data["checksum"]),
            {p: (FileKind(v["kind"]), str(v["sha256"])) for p, v in data["files"].items()},
        )


class DeployDir:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    # --- reading --------------------------------------------------------------------------

    def manifest(self, *, previous: bool = False) -> Manifest | None:
        path = (self.root / PREVIOUS if previous else self.root) / MANIFEST
        try:
            return Manifest.from_json(path.read_text())
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def read(self, manifest: Manifest, *, previous: bool = False) -> FileSet | None:
        """The manifest's files as they are on disk; None if any is missing."""
        base = self.root / PREVIOUS if previous else self.root
        entries: list[FileEntry] = []
        for path, (kind, _) in manifest.files.items():
            try:
                entries.append(FileEntry(path, kind, (base / path).read_bytes()))
            except OSError:
                return None
        return FileSet.of(entries)

    def drifted(self, files: FileSet) -> list[str]:
        """Paths of ``files`` whose bytes on disk differ (or are missing)."""
        out: list[str] = []
        for entry in files:
            try:
                if (self.root / entry.path).read_bytes() != entry.content:
                    out.append(entry.path)
            except OSError:
                out.append(entry.path)
        return out

    def previous(self) -> FileSet | None:
        m = self.manifest(previous=True)
        return self.read(m, previous=True) if m else None

    # --- writing --------------------------------------------------------------------------

    def write(self, files: FileSet, *, replacing: Iterable[str] = ()) -> None:
        """Write ``files`` (auxiliary first, config last), then drop paths of ``replacing``
        that the new set no longer has."""
        self.root.mkdir(parents=True, exist_ok=True)
        ordered = sorted(files, key=lambda e: (e.path == MAIN_CONFIG, e.path))
        for entry in ordered:
            _atomic_write(self.root / entry.path, entry.content, _mode(entry.kind))
        for stale in set(replacing) - set(files.files):
            with contextlib.suppress(FileNotFoundError):
                (self.root / stale).unlink()

    def commit(self, files: FileSet) -> None:
        """Record ``files`` as what HAProxy runs."""
        _atomic_write(self.root / MANIFEST, Manifest.of(files).to_json().encode(), 0o644)

    def save_previous(self, files: FileSet) -> None:
        """Keep a copy of the running set so a failed reload can be undone."""
        prev = self.root / PREVIOUS
        tmp = self.root / f"{PREVIOUS}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for entry in files:
            _atomic_write(tmp / entry.path, entry.content, _mode(entry.kind))
        _atomic_write(tmp / MANIFEST, Manifest.of(files).to_json().encode(), 0o644)
        old = self.root / f"{PREVIOUS}.old"
        shutil.rmtree(old, ignore_errors=True)
        if prev.exists():
            prev.rename(old)
        tmp.rename(prev)
        shutil.rmtree(old, ignore_errors=True)


def _mode(kind: FileKind) -> int:
    # Certificates carry private keys.
    return 0o600 if kind is FileKind.CERT else 0o644


def _atomic_write(path: Path, content: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.htc-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
