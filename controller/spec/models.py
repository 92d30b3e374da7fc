"""Pydantic models of the HAProxyTemplateConfig API (haproxy-template.dev/v1alpha1).

These models are the single source of truth for the API: the CRD's OpenAPI schema is generated
from them (``htc crd``), and attribute docstrings become ``kubectl explain`` text, so every field
carries one. Models are strict (unknown fields are errors, not silently dropped: a typo in a
validation rule must never weaken validation) and camelCase on the wire.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from controller.spec.names import (
    FIELD_SELECTOR_PATTERN,
    LABEL_KEY_PATTERN,
    LABEL_PREFIX_PATTERN,
    LABEL_VALUE_PATTERN,
    MAX_OUTPUT_NAME,
    OUTPUT_NAME_PATTERN,
    check_label_key,
    check_label_value,
    check_output_name,
    field_selector_error,
)

API_GROUP = "haproxy-template.dev"
API_VERSION = "v1alpha1"
KIND = "HAProxyTemplateConfig"
FULL_API_VERSION = f"{API_GROUP}/{API_VERSION}"

_DURATION_RE = re.compile(r"^(?:(\d+(?:\.\d+)?)(ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
VERSION_FAMILY_PATTERN = r"^[0-9]+\.[0-9]+$"
HTTP_URL_PATTERN = r"^https?://"
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
SHA256_HEX_PATTERN = r"^[0-9a-f]{64}$"
PEM_CERT_PATTERN = r"-----BEGIN CERTIFICATE-----"
SHORT_CHECKSUM_PATTERN = r"^[0-9a-f]{12}$"

PATTERN_HINTS = {
    DNS_LABEL_PATTERN: "lowercase letters, digits and '-', starting and ending alphanumeric",
    VERSION_FAMILY_PATTERN: "a major.minor version such as 2.8",
    HTTP_URL_PATTERN: "an http:// or https:// URL",
    REASON_PATTERN: "a CamelCase word such as RenderFailed",
    SHA256_HEX_PATTERN: "64 lowercase hex digits",
    SHORT_CHECKSUM_PATTERN: "12 lowercase hex digits",
}
"""Plain-language meaning of each pattern, used in error messages instead of the regex."""


def parse_duration(value: Any) -> float:
    """Accept Kubernetes-style duration strings ("250ms", "1m30s") or plain seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration must be a string like '250ms' or '5s'")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration must not be negative")
        return float(value)
    if isinstance(value, str) and _DURATION_RE.fullmatch(value.strip()):
        return sum(float(n) * _UNIT[u] for n, u in _DURATION_PART.findall(value))
    raise ValueError(
        f"invalid duration {value!r}: use a number with a unit, e.g. '250ms', '5s', '1m'"
    )


def format_duration(seconds: float) -> str:
    """The shortest duration string that parses back to the same number of seconds."""
    if seconds and seconds < 1:
        return f"{round(seconds * 1000, 3):g}ms"
    return f"{seconds:g}s"


def _wire_duration(value: Any, info: ValidationInfo) -> float:
    """On the wire (JSON mode) only strings are durations, as in the CRD schema.

    Python callers may pass seconds; a manifest may not, so that a file accepted by ``htc`` is
    also accepted by the API server and vice versa.
    """
    if info.mode == "json" and not isinstance(value, str):
        raise ValueError(
            f"a duration is a string with a unit such as '250ms', '5s' or '1m', not {value!r}"
        )
    return parse_duration(value)


Duration = Annotated[
    float,
    BeforeValidator(_wire_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN}),
]
"""Seconds in Python; a duration string such as "250ms" on the wire."""


def _rfc3339(value: str) -> str:
    """Kubernetes rejects a status time that is not RFC 3339; catch it before the API server does."""
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not an RFC 3339 time such as 2024-05-01T12:00:00Z"
        ) from None
    if "T" not in value.upper():
        raise ValueError(f"{value!r} lacks a time of day; use e.g. 2024-05-01T12:00:00Z")
    return value


Timestamp = Annotated[
    str,
    AfterValidator(_rfc3339),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""An RFC 3339 time string, as Kubernetes writes it."""


def _cel(*rules: tuple[str, str]) -> dict[str, Any]:
    """CRD-side copies of a model validator, so the API server refuses what the controller would.

    Each rule here mirrors a ``model_validator`` of the same model; tests evaluate both on the
    same inputs so they cannot drift apart.
    """
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


def _cel_string(text: str) -> str:
    """``text`` as a CEL string literal, for patterns shared with the Python checks."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _field_selector(value: str) -> str:
    problem = field_selector_error(value)
    if problem is not None:
        raise ValueError(problem)
    return value


OutputName = Annotated[str, AfterValidator(check_output_name)]
"""A key of maps, files or certificates: it becomes a file name (see controller.spec.names)."""

LabelKeyName = Annotated[str, AfterValidator(check_label_key)]
"""A label key used as a mapping key; the CRD checks it with a CEL rule on the mapping."""

LabelKey = Annotated[
    str,
    AfterValidator(check_label_key),
    WithJsonSchema({"type": "string", "pattern": LABEL_KEY_PATTERN, "maxLength": 317}),
]
"""A label key as a string value (253-character prefix, '/', 63-character name at most)."""

LabelValue = Annotated[
    str,
    AfterValidator(check_label_value),
    WithJsonSchema({"type": "string", "pattern": LABEL_VALUE_PATTERN, "maxLength": 63}),
]

FieldSelector = Annotated[
    str,
    AfterValidator(_field_selector),
    WithJsonSchema({"type": "string", "pattern": FIELD_SELECTOR_PATTERN}),
]

_OUTPUT_NAMES_RULE = _cel(
    (
        f"self.all(k, size(k) <= {MAX_OUTPUT_NAME} && "
        f"k.matches({_cel_string(OUTPUT_NAME_PATTERN)}))",
        "output names must be file names: a letter or digit first, then letters, digits, "
        f"'.', '_' or '-', at most {MAX_OUTPUT_NAME} characters",
    )
)


def _given(field: str) -> str:
    """CEL for "the field has a value": present and not null.

    A nullable field may hold an explicit null, which ``has()`` counts as present while pydantic
    reads it as None; testing the type as well makes both sides agree.
    """
    return f"(has(self.{field}) && type(self.{field}) != null_type)"


def _nonempty(field: str) -> str:
    """CEL for "the optional string field is set and not empty"."""
    return f"(has(self.{field}) && type(self.{field}) == string && size(self.{field}) > 0)"


def _list_map(*keys: str) -> dict[str, Any]:
    """Mark a list as keyed: the API server then refuses duplicate keys and merges by key."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


def _unique(items: Sequence[Any], attr: str, what: str) -> None:
    keys = [getattr(i, attr) for i in items]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"{what} must be unique: {', '.join(map(str, dupes))}")


class ApiModel(BaseModel):
    """Base of every API model: strict, immutable, camelCase on the wire."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        serialize_by_alias=True,
    )


# --- selectors ---------------------------------------------------------------------------------


class LabelSelectorRequirement(ApiModel):
    """One set-based requirement of a label selector."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0)"
                " : (!has(self.values) || size(self.values) == 0)",
                "values must be non-empty for In and NotIn and empty for Exists and DoesNotExist",
            ),
            (
                f"!self.key.contains('/') || self.key.matches({_cel_string(LABEL_PREFIX_PATTERN)})",
                "the prefix of a label key must not exceed 253 characters",
            ),
        )
    )

    key: LabelKey
    """Label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key relates to the values."""
    values: list[LabelValue] = Field(default_factory=list)
    """Values for In and NotIn; must be empty for Exists and DoesNotExist."""

    @model_validator(mode="after")
    def _values_match_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelector(ApiModel):
    """A Kubernetes label selector; all given terms must match (AND)."""

    match_labels: dict[LabelKeyName, LabelValue] = Field(
        default_factory=dict,
        max_length=64,
        json_schema_extra=_cel(
            (
                f"self.all(k, k.matches({_cel_string(LABEL_KEY_PATTERN)}) && "
                f"(!k.contains('/') || k.matches({_cel_string(LABEL_PREFIX_PATTERN)})))",
                "matchLabels keys must be label keys: an optional DNS subdomain prefix and '/', "
                "then a name of at most 63 letters, digits, '-', '_' or '.'",
            )
        ),
    )
    """Exact label key/value pairs an object must carry."""
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list, max_length=32)
    """Set-based requirements an object's labels must meet."""


# --- CEL validation rules --------------------------------------------------------------------


class RuleSeverity(StrEnum):
    """Whether a failing rule fails validation or only warns."""

    ERROR = "error"
    WARNING = "warning"


class ValidationRule(ApiModel):
    """One CEL assertion. It is inline when it reads only `self`, deferred otherwise."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                f"!({_given('message')} && {_given('messageExpression')})",
                "set message or messageExpression, not both",
            )
        )
    )

    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)
    """Stable name of the rule, reported with every failure (DNS label syntax)."""
    expression: str = Field(min_length=1)
    """CEL expression that must evaluate to true for the rule to pass."""
    message: str | None = None
    """Literal text reported when the rule fails."""
    message_expression: str | None = None
    """CEL expression evaluating to the failure message (instead of a literal message)."""
    when: str | None = None
    """CEL condition; the rule is evaluated only when it is true."""
    severity: RuleSeverity = RuleSeverity.ERROR
    """error fails validation; warning is reported but does not fail it."""

    @model_validator(mode="after")
    def _one_message(self) -> ValidationRule:
        # Two message sources would leave the reader guessing which one a failure shows.
        if self.message is not None and self.message_expression is not None:
            raise ValueError("set message or messageExpression, not both")
        return self


class ValidateBlock(ApiModel):
    """CEL rules attached to an output or a watched collection."""

    when: str | None = None
    """CEL condition for the whole block; rules run only when it is true."""
    rules: list[ValidationRule] = Field(
        default_factory=list, max_length=64, json_schema_extra=_list_map("name")
    )
    """The rules, evaluated in order; names are unique within the block."""

    @model_validator(mode="after")
    def _unique_names(self) -> ValidateBlock:
        _unique(self.rules, "name", "rule names within a block")
        return self


# --- watched resources -----------------------------------------------------------------------


class WatchedResource(ApiModel):
    """A kind of Kubernetes object the templates see, stored under its collection name."""

    api_version: str = Field(min_length=1)
    """apiVersion of the watched kind, e.g. networking.k8s.io/v1."""
    kind: str = Field(min_length=1)
    """Kind to watch, e.g. Ingress."""
    namespace_selector: LabelSelector | None = None
    """Watch only namespaces whose labels match; all namespaces when omitted."""
    label_selector: LabelSelector | None = None
    """Watch only objects whose labels match."""
    field_selector: FieldSelector | None = None
    """Kubernetes field selector passed to the watch, e.g. metadata.name!=default."""
    index_by: list[str] = Field(
        default_factory=lambda: ["metadata.namespace", "metadata.name"], min_length=1
    )
    """Field paths whose values form the store key for lookups with fetch()."""
    admission: bool = False
    """Validate create/update/delete of these objects in the admission webhook."""
    validate_: ValidateBlock | None = Field(default=None, alias="validate")
    """CEL rules every object of this collection must satisfy."""
    ignore_fields: list[str] = Field(default_factory=lambda: ["metadata.managedFields"])
    """Field paths removed before storing (saves memory; changes there trigger nothing)."""


# --- templates -----------------------------------------------------------------------------


class Snippet(ApiModel):
    """A reusable template fragment, usable with include and import."""

    template: str
    """Jinja2 source of the snippet."""


class Output(ApiModel):
    """A rendered output: the main configuration or an auxiliary file."""

    template: str
    """Jinja2 source that renders the file's content."""
    when: str | None = None
    """Jinja2 expression; when it is false the output is skipped (not deployed)."""
    validate_: ValidateBlock | None = Field(default=None, alias="validate")
    """CEL rules the rendered output must satisfy."""


# --- HTTP sources ----------------------------------------------------------------------------


class SecretKeyRef(ApiModel):
    """A reference to a Secret in the config's namespace."""

    name: str = Field(min_length=1)
    """Name of the Secret."""
    key: str | None = None
    """Key inside the Secret; when omitted all keys are used (as HTTP headers)."""


class HttpSource(ApiModel):
    """Remote content fetched over HTTP and exposed to templates as http['<name>']."""

    url: str = Field(pattern=HTTP_URL_PATTERN)
    """URL to fetch (http or https)."""
    refresh_interval: Duration = 300.0
    """How often to refetch; new content is validated before it is used."""
    timeout: Duration = 10.0
    """Time limit of one fetch."""
    max_bytes: int = Field(default=1_048_576, ge=1, le=64 * 1_048_576)
    """Larger responses are rejected, keeping the accepted content."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers."""
    secret_ref: SecretKeyRef | None = None
    """Secret whose keys are sent as headers (credentials stay out of the spec)."""
    ca_bundle: str | None = Field(default=None, max_length=262_144, pattern=PEM_CERT_PATTERN)
    """PEM certificates the https server's certificate must chain to, in place of the
    system's trust store (a private CA); the host name is still checked."""
    critical: bool = False
    """When true, no configuration renders until a first fetch succeeded."""


# --- validation settings ----------------------------------------------------------------------


class SeverityLevel(StrEnum):
    """A severity threshold: findings below it are dropped from reports."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class RuleFilters(ApiModel):
    """Rule id filters: exact ids (E3001), ranges (E3000-E3099) or phases (phase:schema)."""

    include: list[str] = Field(default_factory=list)
    """When non-empty, only matching diagnostics are kept."""
    exclude: list[str] = Field(default_factory=list)
    """Matching diagnostics are removed (counted as suppressed)."""


class FailurePolicy(StrEnum):
    """What a validator's own malfunction means for the verdict."""

    FAIL = "fail"
    IGNORE = "ignore"


class ExternalValidator(ApiModel):
    """A validator outside the controller, run on the complete file set."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                "self.type != 'command' || (has(self.command) && size(self.command) > 0)",
                "type command needs a non-empty command",
            ),
            (
                f"self.type != 'http' || {_nonempty('url')}",
                "type http needs a url",
            ),
        )
    )

    name: str = Field(min_length=1)
    """Name reported with the validator's diagnostics."""
    type: Literal["command", "http"]
    """command runs a program; http POSTs the file set."""
    command: list[str] = Field(default_factory=list)
    """argv of the program (type command); it receives the file set directory as last argument."""
    url: str | None = None
    """Endpoint receiving a POST of the file set as JSON (type http)."""
    ca_bundle: str | None = None
    """PEM CA bundle for verifying the endpoint's certificate (type http)."""
    timeout: Duration = 10.0
    """Time limit; exceeding it is a failure."""
    failure_policy: FailurePolicy = FailurePolicy.FAIL
    """ignore turns crashes, timeouts and garbage output into warnings."""

    @model_validator(mode="after")
    def _shape(self) -> ExternalValidator:
        if self.type == "command" and not self.command:
            raise ValueError("type command needs a non-empty command")
        if self.type == "http" and not self.url:
            raise ValueError("type http needs a url")
        return self


class DirectivePolicy(ApiModel):
    """Exceptions to the directive policy that blocks dangerous directives."""

    allow_directives: list[str] = Field(default_factory=list)
    """Directives allowed despite the policy, e.g. lua-load. Each one widens the attack surface."""


class ValidationSettings(ApiModel):
    """How the validation pipeline judges rendered configurations."""

    haproxy_version: str | None = Field(default=None, pattern=VERSION_FAMILY_PATTERN)
    """Schema family (e.g. "2.8"); detected from the haproxy binary when omitted."""
    haproxy_binary: str | None = None
    """Path of the haproxy binary used for `haproxy -c`."""
    timeout: Duration = 10.0
    """Hard limit for `haproxy -c`; exceeding it means analysis incomplete, never a pass."""
    rule_timeout: Duration = Field(default=2.0, gt=0, le=60)
    """Time budget of CEL rule evaluation per run; exceeding it means analysis incomplete."""
    strict: bool = False
    """Treat warnings as errors."""
    severity_level: SeverityLevel = SeverityLevel.INFO
    """Lowest severity kept in reports."""
    filters: RuleFilters = Field(default_factory=RuleFilters)
    """Rule id filters applied to every report."""
    disable_builtin_rules: bool = False
    """Drop the findings of the built-in syntax and schema rules that filters may drop; HAProxy's
    own check, the security policy, CEL rules and external validators still judge."""
    schema_overlays: list[dict[str, Any]] = Field(
        default_factory=list,
        json_schema_extra={
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    )
    """JSON Schema fragments merged over the bundled HAProxy schemas (may only tighten them)."""
    external_validators: list[ExternalValidator] = Field(
        default_factory=list, max_length=16, json_schema_extra=_list_map("name")
    )
    """Validators run after all built-in stages passed; names are unique."""
    policy: DirectivePolicy = Field(default_factory=DirectivePolicy)
    """Directive policy exceptions."""

    @model_validator(mode="after")
    def _unique_validators(self) -> ValidationSettings:
        _unique(self.external_validators, "name", "externalValidators names")
        return self


# --- render budgets ----------------------------------------------------------------------------


class RenderSettings(ApiModel):
    """Budgets of one render. A render that exceeds one is stopped (E1012) and the candidate
    counts as analysis incomplete, never as a pass; the last good configuration keeps serving."""

    timeout: Duration = 30.0
    """Template execution time per render, all outputs together (10,000 Ingresses take ~2s)."""
    max_output_bytes: int = Field(default=64 * 1_048_576, ge=1024, le=1024 * 1_048_576)
    """Text a render may produce, intermediate text (macro results, set blocks) included."""


# --- reconcile and deploy ---------------------------------------------------------------------


MIN_RENDER_INTERVAL = 0.01
"""Lower bound of ``reconcile.minInterval``: below it a steady stream of changes (or a short
resync) would make the loop render and validate hundreds of times a second."""
MIN_RESYNC_INTERVAL = 1.0
"""Lower bound of a non-zero ``reconcile.resyncInterval``."""


def _at_least(minimum: float, *, zero_disables: bool = False) -> AfterValidator:
    def check(seconds: float) -> float:
        if seconds >= minimum or (zero_disables and seconds == 0):
            return seconds
        floor = format_duration(minimum)
        if zero_disables:
            raise ValueError(f"must be 0s (disabled) or at least {floor}")
        raise ValueError(f"must be at least {floor}")

    return AfterValidator(check)


class ReconcileSettings(ApiModel):
    """Timing of the reconcile loop."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                f"!has(self.minInterval) || duration(self.minInterval) >= "
                f"duration('{format_duration(MIN_RENDER_INTERVAL)}')",
                f"minInterval must be at least {format_duration(MIN_RENDER_INTERVAL)}",
            ),
            (
                "!has(self.resyncInterval) || duration(self.resyncInterval) == duration('0s') "
                f"|| duration(self.resyncInterval) >= "
                f"duration('{format_duration(MIN_RESYNC_INTERVAL)}')",
                "resyncInterval must be 0s (disabled) or at least "
                f"{format_duration(MIN_RESYNC_INTERVAL)}",
            ),
        )
    )

    debounce: Duration = 0.2
    """Quiet time after the last change before a trailing render; 0s renders as soon as
    minInterval allows."""
    min_interval: Annotated[Duration, _at_least(MIN_RENDER_INTERVAL)] = 1.0
    """Minimum time between two renders; at least 10ms."""
    resync_interval: Annotated[Duration, _at_least(MIN_RESYNC_INTERVAL, zero_disables=True)] = 300.0
    """Periodic full render even without changes; 0s disables it, otherwise at least 1s."""


class DeployTarget(ApiModel):
    """Where validated configurations go."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                f"self.type != 'masterSocket' || ({_nonempty('socket')} && {_nonempty('configDir')})",
                "type masterSocket needs socket and configDir",
            ),
            (
                f"self.type != 'dataplaneApi' || {_nonempty('url')}",
                "type dataplaneApi needs url",
            ),
        )
    )

    name: str = Field(min_length=1)
    """Name of the target in logs, metrics and status."""
    type: Literal["masterSocket", "dataplaneApi"]
    """masterSocket reloads through the master CLI; dataplaneApi uses the Dataplane API."""
    socket: str | None = None
    """Path of the master CLI socket (type masterSocket)."""
    config_dir: str | None = None
    """Directory the files are written to (type masterSocket)."""
    url: str | None = None
    """Base URL of the Dataplane API (type dataplaneApi)."""
    credentials_secret_ref: SecretKeyRef | None = None
    """Secret holding Dataplane API credentials."""

    @model_validator(mode="after")
    def _shape(self) -> DeployTarget:
        if self.type == "masterSocket" and not (self.socket and self.config_dir):
            raise ValueError("type masterSocket needs socket and configDir")
        if self.type == "dataplaneApi" and not self.url:
            raise ValueError("type dataplaneApi needs url")
        return self


class DeploySettings(ApiModel):
    """Deploy targets; in local mode the supervised HAProxy is the target."""

    targets: list[DeployTarget] = Field(
        default_factory=list, max_length=16, json_schema_extra=_list_map("name")
    )
    """Every target receives the same validated file set; names are unique."""

    @model_validator(mode="after")
    def _unique_targets(self) -> DeploySettings:
        _unique(self.targets, "name", "deploy target names")
        return self


# --- embedded tests -----------------------------------------------------------------------------


class AssertionType(StrEnum):
    """The checks an embedded test can make."""

    VALID = "valid"
    INVALID = "invalid"
    CONTAINS = "contains"
    NOT_CONTAINS = "notContains"
    MATCHES = "matches"
    MATCH_COUNT = "matchCount"
    MATCH_ORDER = "matchOrder"
    EQUALS = "equals"
    DETERMINISTIC = "deterministic"
    RENDER_ERROR = "renderError"


class TestAssertion(ApiModel):
    """One expectation about a test's render or validation result."""

    type: AssertionType
    """Kind of check."""
    target: str = "haproxy.cfg"
    """Output name the check applies to."""
    value: str | None = None
    """Text for contains/notContains/equals; regular expression for matches/matchCount."""
    patterns: list[str] = Field(default_factory=list)
    """Regular expressions that must match in this order (matchOrder)."""
    count: int | None = Field(default=None, ge=0)
    """Expected number of matches (matchCount)."""
    rule_ids: list[str] = Field(default_factory=list)
    """Rule ids expected in the report (invalid, renderError)."""
    description: str | None = None
    """Shown when the assertion fails."""


class EmbeddedTest(ApiModel):
    """A test of the templates against fixed inputs, run by `htc test`."""

    description: str | None = None
    """What the test proves."""
    fixtures: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict,
        json_schema_extra={
            "additionalProperties": {
                "type": "array",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            }
        },
    )
    """Objects per watched collection the test renders over."""
    http_sources: dict[str, str] = Field(default_factory=dict)
    """Content per HTTP source name."""
    extra_context: dict[str, Any] = Field(
        default_factory=dict, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    """Overrides of spec.extraContext for this test."""
    assertions: list[TestAssertion] = Field(default_factory=list, min_length=1)
    """The checks; all must hold."""


# --- spec and status -----------------------------------------------------------------------


class HAProxyTemplateConfigSpec(ApiModel):
    """What to watch, how to render it, how to validate it and where to deploy it."""

    watched_resources: dict[str, WatchedResource] = Field(default_factory=dict, max_length=64)
    """Collections of watched objects, by the name templates use (resources.<name>)."""
    template_snippets: dict[str, Snippet] = Field(default_factory=dict)
    """Reusable template fragments by name."""
    haproxy_config: Output
    """Template of the main configuration, haproxy.cfg."""
    maps: dict[OutputName, Output] = Field(
        default_factory=dict, max_length=256, json_schema_extra=_OUTPUT_NAMES_RULE
    )
    """Map files by file name, deployed under maps/."""
    files: dict[OutputName, Output] = Field(
        default_factory=dict, max_length=256, json_schema_extra=_OUTPUT_NAMES_RULE
    )
    """General files (error pages, ...) by file name, deployed under files/."""
    certificates: dict[OutputName, Output] = Field(
        default_factory=dict, max_length=256, json_schema_extra=_OUTPUT_NAMES_RULE
    )
    """PEM certificate files by file name, deployed under certs/."""
    http_sources: dict[str, HttpSource] = Field(default_factory=dict)
    """Remote content available to templates."""
    extra_context: dict[str, Any] = Field(
        default_factory=dict, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    """Free-form values templates see as extraContext."""
    validation: ValidationSettings = Field(default_factory=ValidationSettings)
    """Validation pipeline settings."""
    render: RenderSettings = Field(default_factory=RenderSettings)
    """Time and size budgets of a render."""
    reconcile: ReconcileSettings = Field(default_factory=ReconcileSettings)
    """Reconcile loop timing."""
    deploy: DeploySettings = Field(default_factory=DeploySettings)
    """Deploy targets."""
    tests: dict[str, EmbeddedTest] = Field(default_factory=dict)
    """Embedded template tests by name."""


class ConditionStatus(StrEnum):
    """Kubernetes condition status values."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """A Kubernetes-style status condition."""

    type: str = Field(min_length=1, max_length=316)
    """Condition type, e.g. Valid, Deployed, Ready."""
    status: ConditionStatus
    """True, False or Unknown."""
    reason: str = Field(min_length=1, max_length=1024, pattern=REASON_PATTERN)
    """CamelCase machine-readable reason."""
    message: str = Field(default="", max_length=32768)
    """Human-readable details."""
    last_transition_time: Timestamp
    """RFC 3339 time the status last changed."""
    observed_generation: int | None = None
    """Generation of the spec this condition was computed for."""


SHORT_CHECKSUM_LEN = 12


class LastValidated(ApiModel):
    """The file set that last passed every validation stage."""

    checksum: str = Field(pattern=SHA256_HEX_PATTERN)
    """sha256 of the validated file set (hex)."""
    short_checksum: str | None = Field(default=None, pattern=SHORT_CHECKSUM_PATTERN)
    """First 12 hex digits of checksum, for `kubectl get`; filled in from checksum when omitted."""
    at: Timestamp
    """RFC 3339 time of the verdict."""
    haproxy_version: str = Field(min_length=1)
    """Version of the haproxy binary that checked it."""

    @model_validator(mode="before")
    @classmethod
    def _fill_short_checksum(cls, data: Any) -> Any:
        # A printer column cannot slice a string, so the short form is stored beside the full one.
        if isinstance(data, dict):
            # The wire name unless the caller used the Python name (both are accepted).
            key = "short_checksum" if "short_checksum" in data else "shortChecksum"
            full = data.get("checksum")
            if data.get(key) is None and isinstance(full, str):
                data = {**data, key: full[:SHORT_CHECKSUM_LEN]}
        return data

    @model_validator(mode="after")
    def _short_matches(self) -> LastValidated:
        if self.short_checksum != self.checksum[:SHORT_CHECKSUM_LEN]:
            raise ValueError("shortChecksum must be the first 12 hex digits of checksum")
        return self


class DiagnosticsSummary(ApiModel):
    """Counts of the latest report's findings."""

    errors: int = 0
    """Findings at error or fatal severity."""
    warnings: int = 0
    """Findings at warning severity."""
    infos: int = 0
    """Findings at info severity."""
    rule_ids: list[str] = Field(default_factory=list, max_length=20)
    """Distinct rule ids in the latest report (at most 20)."""


class LastRejection(ApiModel):
    """The latest configuration that failed validation (nothing of it was deployed)."""

    checksum: str | None = Field(default=None, pattern=SHA256_HEX_PATTERN)
    """sha256 of the rejected file set, when it rendered."""
    at: Timestamp
    """RFC 3339 time of the verdict."""
    rule_ids: list[str] = Field(default_factory=list, max_length=20)
    """Distinct rule ids of its errors (at most 20)."""
    messages: list[str] = Field(default_factory=list, max_length=5)
    """Its first error messages (at most 5)."""


class TargetState(ApiModel):
    """One HAProxy pod of the fleet topology and its last deploy."""

    pod: str = Field(min_length=1, max_length=253)
    """Name of the pod (in the HAProxy namespace)."""
    checksum: str | None = Field(default=None, pattern=SHA256_HEX_PATTERN)
    """sha256 of the validated file set the pod was last confirmed to run; absent while
    nothing is confirmed (a pod that just joined, or one whose API failed mid-way)."""
    last_deployed: Timestamp | None = None
    """RFC 3339 time of the last deploy that left the pod running a validated set."""
    error: str | None = Field(default=None, max_length=1024)
    """The first error of the last attempt, when it failed."""


class HttpSourceStatus(ApiModel):
    """What the controller holds of one HTTP source."""

    name: str = Field(min_length=1)
    """The httpSources entry."""
    accepted_checksum: str | None = Field(default=None, pattern=SHA256_HEX_PATTERN)
    """sha256 of the content templates read (the last that passed validation)."""
    last_fetch: Timestamp | None = None
    """RFC 3339 time of the latest fetch attempt."""
    last_error: str | None = Field(default=None, max_length=300)
    """Why the latest fetch failed, if it did."""
    pending_rejected: str | None = Field(default=None, pattern=SHA256_HEX_PATTERN)
    """sha256 of the latest fetched content that failed validation."""


class HAProxyTemplateConfigStatus(ApiModel):
    """Observed state written by the controller."""

    observed_generation: int | None = None
    """Generation of the spec last processed."""
    conditions: list[Condition] = Field(
        default_factory=list, max_length=16, json_schema_extra=_list_map("type")
    )
    """Latest observations (Valid, Deployed, Ready); one per type."""
    last_validated: LastValidated | None = None
    """The file set that last passed validation."""
    diagnostics_summary: DiagnosticsSummary | None = None
    """Summary of the latest report."""
    last_rejection: LastRejection | None = None
    """The latest configuration that failed validation; the last validated one keeps serving."""
    warnings: list[str] = Field(default_factory=list, max_length=20)
    """Warnings of the latest valid report (at most 20), as rule id and message."""
    http_sources: list[HttpSourceStatus] = Field(
        default_factory=list, max_length=64, json_schema_extra=_list_map("name")
    )
    """The HTTP sources: accepted content, latest fetch and latest rejection."""
    targets: list[TargetState] = Field(
        default_factory=list, max_length=1000, json_schema_extra=_list_map("pod")
    )
    """The fleet topology's HAProxy pods (`htc run --deploy dataplane`), one per pod the
    leader deploys to; empty in the embedded topology."""

    @model_validator(mode="after")
    def _one_condition_per_type(self) -> HAProxyTemplateConfigStatus:
        _unique(self.conditions, "type", "condition types")
        _unique(self.targets, "pod", "target pods")
        return self


class ObjectMeta(BaseModel):
    """The subset of Kubernetes metadata the controller reads; the rest passes through."""

    model_config = ConfigDict(
        extra="allow", frozen=True, populate_by_name=True, use_attribute_docstrings=True
    )

    name: str = Field(min_length=1)
    """Name of the object."""
    namespace: str | None = None
    """Namespace of the object; the resource is namespaced."""
    generation: int | None = None
    """Sequence number of the spec, set by the API server; status reports the one it saw."""


class HAProxyTemplateConfig(ApiModel):
    """The HAProxyTemplateConfig resource."""

    api_version: Literal["haproxy-template.dev/v1alpha1"] = "haproxy-template.dev/v1alpha1"
    """Versioned schema of this representation: haproxy-template.dev/v1alpha1."""
    kind: Literal["HAProxyTemplateConfig"] = "HAProxyTemplateConfig"
    """Kind of the object: HAProxyTemplateConfig."""
    metadata: ObjectMeta
    """Standard Kubernetes object metadata."""
    spec: HAProxyTemplateConfigSpec
    """Desired behaviour of the controller."""
    status: HAProxyTemplateConfigStatus | None = None
    """Observed state, written by the controller."""
