"""The resource store: watched objects, indexed, frozen, with snapshots, overlays and a feed.

Adapters write to a :class:`Store`; renders read a :class:`Snapshot` (or an :class:`Overlay`
over one, for admission). Manifests and matching serve the local adapters, which have files
instead of watches. See ``docs/store.md``.
"""

from controller.resources.api import (
    AmbiguousLookup,
    CollectionView,
    Entry,
    IndexedCollectionView,
    IndexedStoreView,
    IndexKey,
    K8sObject,
    ObjectKey,
    StoreView,
    TooManyKeys,
    UnknownCollection,
)
from controller.resources.checks import check_paths, check_raw_watched, check_watched
from controller.resources.collection import InvalidObject, object_key, object_ref
from controller.resources.frozen import FrozenDict, freeze, thaw
from controller.resources.manifests import (
    Manifest,
    iter_manifest_files,
    load_file,
    load_manifests,
    unwatched_note,
)
from controller.resources.matching import SelectorError, collections_for, selector_matches
from controller.resources.overlay import Overlay, OverlayOp
from controller.resources.paths import (
    MISSING,
    FieldPath,
    FieldPathError,
    format_path,
    lookup,
    parse_path,
)
from controller.resources.store import (
    Change,
    ChangeOp,
    Snapshot,
    Store,
    StoreConfigError,
)

__all__ = [
    "MISSING",
    "AmbiguousLookup",
    "Change",
    "ChangeOp",
    "CollectionView",
    "Entry",
    "FieldPath",
    "FieldPathError",
    "FrozenDict",
    "IndexKey",
    "IndexedCollectionView",
    "IndexedStoreView",
    "InvalidObject",
    "K8sObject",
    "Manifest",
    "ObjectKey",
    "Overlay",
    "OverlayOp",
    "SelectorError",
    "Snapshot",
    "Store",
    "StoreConfigError",
    "StoreView",
    "TooManyKeys",
    "UnknownCollection",
    "check_paths",
    "check_raw_watched",
    "check_watched",
    "collections_for",
    "format_path",
    "freeze",
    "iter_manifest_files",
    "load_file",
    "load_manifests",
    "lookup",
    "object_key",
    "object_ref",
    "parse_path",
    "selector_matches",
    "thaw",
    "unwatched_note",
]
