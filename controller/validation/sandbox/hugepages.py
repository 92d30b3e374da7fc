"""Whether a sandboxed run's heap may be backed by transparent huge pages.

About half of a ``haproxy -c`` of a large configuration is the kernel handing it fresh 4 KiB
pages for its proxies and servers (some 8,300 page faults at 1,000 Ingresses). glibc's
``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` makes ``malloc`` ask for transparent huge pages where
the kernel grants them on request (``madvise`` or ``always``), and then the same heap takes
some fifteen faults: the sandboxed check's CPU fell from 47-48 to 32 ms (means of 100 checks,
back to back, twice).

It is not a win at any pace on every host. On a virtual machine that returns free memory to
its host (free page reporting, which reports exactly huge-page-sized blocks), a huge page that
has been reported must be backed by the host again on first touch: checks spaced a second or
more apart took 100-200 ms instead of 30-40 every few runs, more than they saved on average.
A huge page that the previous check freed moments ago has not been reported yet: none of 200
checks back to back stalled, nor of 60 checks 0.1-0.5 s apart but the first one or two of each
series (the first of a series takes pages nobody freed lately).

That first one pays for the rest, and more the larger it is: at 10,000 Ingresses 1,078 ms
against 381 with 4 KiB pages and 155-182 for most later ones. A short series never earns it
back, and the commonest is two checks: an admission proposal, then the reconciliation of the
same change a moment later. With huge pages from the second check of a series, the pipeline
benchmark at 10,000 Ingresses (each candidate checked, then checked again alone) paid that
first-of-series price on every candidate: its checks took 1,371-1,425 ms instead of 337. So a
run asks for huge pages only from the fourth of a series on (:data:`SERIES`), a series being
runs each starting while another is in flight or less than :data:`WARM_S` after the last one
ended. A burst of admission proposals is such a series; a lone check, or a pair, runs as it
always did.

Only a policy with ``huge_pages`` is concerned (``haproxy -c``'s). glibc reads two ``/sys``
files to learn whether and at what size the kernel grants huge pages: the policy adds them,
read-only, to the allow-list; without them the variable does nothing. What the program is
shown is otherwise unchanged, and so is its verdict: the allocator's page size is not
visible to a configuration, except through expanding the variable itself, which the syntax
stage refuses unless an operator allowed environment expansion (E2106).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["ENVIRONMENT", "SERIES", "THP_FILES", "WARM_S", "Pace"]

THP_FILES: tuple[str, ...] = (
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
)
ENVIRONMENT: dict[bytes, bytes] = {b"GLIBC_TUNABLES": b"glibc.malloc.hugetlb=1"}
WARM_S = 0.3
"""Seconds after a run ended during which the next one still asks for huge pages (measured
above: 0.1-0.5 s apart, none stalled; 1 s apart, four checks of twelve did)."""
SERIES = 3
"""Runs of a series before the one that first asks for huge pages."""


class Pace:
    """Runs in flight, when the last one ended and how many came before in the current
    series: :meth:`begin` says whether a run starting now asks for huge pages; :meth:`end`
    when it is over."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._running = 0
        self._ended = float("-inf")
        self._before = 0
        """Runs of the current series before this one."""

    def begin(self) -> bool:
        with self._lock:
            close = self._running > 0 or self._clock() - self._ended < WARM_S
            self._before = self._before + 1 if close else 0
            self._running += 1
            return self._before >= SERIES

    def end(self) -> None:
        with self._lock:
            self._running -= 1
            self._ended = self._clock()
