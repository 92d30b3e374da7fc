"""Which bundled schema family describes a given HAProxy version.

Families are the LTS lines the data describes (2.6, 2.8, 3.0, 3.2). A version between or above
them is judged by the nearest *older* family, because HAProxy keeps working configurations
working across one LTS step: an older schema may call a newer keyword unknown, but it will not
accept something the newer binary rejects as removed without the haproxy stage noticing.
"""

from __future__ import annotations

import re

from controller.diagnostics import Diagnostic, Phase, make
from controller.validation.schema.catalog import catalog, version_key

_VERSION_RE = re.compile(r"^\s*(\d+)\.(\d+)")


class UnsupportedVersionError(ValueError):
    """The version is older than every family, or not a version at all."""

    def __init__(self, version: str, detail: str) -> None:
        self.version = version
        self.diagnostic = make("E3011", Phase.SCHEMA, f"HAProxy version {version!r}: {detail}")
        super().__init__(self.diagnostic.message)


def families() -> list[str]:
    """Supported family names, oldest first."""
    return [f.name for f in catalog()]


def resolve_family(version: str) -> tuple[str, Diagnostic | None]:
    """The family for ``version`` plus a ``W3010`` warning when it is not an exact match."""
    m = _VERSION_RE.match(version)
    if not m:
        raise UnsupportedVersionError(version, "not a HAProxy version number")
    wanted = (int(m.group(1)), int(m.group(2)))
    names = families()
    exact = f"{wanted[0]}.{wanted[1]}"
    if exact in names:
        return exact, None
    older = [n for n in names if version_key(n) < wanted]
    if not older:
        raise UnsupportedVersionError(version, f"older than the oldest supported family {names[0]}")
    chosen = older[-1]
    return chosen, make(
        "W3010",
        Phase.SCHEMA,
        f"no schema for HAProxy {exact}; validating with the {chosen} schema",
    )


def family_for_version(version: str) -> str:
    """``"2.8.25"`` → ``"2.8"``; unknown newer → nearest lower family; < 2.6 raises."""
    return resolve_family(version)[0]
