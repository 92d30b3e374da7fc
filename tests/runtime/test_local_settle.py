"""Once its first deploy is confirmed, ``htc local`` collects the whole heap once
(``controller.local.app.settle_heap``): what starting built and dropped in reference cycles,
the renderer the spec lint compiled above all, does not wait for the rare whole-heap
collection of a long-running process."""

from __future__ import annotations

import gc
import io
from pathlib import Path

from jinja2 import Template

from controller.local.app import LocalApp
from controller.observability.metrics import Metrics
from tests.runtime.e2e_helpers import Site, local_options


async def test_nothing_the_start_dropped_waits_for_the_collector(
    haproxy_bin: str, site: Site, short_dir: Path
) -> None:
    """With the collector off from the start, as if it never came round: after the start
    no compiled template is left unreachable (without the settling collection, the lint's
    dropped renderer leaves each of its templates)."""
    app = LocalApp(
        local_options(site, haproxy_bin, short_dir / "run", io.StringIO()), metrics=Metrics()
    )
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        await app.start()
        assert app.board.ready
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            dropped = [repr(o) for o in gc.garbage if isinstance(o, Template)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        assert dropped == []
    finally:
        if enabled:
            gc.enable()
        await app.stop()
