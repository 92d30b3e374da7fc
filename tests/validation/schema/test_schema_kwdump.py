"""Cross-check with ``haproxy -dKall``: every registered keyword the schema lists for a
version exists in that binary, core keywords really are absent from the dump, and the
capabilities the dump prints for ``option`` names match the schema's section masks."""

from __future__ import annotations

from functools import cache

import pytest

from controller.validation.schema.kwdump import (
    KeywordDump,
    cross_check,
    features,
    parse_dump,
    run_dump,
)
from tests.validation.schema.schema_helpers import family_of

pytestmark = pytest.mark.haproxy

SAMPLE = """\
# List of registered ACL keywords:
base = base -m str
# List of registered configuration keywords:
global
\tmaxsslconn
listen
\ttimeout
\tbind <addr> backlog +1
\tbind <addr> ssl alpn +1
\tserver <name> <addr> weight +1
\toption dontlognull [ FE ]
\toption http-buffer-request [ FE BE HTTP ]
\thttp-request set-var*
\ttcp-request connection set-src
crt-list
\talpn +1
# List of registered CLI keywords:
show info
"""


def test_parse_dump_reads_every_class() -> None:
    d = parse_dump(SAMPLE)
    assert d.classes["global"] == {"maxsslconn"}
    assert d.classes["listen"] == {"timeout"}
    assert d.classes["crt-list"] == {"alpn"}
    assert d.bind == {"backlog", "alpn"}
    assert d.server == {"weight"}
    assert d.options == {"dontlognull": {"FE"}, "http-buffer-request": {"FE", "BE", "HTTP"}}
    assert d.actions == {"http-request": {"set-var*"}, "tcp-request connection": {"set-src"}}
    assert "show" not in str(d.entries())


@cache
def _dump(binary: str) -> KeywordDump:
    return parse_dump(run_dump(binary))


def test_schema_keywords_exist_in_the_binary(haproxy_bin: str) -> None:
    fam = family_of(haproxy_bin)
    dump = _dump(haproxy_bin)
    result = cross_check(fam, dump, features(haproxy_bin))
    assert not result.missing, result.missing
    assert not result.misclassified_core, result.misclassified_core
    config_entries = {e for e in dump.entries() if not e.startswith("crt-list/")}
    covered = result.covered & config_entries
    # crt-list file options are not haproxy.cfg directives; everything else must be described
    assert len(covered) / len(config_entries) >= 0.99, sorted(config_entries - covered)
    print(
        f"haproxy {fam.name}: schema covers {len(covered)}/{len(config_entries)} configuration "
        f"entries of -dKall ({len(result.covered)}/{result.total} including crt-list options)"
    )


def test_option_capabilities_match_section_masks(haproxy_bin: str) -> None:
    fam = family_of(haproxy_bin)
    proxy = fam.keywords["proxy"]
    wrong = []
    for name, caps in _dump(haproxy_bin).options.items():
        spec = proxy.get(f"option {name}")
        if spec is None or spec.sections is None:
            wrong.append(f"{name}: not described")
            continue
        fe, be = spec.sections[1] == "f", spec.sections[3] == "b"
        if fe != ("FE" in caps) or be != ("BE" in caps):
            wrong.append(f"{name}: dump {sorted(caps)} vs mask {spec.sections}")
    assert not wrong, wrong
