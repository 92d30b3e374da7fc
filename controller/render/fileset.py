"""The unit of validation, caching and deployment: a complete set of files.

Paths are relative to the deploy directory (``haproxy.cfg``, ``maps/hosts.map``,
``certs/site.pem``, ``files/503.http``). Keeping them relative makes the rendered bytes
independent of where they are checked or deployed: the sandbox and the deploy target both run
HAProxy with ``-C <dir>``, so the same checksum means the same behaviour everywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType
from typing import Any

from controller.spec import check_output_name

MAIN_CONFIG = "haproxy.cfg"


class FileKind(StrEnum):
    CONFIG = "config"
    MAP = "map"
    CERT = "cert"
    FILE = "file"


#: Deploy sub-directory per auxiliary kind; the main config lives at the top.
KIND_DIRS: Mapping[FileKind, str] = {
    FileKind.MAP: "maps",
    FileKind.CERT: "certs",
    FileKind.FILE: "files",
}


def path_for(kind: FileKind | str, name: str) -> str:
    """Deploy path of an auxiliary file, relative to the deploy directory."""
    k = FileKind(kind) if not isinstance(kind, FileKind) else kind
    if k is FileKind.CONFIG:
        return MAIN_CONFIG
    check_name(name)
    return f"{KIND_DIRS[k]}/{name}"


def check_name(name: str) -> None:
    """Reject names that could escape their directory or break the line naming them.

    Outputs are named by spec keys, which the spec model already checks with the same
    function; checking again here covers file sets built by other means (``htc validate
    --raw``, tests) without a second definition of what a valid name is.
    """
    check_output_name(name)


@dataclass(frozen=True, slots=True)
class FileEntry:
    path: str
    kind: FileKind
    content: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()


@dataclass(frozen=True)
class FileSet:
    """Immutable mapping of deploy path → file; ``checksum`` covers kinds, paths and bytes.

    ``files`` is a read-only view of a private copy: the checksum is computed once and cached,
    and a verdict is keyed by it, so a file set changed after hashing would carry a verdict
    for bytes that were never validated.
    """

    files: Mapping[str, FileEntry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", MappingProxyType(dict(self.files)))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A mapping proxy cannot be pickled; the entries can, and rebuild the same set.
        return (FileSet, (dict(self.files),))

    @classmethod
    def of(cls, entries: list[FileEntry] | tuple[FileEntry, ...]) -> FileSet:
        by_path: dict[str, FileEntry] = {}
        for e in entries:
            if e.path in by_path:
                raise ValueError(f"duplicate path in file set: {e.path}")
            by_path[e.path] = e
        return cls(dict(sorted(by_path.items())))

    @cached_property
    def checksum(self) -> str:
        h = hashlib.sha256()
        for path in sorted(self.files):
            e = self.files[path]
            for part in (e.kind.value.encode(), path.encode(), e.content):
                h.update(len(part).to_bytes(8, "big"))
                h.update(part)
        return h.hexdigest()

    @property
    def main(self) -> FileEntry:
        return self.files[MAIN_CONFIG]

    def __iter__(self) -> Iterator[FileEntry]:
        return iter(self.files.values())

    def __len__(self) -> int:
        return len(self.files)

    def __contains__(self, path: object) -> bool:
        return path in self.files

    def get(self, path: str) -> FileEntry | None:
        return self.files.get(path)
