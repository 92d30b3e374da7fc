"""Stage ``schema``: version-specific HAProxy schemas, overlays, and the stage that applies them.

The bundled data (``data/base.json`` + ``data/deltas.json``) describes which keywords exist in
which section for each supported HAProxy family, with argument types, ranges and enums for the
directives templates use most. From it come one JSON Schema document per family
(:func:`family_schema`), the argument normaliser, and the cross-check against ``haproxy -dKall``.
``docs/schema.md`` documents the model and the overlay addressing.
"""

from controller.validation.schema.engine import Finding, SchemaEngine, Stats
from controller.validation.schema.generate import family_document as family_schema
from controller.validation.schema.overlay import OverlayResult, SchemaOverlayError, apply_overlays
from controller.validation.schema.stage import SchemaStage
from controller.validation.schema.versions import (
    UnsupportedVersionError,
    families,
    family_for_version,
    resolve_family,
)

__all__ = [
    "Finding",
    "OverlayResult",
    "SchemaEngine",
    "SchemaOverlayError",
    "SchemaStage",
    "Stats",
    "UnsupportedVersionError",
    "apply_overlays",
    "families",
    "family_for_version",
    "family_schema",
    "resolve_family",
]
