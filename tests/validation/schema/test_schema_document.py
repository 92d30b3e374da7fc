"""The generated document is an honest JSON Schema: validating a configuration's parsed form
against the whole document with a plain validator flags exactly the directives the stage
reports. The document is closed (it refuses what it does not describe); the stage adds what
JSON Schema cannot say: 'named defaults only', which rule id, and which findings are only
warnings (unknown names, and arguments HAProxy itself does not refuse)."""

from __future__ import annotations

from collections.abc import Callable

import jsonschema

from controller.validation.schema import SchemaEngine, family_schema
from controller.validation.syntax import ParsedConfig

Parse = Callable[[str], ParsedConfig]

TEXT = """\
global
    maxconn 1000
    maxconm 1000
    nbproc 2
    tune.http.maxhdr 0
defaults base
    mode http
    timeout client 30s
    timeout bogus 1s
    no option httplog
    no option redispatch
frontend fe
    bind 127.0.0.1:80 ssl-min-ver TLSv1.2 bogus
    bind 127.0.0.1:81 maxconn
    http-request set-header X-A b if { path /a }
    http-request set-headr X-A b
    balance roundrobin
    server s1 127.0.0.1:1
backend be
    server s1 10.0.0.1:80 check weight 300
    server s2 10.0.0.2:80 check weight 30 inter 2s
    log 127.0.0.1:514 local0
    log 127.0.0.1:514 nonsense
    mode tcp
    timeout server 5s 5s
"""


#: Warnings for what the closed document refuses but HAProxy may accept.
CLOSED_WORLD = {"W3015", "W3016", "W3017"}


def test_document_and_stage_agree_on_errors(cfg: Parse) -> None:
    parsed = cfg(TEXT)
    engine = SchemaEngine("2.8")
    stage_lines = {
        d.location.line
        for d in engine.diagnostics(parsed, "haproxy.cfg")
        if d.location and (d.severity.value == "error" or d.rule_id in CLOSED_WORLD)
    }
    instance = engine.instance(parsed)
    validator = jsonschema.Draft7Validator(family_schema("2.8"))
    doc_lines = set()
    for error in validator.iter_errors(instance):
        path = list(error.absolute_path)
        # <section kind>, <section index>, "directives", <directive index>, ...
        if len(path) < 4:
            continue
        kind, s_index, _, d_index = path[:4]
        section = [s for s in parsed.sections if s.keyword == kind][s_index]
        doc_lines.add(section.directives[d_index].line)
    assert stage_lines == doc_lines
    assert len(stage_lines) == 12
