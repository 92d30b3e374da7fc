"""Publication: what the runtime tells the world, only after a verdict.

One :class:`Publisher` fans :class:`Event` values out to logs, metrics and sinks (the status
board behind ``/status``, the console of ``htc local``). A success event can only be built
from a ``ValidatedFileSet``, so nothing announces success before a valid verdict.
"""

from controller.publish.events import Event, EventKind, now_rfc3339
from controller.publish.http import StatusServer, parse_addr
from controller.publish.publisher import Publisher, Sink
from controller.publish.status import StatusBoard

__all__ = [
    "Event",
    "EventKind",
    "Publisher",
    "Sink",
    "StatusBoard",
    "StatusServer",
    "now_rfc3339",
    "parse_addr",
]
