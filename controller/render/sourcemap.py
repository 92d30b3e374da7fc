"""Per-file line origins, computed when first asked for.

Rendering keeps the pieces each output was joined from (mostly shared constants and the
strings of the stored objects themselves, so little extra memory). Most renders are valid and
nobody ever asks where line 4,711 came from; the pipeline asks only when it has something to
report. So the walk over the pieces (:func:`controller.render.trace.line_sources`) runs on the
first lookup of a file, once, and its result replaces the pieces.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping

from controller.diagnostics import TemplateLocation
from controller.render.trace import line_sources

Lines = tuple[TemplateLocation | None, ...]


class LazyLines(Mapping[str, Lines]):
    """``SourceMap.lines``: path → location of each rendered line (index 0 is line 1)."""

    __slots__ = ("_done", "_lock", "_pieces")

    def __init__(self, pieces: Mapping[str, list[str]]) -> None:
        self._pieces = dict(pieces)
        self._done: dict[str, Lines] = {}
        self._lock = threading.Lock()

    def __getitem__(self, path: str) -> Lines:
        done = self._done.get(path)
        if done is not None:
            return done
        with self._lock:
            done = self._done.get(path)
            if done is None:
                pieces = self._pieces[path]  # KeyError for unknown paths, as a Mapping should
                done = self._done[path] = tuple(line_sources(pieces))
                del self._pieces[path]
        return done

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(sorted({*self._pieces, *self._done}))

    def __len__(self) -> int:
        with self._lock:
            return len(self._pieces) + len(self._done)

    def __contains__(self, path: object) -> bool:
        with self._lock:
            return path in self._pieces or path in self._done

    def materialize(self) -> dict[str, Lines]:
        """Every file's lines now (for serialising or timing)."""
        return {path: self[path] for path in self}
