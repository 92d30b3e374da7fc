"""A spec with new collections swaps in a new store; edits made while it was checked count.

The candidate's render is held at a gate (after its snapshot) while a new object of the new
collection is written to disk. The live adapter does not watch that kind, so only the
candidate store's catch-up at the swap can bring it in — and the trigger must hear about
it, or the object waits for the next unrelated edit or the 5-minute resync.
"""

from __future__ import annotations

import asyncio
import io
import threading
from pathlib import Path
from typing import Any

from controller.local.app import LocalApp
from controller.observability.metrics import Metrics
from controller.render import RenderResult
from controller.resources import StoreView
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.triggers import Engine, default_engine
from tests.runtime.e2e_helpers import Site, local_options


class Held:
    """A renderer that stops after rendering until the test lets it go."""

    def __init__(self, inner: Any, entered: threading.Event, release: threading.Event) -> None:
        self.inner, self.entered, self.release = inner, entered, release

    def render(self, view: StoreView) -> RenderResult:
        result: RenderResult = self.inner.render(view)
        self.entered.set()
        if not self.release.wait(60):
            raise TimeoutError("never released")
        return result


def note(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "d"}}


async def test_edits_during_a_store_swap_are_rendered(
    haproxy_bin: str, site: Site, short_dir: Path
) -> None:
    entered, release = threading.Event(), threading.Event()
    real = default_engine(haproxy_bin)

    def engines(spec: HAProxyTemplateConfigSpec) -> Engine:
        engine = real(spec)
        if "notes" not in spec.watched_resources:
            return engine
        held = Held(engine.renderer, entered, release)  # renders without HTTP sources only
        return Engine(spec, held, engine.pipeline, engine.lint)  # type: ignore[arg-type]

    out = io.StringIO()
    app = LocalApp(
        local_options(site, haproxy_bin, short_dir / "run", out, status_addr=None),
        metrics=Metrics(),
        engine_factory=engines,
    )
    await app.start()
    try:
        site.write("note-early", note("early"))

        def add_notes(doc: dict[str, Any]) -> None:
            spec = doc["spec"]
            spec["watchedResources"]["notes"] = {"apiVersion": "v1", "kind": "ConfigMap"}
            spec["haproxyConfig"]["template"] += (
                "# notes:{% for n in resources.notes.list() %} {{ n.metadata.name }}{% endfor %}.\n"
            )

        old_store = app.store
        site.edit_config(add_notes)
        assert await asyncio.to_thread(entered.wait, 60), out.getvalue()  # generous: loaded CI
        site.write("note-late", note("late"))  # while the candidate is being checked
        await asyncio.sleep(0.3)  # the live adapter has seen (and ignored) the file
        release.set()
        cfg = app.deploy_dir / "haproxy.cfg"
        for _ in range(600):  # at most 30 s
            if app.store is not old_store and "# notes: early late." in cfg.read_text():
                break
            await asyncio.sleep(0.05)
        assert "# notes: early late." in cfg.read_text(), out.getvalue()
    finally:
        release.set()
        await app.stop()
