"""Loading: bad input becomes diagnostics naming the wire field path and its YAML line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.diagnostics import Diagnostic, Phase, Severity
from controller.spec import HAProxyTemplateConfig, load_config, parse_config, read_documents

HEAD = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: demo
  namespace: web
spec:
"""
"""Six lines; a spec body written after it starts on line 7."""


def load(tmp_path: Path, text: str) -> tuple[HAProxyTemplateConfig | None, list[Diagnostic]]:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_config(path)


def spec(tmp_path: Path, body: str) -> list[tuple[int | None, str]]:
    """(line, message) of each diagnostic for a spec body (indented under spec:)."""
    config, diags = load(tmp_path, HEAD + textwrap.indent(textwrap.dedent(body), "  "))
    assert config is None
    for d in diags:
        assert d.rule_id == "E8001"
        assert d.phase is Phase.SPEC and d.severity is Severity.ERROR
        assert d.location is not None and d.location.file == str(tmp_path / "config.yaml")
        assert d.object is not None and (d.object.name, d.object.namespace) == ("demo", "web")
    return [(d.location.line if d.location else None, d.message) for d in diags]


def test_a_valid_file_loads(tmp_path: Path) -> None:
    config, diags = load(tmp_path, HEAD + "  haproxyConfig: {template: 'global'}\n")
    assert diags == []
    assert config is not None and config.spec.haproxy_config.template == "global"


def test_unknown_field_names_the_path_and_suggests_the_right_name(tmp_path: Path) -> None:
    assert spec(
        tmp_path,
        """\
        haproxyConfig: {template: x}
        watchedResources:
          ingresses:
            apiVersion: networking.k8s.io/v1
            kind: Ingress
            indexby: [metadata.name]
            ignore_fields: []
        """,
    ) == [
        (12, "spec.watchedResources.ingresses.indexby: unknown field (did you mean indexBy?)"),
        (
            13,
            "spec.watchedResources.ingresses.ignore_fields: "
            "unknown field (fields are camelCase: ignoreFields)",
        ),
    ]


def test_unknown_field_without_a_near_name_lists_the_known_ones(tmp_path: Path) -> None:
    [(line, msg)] = spec(tmp_path, "haproxyConfig: {template: x}\nreconcile: {jitter: 1s}\n")
    assert line == 8
    assert msg == (
        "spec.reconcile.jitter: unknown field; "
        "ReconcileSettings has: debounce, minInterval, resyncInterval"
    )


def test_wrong_types_name_expected_and_found(tmp_path: Path) -> None:
    assert spec(
        tmp_path,
        """\
        haproxyConfig:
          template: 42
        watchedResources:
          ingresses:
            apiVersion: networking.k8s.io/v1
            kind: Ingress
            indexBy: metadata.name
            admission: "true"
        """,
    ) == [
        (8, "spec.haproxyConfig.template: must be a string, got the number 42"),
        (
            13,
            'spec.watchedResources.ingresses.indexBy: must be a list, got the string "metadata.name"',
        ),
        (
            14,
            'spec.watchedResources.ingresses.admission: must be true or false, got the string "true"',
        ),
    ]


def test_bad_durations(tmp_path: Path) -> None:
    assert spec(
        tmp_path,
        """\
        haproxyConfig: {template: x}
        reconcile:
          debounce: fast
          minInterval: 5
        """,
    ) == [
        (
            9,
            "spec.reconcile.debounce: invalid duration 'fast': "
            "use a number with a unit, e.g. '250ms', '5s', '1m'",
        ),
        (
            10,
            "spec.reconcile.minInterval: a duration is a string with a unit "
            "such as '250ms', '5s' or '1m', not 5",
        ),
    ]


def test_bad_rule_name(tmp_path: Path) -> None:
    assert spec(
        tmp_path,
        """\
        haproxyConfig:
          template: x
          validate:
            rules:
              - expression: "true"
                name: Has_Global
        """,
    ) == [
        (
            12,
            "spec.haproxyConfig.validate.rules[0].name: must be lowercase letters, digits and "
            """'-', starting and ending alphanumeric, got the string "Has_Global\"""",
        )
    ]


def test_rule_with_two_messages(tmp_path: Path) -> None:
    assert spec(
        tmp_path,
        """\
        haproxyConfig:
          template: x
          validate:
            rules:
              - name: a
                expression: "true"
              - name: b
                expression: "true"
                message: m
                messageExpression: "'m'"
        """,
    ) == [(13, "spec.haproxyConfig.validate.rules[1]: set message or messageExpression, not both")]


def test_external_validator_without_command(tmp_path: Path) -> None:
    assert spec(
        tmp_path,
        """\
        haproxyConfig: {template: x}
        validation:
          externalValidators:
            - name: lint
              type: command
              timeout: 1s
        """,
    ) == [(10, "spec.validation.externalValidators[0]: type command needs a non-empty command")]


def test_missing_required_field_points_at_its_parent(tmp_path: Path) -> None:
    assert spec(
        tmp_path,
        """\
        maps:
          hosts.map:
            when: "true"
        """,
    ) == [
        (6, "spec.haproxyConfig: required field is missing"),
        (8, 'spec.maps["hosts.map"].template: required field is missing'),
    ]


def test_enum_values_are_listed(tmp_path: Path) -> None:
    [(line, msg)] = spec(
        tmp_path,
        "haproxyConfig: {template: x}\nvalidation:\n  severityLevel: debug\n",
    )
    assert line == 9
    assert msg == (
        "spec.validation.severityLevel: must be 'error', 'warning' or 'info', "
        'got the string "debug"'
    )


def test_null_on_a_non_nullable_field_means_absent(tmp_path: Path) -> None:
    # The API server prunes such nulls before validation; so do we.
    config, diags = load(
        tmp_path,
        HEAD + "  haproxyConfig: {template: x}\n  maps: null\n  reconcile: {debounce: null}\n",
    )
    assert diags == []
    assert config is not None and config.spec.maps == {} and config.spec.reconcile.debounce == 0.2


def test_unquoted_timestamps_stay_strings(tmp_path: Path) -> None:
    config, diags = load(
        tmp_path,
        HEAD
        + "  haproxyConfig: {template: x}\n"
        + "status:\n  conditions:\n"
        + "    - {type: Valid, status: 'True', reason: Ok, lastTransitionTime: 2024-05-01T12:00:00Z}\n",
    )
    assert diags == []
    assert config is not None and config.status is not None
    assert config.status.conditions[0].last_transition_time == "2024-05-01T12:00:00Z"


# --- which document, and unreadable files ------------------------------------------------


def test_the_config_is_picked_from_a_multi_document_file(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n# comment\n---\n" + HEAD
    text += "  haproxyConfig: {template: x}\n  reconcile: {debounce: never}\n"
    config, [d] = load(tmp_path, text)
    assert config is None
    assert d.location is not None and d.location.line == 14  # absolute line in the file
    assert d.message.startswith("spec.reconcile.debounce: invalid duration 'never'")


def test_no_config_document_is_an_error(tmp_path: Path) -> None:
    config, [d] = load(tmp_path, "kind: Service\n---\nkind: Ingress\n")
    assert config is None and d.rule_id == "E8004"
    assert (
        "no document with kind: HAProxyTemplateConfig (found kinds: Ingress, Service)" in d.message
    )


def test_two_config_documents_are_an_error(tmp_path: Path) -> None:
    body = HEAD + "  haproxyConfig: {template: x}\n"
    config, [d] = load(tmp_path, body + "---\n" + body)
    assert config is None and d.rule_id == "E8004"
    assert "2 HAProxyTemplateConfig documents (at lines 1, 9); keep exactly one" in d.message
    assert d.location is not None and d.location.line == 9


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (HEAD + "  haproxyConfig: {template: x\n", 8, "expected ',' or '}'"),
        (HEAD + "  haproxyConfig:\n    template: a\n   bad: indent\n", 9, "expected <block end>"),
        (HEAD + "  maps: {}\n  maps: {}\n", 8, "duplicate key 'maps' (first defined at line 7)"),
        ("a: &x [*x]\n", 1, "recursive alias"),
        ("\t- tab\n", 1, "found character '\\t'"),
        ("---\na: 1\n---\nb: !!int abc\n", 4, "cannot read a tagged value: invalid literal"),
        ("a: !!timestamp nope\n", 1, "cannot read a tagged value"),
        ("a: !custom x\n", 1, "could not determine a constructor for the tag '!custom'"),
        ("[" * 1500 + "\n", None, "nesting too deep"),
    ],
)
def test_invalid_yaml_is_e8002_with_line(tmp_path: Path, text: str, line: int, reason: str) -> None:
    config, [d] = load(tmp_path, text)
    assert config is None and d.rule_id == "E8002" and d.phase is Phase.SPEC
    assert d.location is not None and d.location.line == line
    assert reason in d.message


def test_alias_bomb_is_stopped(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    config, [d] = load(tmp_path, "\n".join(lines) + "\n")
    assert config is None and d.rule_id == "E8002"
    assert "too large" in d.message


def test_unreadable_files(tmp_path: Path) -> None:
    config, [d] = load_config(tmp_path / "missing.yaml")
    assert config is None and d.rule_id == "E8002" and "No such file" in d.message
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00kind")
    config, [d] = load_config(tmp_path / "bin.yaml")
    assert config is None and d.rule_id == "E8002" and "cannot read" in d.message


# --- parse_config: the operator's and admission's door -----------------------------------


def test_parse_config_without_file_reports_paths_only() -> None:
    doc = {
        "apiVersion": "haproxy-template.dev/v1alpha1",
        "kind": "HAProxyTemplateConfig",
        "metadata": {"name": "c", "namespace": "n"},
        "spec": {"haproxyConfig": {"template": "x"}, "deploy": {"targets": [{"name": "t"}]}},
    }
    config, [d] = parse_config(doc)
    assert config is None and d.location is None
    assert d.message == "spec.deploy.targets[0].type: required field is missing"
    assert d.object is not None and d.object.kind == "HAProxyTemplateConfig"


def test_parse_config_uses_given_lines() -> None:
    doc = {"metadata": {"name": "c"}, "spec": {"haproxyConfig": {"template": 1}}}
    lines: dict[tuple[str | int, ...], int] = {
        ("spec",): 40,
        ("spec", "haproxyConfig"): 41,
        ("spec", "haproxyConfig", "template"): 42,
    }
    _, [d] = parse_config(doc, file="cr.yaml", lines=lines)
    assert d.location is not None and (d.location.file, d.location.line) == ("cr.yaml", 42)


@pytest.mark.parametrize(
    "doc",
    [
        [],
        "text",
        None,
        {"spec": {1: 2}},
        {"metadata": {"name": "x"}, "spec": {"extraContext": {"b": b"x"}}},
    ],
)
def test_parse_config_never_raises(doc: object) -> None:
    config, diags = parse_config(doc)  # type: ignore[arg-type]
    assert config is None and diags and all(d.rule_id == "E8001" for d in diags)


def test_wrong_api_version_is_named(tmp_path: Path) -> None:
    text = HEAD.replace("v1alpha1", "v1") + "  haproxyConfig: {template: x}\n"
    _, [d] = load(tmp_path, text)
    assert d.location is not None and d.location.line == 1
    assert d.message == (
        "apiVersion: must be 'haproxy-template.dev/v1alpha1', "
        'got the string "haproxy-template.dev/v1"'
    )


# --- never a traceback -------------------------------------------------------------------

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
KEYS = st.sampled_from(["spec", "haproxyConfig", "template", "maps", "reconcile", "debounce", "x"])


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=":-[]{}&*!|>'\"#\n\t abc01", max_size=80))
def test_read_documents_never_raises(text: str) -> None:
    docs, diags = read_documents(text, "f.yaml")
    assert not (docs and diags)
    assert all(d.rule_id == "E8002" for d in diags)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(KEYS, JSONISH | st.dictionaries(KEYS, JSONISH, max_size=3), max_size=4))
def test_parse_config_never_raises_on_any_shape(doc: dict[str, object]) -> None:
    config, diags = parse_config({"metadata": {"name": "x"}, **doc})
    assert (config is None) == bool(diags)
