"""`htc lint`: every static check, on specs built in code and on real YAML files."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from controller.cli import main
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.validation.lint import lint_report, lint_spec

CFG = "global\n    maxconn 10\n\nfrontend fe\n    bind 127.0.0.1:18080\n"


def spec(**doc: Any) -> HAProxyTemplateConfigSpec:
    doc.setdefault("haproxyConfig", {"template": CFG})
    return HAProxyTemplateConfigSpec.model_validate(doc)


def ids(s: HAProxyTemplateConfigSpec) -> list[str]:
    return sorted(d.rule_id for d in lint_spec(s).diagnostics)


def messages(s: HAProxyTemplateConfigSpec, rule_id: str) -> list[str]:
    return [d.message for d in lint_spec(s).diagnostics if d.rule_id == rule_id]


def test_a_clean_spec_has_no_findings() -> None:
    assert ids(spec()) == []
    assert lint_report(lint_spec(spec())).valid


def test_template_syntax_and_undefined_snippets() -> None:
    s = spec(haproxyConfig={"template": CFG + "{% if %}\n"})
    assert "E1001" in ids(s)
    s = spec(haproxyConfig={"template": CFG + "{% include 'nope' %}\n"})
    assert "E1007" in ids(s)


def test_render_cycles_are_errors() -> None:
    s = spec(
        maps={
            "a.map": {"template": "{{ outputs['b.map'].content }}"},
            "b.map": {"template": "{{ outputs['a.map'].content }}"},
        }
    )
    assert "E1005" in ids(s)
    assert not lint_report(lint_spec(s)).valid


def test_unused_snippets() -> None:
    s = spec(
        templateSnippets={
            "used": {"template": "x"},
            "via-used": {"template": "y"},
            "orphan": {"template": "{% include 'also-orphan' %}"},
            "also-orphan": {"template": "z"},
        },
        haproxyConfig={"template": CFG + "{% include 'used' %}\n"},
    )
    s = s.model_copy(
        update={
            "template_snippets": {
                **s.template_snippets,
                "used": s.template_snippets["used"].model_copy(
                    update={"template": "{% include 'via-used' %}"}
                ),
            }
        }
    )
    found = messages(s, "W8050")
    assert found == [
        "snippet 'also-orphan' is not included or imported by any output",
        "snippet 'orphan' is not included or imported by any output",
    ]


def test_policy_denied_directives_in_template_text() -> None:
    tpl = CFG.replace("    maxconn 10\n", "    maxconn 10\n    lua-load /etc/x.lua\n")
    tpl += "program sidecar\n    command /bin/true\n"
    tpl += "backend be\n    option external-check\n    # setenv X 1 (a comment)\n"
    tpl += "    {{ 'setenv' }} X 1\n"  # produced by an expression: the syntax stage's business
    s = spec(haproxyConfig={"template": tpl})
    found = messages(s, "W8051")
    assert len(found) == 3
    assert "haproxy.cfg line 3 writes 'lua-load'" in found[0]
    assert "'program'" in found[1] and "'external-check'" in found[2]
    allowed = spec(
        haproxyConfig={"template": tpl},
        validation={"policy": {"allowDirectives": ["lua-load", "program", "external-check"]}},
    )
    assert messages(allowed, "W8051") == []


def test_denied_directives_behind_jinja_tags_and_environment_expansion() -> None:
    tpl = CFG + "    {% if true %}lua-load /etc/x.lua{% endif %}\n"  # a tag writes nothing
    tpl += "    {# note #}setenv X 1\n"
    tpl += "    {{ prefix }}lua-load /etc/y.lua\n"  # the expression's text comes first
    tpl += '    log "${SYSLOG}:514" local0\n'  # expanded from the environment
    tpl += '    user "\\$HOME" # "$HOME"\n'  # escaped, then a comment
    tpl += "    group '$HOME'\n"  # single quotes are literal
    tpl += "    {%- set multi\n        = 1 %}lua-load /etc/z.lua\n"  # a tag over two lines
    found = messages(spec(haproxyConfig={"template": tpl}), "W8051")
    assert [m.split(", which")[0] for m in found] == [
        "haproxy.cfg line 6 writes 'lua-load'",
        "haproxy.cfg line 7 writes 'setenv'",
        "haproxy.cfg line 9 writes an environment variable in double quotes",
        "haproxy.cfg line 13 writes 'lua-load'",
    ]
    assert "E2106" in found[2] and "allowDirectives: [env-expansion]" in found[2]
    allowed = spec(
        haproxyConfig={"template": tpl},
        validation={"policy": {"allowDirectives": ["env-expansion"]}},
    )
    assert len(messages(allowed, "W8051")) == 3


def test_cel_compile_and_reference_errors() -> None:
    rules = [
        {"name": "syntax", "expression": "self.("},
        {"name": "unknown", "expression": "outputs['missing.map'].content == ''"},
        {"name": "type", "expression": "self.lines.size()"},
    ]
    s = spec(haproxyConfig={"template": CFG, "validate": {"rules": rules}})
    assert [i for i in ids(s) if i.startswith("E5")] == ["E5001", "E5002", "E5009"]


def test_when_misuse() -> None:
    s = spec(
        haproxyConfig={"template": CFG, "when": "true"},
        maps={"a.map": {"template": "k v\n", "when": "false"}},
        watchedResources={
            "ingresses": {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "validate": {
                    "when": "true",
                    "rules": [{"name": "r", "expression": "true", "when": "'text'"}],
                },
            }
        },
    )
    found = ids(s)
    assert found.count("W8054") == 3  # haproxyConfig, a.map, the ingresses block
    assert "W8058" in found  # a `when` on the main configuration
    assert "E5009" in found  # a rule `when` that is not a bool


def test_deferred_validation_advisory_per_owner() -> None:
    s = spec(
        haproxyConfig={
            "template": CFG,
            "validate": {
                "rules": [
                    {"name": "inline", "expression": "self.content != ''"},
                    {"name": "reads-map", "expression": "outputs['a.map'].content != ''"},
                    {"name": "reads-extra", "expression": "extraContext.x == 1"},
                ]
            },
        },
        maps={"a.map": {"template": "k v\n"}},
    )
    [advice] = messages(s, "I8052")
    assert advice.startswith(
        "deferred-validation-not-fail-fast: output haproxy.cfg has 2 deferred rule(s) ("
    )
    assert (
        "reads-map reads outputs['a.map']" in advice and "reads-extra reads extraContext" in advice
    )


def test_dynamic_output_references_are_listed() -> None:
    s = spec(
        maps={"a.map": {"template": "k v\n"}},
        haproxyConfig={"template": CFG + "{% set n = 'a.map' %}# {{ outputs[n].path }}\n"},
    )
    assert "I8053" in ids(s)


def test_embedded_test_checks_are_warnings() -> None:
    s = spec(
        tests={
            "t": {
                "fixtures": {"nope": [{"metadata": {"name": "x"}}]},
                "assertions": [
                    {"type": "contains", "target": "missing.map", "value": "x"},
                    {"type": "matches", "value": "("},
                    {"type": "matchCount", "value": "x"},
                    {"type": "invalid", "ruleIds": ["E9998"]},
                ],
            }
        }
    )
    found = ids(s)
    assert found == ["W8055", "W8056", "W8057", "W8057", "W8057"]
    assert lint_report(lint_spec(s)).valid  # warnings: a broken test never blocks a deploy


def test_the_local_engine_lints_new_specs(haproxy_bin: str) -> None:
    """Reconcile refuses a new spec whose lint has errors; the local engine supplies it."""
    from controller.triggers import default_engine

    bad = spec(
        haproxyConfig={"template": CFG, "validate": {"rules": [{"name": "x", "expression": "("}]}}
    )
    engine = default_engine(haproxy_bin)(bad)
    assert engine.lint is not None
    assert "E5001" in {d.rule_id for d in engine.lint(bad)}


# --- the command ----------------------------------------------------------------------------


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["lint", *args], catch_exceptions=False)


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(body))
    return path


HEADER = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: t
spec:
"""


def test_cli_points_at_the_yaml_line_of_a_bad_rule(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER
        + """\
  haproxyConfig:
    template: |
      global
    validate:
      rules:
        - name: fine
          expression: self.content != ''
        - name: broken
          expression: self.content +
""",
    )
    result = invoke(str(path), "--format", "json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    [d] = [d for d in doc["diagnostics"] if d["ruleId"] == "E5001"]
    assert d["location"] == {"file": str(path), "line": 14}
    assert d["message"].startswith("spec.haproxyConfig.validate.rules[1].expression:")


def test_cli_exit_codes_and_formats(tmp_path: Path, quickstart_dir: Path) -> None:
    ok = invoke(str(quickstart_dir / "config.yaml"))
    assert ok.exit_code == 0, ok.output
    # the quickstart is lint-clean: nothing but the summary line
    assert ok.stdout.splitlines() == [ok.stdout.strip()] and "0 warnings" in ok.stdout
    advice = invoke(str(quickstart_dir / "config.yaml"), "--severity", "info")
    assert "I8052" in advice.stdout  # its deferred rules, as advice on request
    junit = invoke(str(quickstart_dir / "config.yaml"), "--format", "junit")
    assert ET.fromstring(junit.stdout).tag == "testsuites"
    sarif = json.loads(invoke(str(quickstart_dir / "config.yaml"), "--format", "sarif").stdout)
    assert sarif["version"] == "2.1.0"
    strict = invoke(
        str(write(tmp_path, HEADER + "  haproxyConfig:\n    template: x\n    when: 'true'\n")),
        "--strict",
    )
    assert strict.exit_code == 1  # W8054/W8058 promoted
    invalid = invoke(str(write(tmp_path, HEADER + "  haproxyConfig: {}\n")))
    assert invalid.exit_code == 2 and "E8001" in invalid.stdout  # as htc validate says
    unreadable = invoke(str(write(tmp_path, "a: [\n")))
    assert unreadable.exit_code == 2 and "E8002" in unreadable.stderr


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "junit"])
def test_cli_report_is_identical_across_runs(fmt: str, quickstart_dir: Path) -> None:
    first = invoke(str(quickstart_dir / "config.yaml"), "--format", fmt).stdout
    second = invoke(str(quickstart_dir / "config.yaml"), "--format", fmt).stdout

    def strip(text: str) -> str:  # timings differ between runs
        return "\n".join(
            x for x in text.splitlines() if "Ms" not in x and " ms" not in x and "time=" not in x
        )

    assert strip(first) == strip(second)


UNDEFINED = (
    HEADER
    + """\
  templateSnippets:
    piece:
      template: |
        server {{ name }} {{ adress }}
  haproxyConfig:
    template: |
      {% set limit = 10 %}
      {% macro line(x) %}{{ x }}{% endmacro %}
      {% for name in ['a'] %}{% set address = '10.0.0.1:80' %}{% include 'piece' %}{% endfor %}
      {{ line(limit) }} {{ extraContext.listen }} {{ resources | length }}
      {{ optional | default('') }}{% if other is defined %}{{ other }}{% endif %}
      {{ limt }}
"""
)


def test_undefined_names_are_warnings_with_the_template_line(tmp_path: Path) -> None:
    doc = json.loads(invoke(str(write(tmp_path, UNDEFINED)), "--format", "json").stdout)
    found = {
        (d["templateLocation"]["template"], d["templateLocation"]["line"]): d["message"]
        for d in doc["diagnostics"]
        if d["ruleId"] == "W8059"
    }
    # a snippet may read what its includer declares ('name'), not what nobody does
    assert set(found) == {("piece", 1), ("haproxy.cfg", 6)}
    assert "'adress'" in found[("piece", 1)] and "did you mean 'address'?" in found[("piece", 1)]
    assert (
        "'limt'" in found[("haproxy.cfg", 6)]
        and "did you mean 'limit'?" in found[("haproxy.cfg", 6)]
    )


def test_undefined_names_are_analysed_once_per_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """The analysis is kept per template source: linting an unchanged spec again parses
    nothing, while a changed source and a changed set of snippets are judged afresh."""
    from controller.render.environment import TemplateEnvironment
    from controller.validation.lint import templates as lint_templates

    reads = CFG + "{{ sized }}\n"
    whens = {"a.map": {"template": "k v\n", "when": "'always'"}}
    first = spec(haproxyConfig={"template": reads}, maps=whens)
    assert [m.split(":")[0] for m in messages(first, "W8059")] == ["haproxy.cfg"]
    assert len(messages(first, "W8054")) == 1

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("an unchanged source was parsed again")

    with monkeypatch.context() as m:
        m.setattr(TemplateEnvironment, "parse", refuse)
        m.setattr(lint_templates, "parse_expression", refuse)  # the `when`s: W8054
        again = spec(haproxyConfig={"template": reads}, maps=whens)
        assert len(messages(again, "W8059")) == len(messages(again, "W8054")) == 1

    declares = CFG + "{% set sized = 1 %}{{ sized }}\n"
    assert messages(spec(haproxyConfig={"template": declares}), "W8059") == []
    # the same snippet source, now includable from a template that declares what it reads
    snippet = {"piece": {"template": "{{ sized }}\n"}}
    alone = spec(haproxyConfig={"template": CFG}, templateSnippets=snippet)
    assert [m.split(":")[0] for m in messages(alone, "W8059")] == ["piece"]
    included = CFG + "{% set sized = 1 %}{% include 'piece' %}\n"
    with_includer = spec(haproxyConfig={"template": included}, templateSnippets=snippet)
    assert messages(with_includer, "W8059") == []
