"""``python -m controller.observability`` prints the metrics reference (docs/metrics.md)."""

from controller.observability.metrics import METRICS, render_markdown

print(render_markdown(METRICS), end="")
