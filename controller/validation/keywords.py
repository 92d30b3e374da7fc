"""Words the parser must know before any schema is consulted: section keywords and the
predicates of ``.if`` conditions.

The section set is the union over every HAProxy version we target. Recognising a newer
section in an older version's config cannot cause a false positive: the older binary rejects
the line itself (as an unknown keyword of the enclosing section), so the config is invalid
either way, and the schema stage names the version problem.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Section keyword → first version family that knows it.
SECTIONS: Mapping[str, tuple[int, int]] = {
    "global": (1, 0),
    "defaults": (1, 0),
    "frontend": (1, 3),
    "backend": (1, 3),
    "listen": (1, 0),
    "peers": (1, 5),
    "userlist": (1, 4),
    "resolvers": (1, 6),
    "mailers": (1, 6),
    "cache": (1, 8),
    "program": (1, 9),
    "http-errors": (2, 2),
    "ring": (2, 2),
    "fcgi-app": (2, 1),
    "log-forward": (2, 3),
    "namespace_list": (1, 5),
    "crt-store": (3, 0),
    "traces": (3, 1),
    "acme": (3, 2),
}

SECTION_KEYWORDS: frozenset[str] = frozenset(SECTIONS)

#: Proxy sections: the ones that carry ``bind``/``server``/``errorfile``/``acl`` lines.
PROXY_SECTIONS: frozenset[str] = frozenset({"defaults", "frontend", "backend", "listen"})

#: ``.if`` predicate → (number of arguments, first version family that has it). Every name
#: here is accepted by HAProxy 2.6 unless a later family is given (checked against the 2.6 and
#: 2.8 binaries: ``strstr`` and ``enabled`` are refused by 2.6 and accepted by 2.8).
PREDICATES: Mapping[str, tuple[int, tuple[int, int]]] = {
    "defined": (1, (2, 4)),
    "feature": (1, (2, 4)),
    "streq": (2, (2, 4)),
    "strneq": (2, (2, 4)),
    "version_atleast": (1, (2, 4)),
    "version_before": (1, (2, 4)),
    "openssl_version_atleast": (1, (2, 6)),
    "openssl_version_before": (1, (2, 6)),
    "ssllib_name_startswith": (1, (2, 6)),
    "strstr": (2, (2, 7)),
    "enabled": (1, (2, 7)),
}

#: The newest family whose predicate list is known completely; for a newer binary an unknown
#: predicate name may be a new feature, so it is not called an error. Without a version the
#: union of all known names is assumed.
PREDICATES_KNOWN_UNTIL: tuple[int, int] = (3, 2)

#: Directives HAProxy handles before sections: conditional blocks and diagnostics.
CONDITIONAL_MACROS: frozenset[str] = frozenset({".if", ".elif", ".else", ".endif"})
MESSAGE_MACROS: frozenset[str] = frozenset({".diag", ".notice", ".warning", ".alert"})

#: HAProxy refuses a 100th nested ``.if`` (MAXNESTEDCONDS).
MAX_NESTED_CONDS = 100

#: HAProxy splits a line into at most 64 words (MAX_LINE_ARGS).
MAX_LINE_ARGS = 64

#: Pseudo-variables HAProxy expands itself; anything else after ``${.`` is refused.
PSEUDO_VARIABLES: frozenset[str] = frozenset({".LINE", ".FILE", ".SECTION"})


def family(version: str | None) -> tuple[int, int] | None:
    """``"2.8.25"`` → ``(2, 8)``; None when the version is unknown or unparsable."""
    if not version:
        return None
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1].split("-")[0])
    except (IndexError, ValueError):
        return None
