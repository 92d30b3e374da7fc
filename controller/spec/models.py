"""Pydantic models of the HAProxyTemplateConfig API (haproxy-template.dev/v1alpha1).

These models are the single source of truth for the API: the CRD's OpenAPI schema is generated
from them (``htc crd``), and attribute docstrings become ``kubectl explain`` text, so every field
carries one. Models are strict (unknown fields are errors, not silently dropped: a typo in a
validation rule must never weaken validation) and camelCase on the wire.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

API_GROUP = "haproxy-template.dev"
API_VERSION = "v1alpha1"
KIND = "HAProxyTemplateConfig"
FULL_API_VERSION = f"{API_GROUP}/{API_VERSION}"

_DURATION_RE = re.compile(r"^(?:(\d+(?:\.\d+)?)(ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"


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
    if seconds and seconds < 1:
        return f"{round(seconds * 1000, 3):g}ms"
    return f"{seconds:g}s"


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN}),
]
"""Seconds in Python; a duration string such as "250ms" on the wire."""


class ApiModel(BaseModel):
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

    key: str
    """Label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key relates to the values."""
    values: list[str] = Field(default_factory=list)
    """Values for In and NotIn; must be empty for Exists and DoesNotExist."""


class LabelSelector(ApiModel):
    """A Kubernetes label selector; all given terms must match (AND)."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    """Exact label key/value pairs an object must carry."""
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)
    """Set-based requirements an object's labels must meet."""


# --- CEL validation rules --------------------------------------------------------------------


class RuleSeverity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


class ValidationRule(ApiModel):
    """One CEL assertion. It is inline when it reads only `self`, deferred otherwise."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Stable name of the rule, reported with every failure (DNS label syntax)."""
    expression: str = Field(min_length=1)
    """CEL expression that must evaluate to true for the rule to pass."""
    message: str | None = None
    """Literal text reported when the rule fails."""
    message_expression: str | None = None
    """CEL expression evaluating to the failure message (takes precedence over message)."""
    when: str | None = None
    """CEL condition; the rule is evaluated only when it is true."""
    severity: RuleSeverity = RuleSeverity.ERROR
    """error fails validation; warning is reported but does not fail it."""


class ValidateBlock(ApiModel):
    """CEL rules attached to an output or a watched collection."""

    when: str | None = None
    """CEL condition for the whole block; rules run only when it is true."""
    rules: list[ValidationRule] = Field(default_factory=list)
    """The rules, evaluated in order."""

    @model_validator(mode="after")
    def _unique_names(self) -> ValidateBlock:
        names = [r.name for r in self.rules]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"rule names must be unique within a block: {', '.join(dupes)}")
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
    field_selector: str | None = None
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

    url: str = Field(pattern=r"^https?://")
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
    critical: bool = False
    """When true, no configuration renders until a first fetch succeeded."""


# --- validation settings ----------------------------------------------------------------------


class SeverityLevel(StrEnum):
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
    FAIL = "fail"
    IGNORE = "ignore"


class ExternalValidator(ApiModel):
    """A validator outside the controller, run on the complete file set."""

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

    haproxy_version: str | None = Field(default=None, pattern=r"^[0-9]+\.[0-9]+$")
    """Schema family (e.g. "2.8"); detected from the haproxy binary when omitted."""
    haproxy_binary: str | None = None
    """Path of the haproxy binary used for `haproxy -c`."""
    timeout: Duration = 10.0
    """Hard limit for `haproxy -c`; exceeding it means analysis incomplete, never a pass."""
    strict: bool = False
    """Treat warnings as errors."""
    severity_level: SeverityLevel = SeverityLevel.INFO
    """Lowest severity kept in reports."""
    filters: RuleFilters = Field(default_factory=RuleFilters)
    """Rule id filters applied to every report."""
    schema_overlays: list[dict[str, Any]] = Field(
        default_factory=list,
        json_schema_extra={
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    )
    """JSON Schema fragments merged over the bundled HAProxy schemas (may only tighten them)."""
    external_validators: list[ExternalValidator] = Field(default_factory=list)
    """Validators run after all built-in stages passed."""
    policy: DirectivePolicy = Field(default_factory=DirectivePolicy)
    """Directive policy exceptions."""


# --- reconcile and deploy ---------------------------------------------------------------------


class ReconcileSettings(ApiModel):
    """Timing of the reconcile loop."""

    debounce: Duration = 0.2
    """Quiet time after the last change before a trailing render."""
    min_interval: Duration = 1.0
    """Minimum time between two renders."""
    resync_interval: Duration = 300.0
    """Periodic full render even without changes."""


class DeployTarget(ApiModel):
    """Where validated configurations go."""

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

    targets: list[DeployTarget] = Field(default_factory=list)
    """Every target receives the same validated file set."""


# --- embedded tests -----------------------------------------------------------------------------


class AssertionType(StrEnum):
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

    watched_resources: dict[str, WatchedResource] = Field(default_factory=dict)
    """Collections of watched objects, by the name templates use (resources.<name>)."""
    template_snippets: dict[str, Snippet] = Field(default_factory=dict)
    """Reusable template fragments by name."""
    haproxy_config: Output
    """Template of the main configuration, haproxy.cfg."""
    maps: dict[str, Output] = Field(default_factory=dict)
    """Map files by file name, deployed under maps/."""
    files: dict[str, Output] = Field(default_factory=dict)
    """General files (error pages, ...) by file name, deployed under files/."""
    certificates: dict[str, Output] = Field(default_factory=dict)
    """PEM certificate files by file name, deployed under certs/."""
    http_sources: dict[str, HttpSource] = Field(default_factory=dict)
    """Remote content available to templates."""
    extra_context: dict[str, Any] = Field(
        default_factory=dict, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    """Free-form values templates see as extraContext."""
    validation: ValidationSettings = Field(default_factory=ValidationSettings)
    """Validation pipeline settings."""
    reconcile: ReconcileSettings = Field(default_factory=ReconcileSettings)
    """Reconcile loop timing."""
    deploy: DeploySettings = Field(default_factory=DeploySettings)
    """Deploy targets."""
    tests: dict[str, EmbeddedTest] = Field(default_factory=dict)
    """Embedded template tests by name."""


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """A Kubernetes-style status condition."""

    type: str
    """Condition type, e.g. Valid, Deployed, Ready."""
    status: ConditionStatus
    """True, False or Unknown."""
    reason: str = Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    """CamelCase machine-readable reason."""
    message: str = ""
    """Human-readable details."""
    last_transition_time: str
    """RFC 3339 time the status last changed."""
    observed_generation: int | None = None
    """Generation of the spec this condition was computed for."""


class LastValidated(ApiModel):
    """The file set that last passed every validation stage."""

    checksum: str
    """sha256 of the validated file set."""
    at: str
    """RFC 3339 time of the verdict."""
    haproxy_version: str
    """Version of the haproxy binary that checked it."""


class DiagnosticsSummary(ApiModel):
    """Counts of the latest report's findings."""

    errors: int = 0
    """Findings at error or fatal severity."""
    warnings: int = 0
    """Findings at warning severity."""
    infos: int = 0
    """Findings at info severity."""
    rule_ids: list[str] = Field(default_factory=list)
    """Distinct rule ids in the latest report (at most 20)."""


class HAProxyTemplateConfigStatus(ApiModel):
    """Observed state written by the controller."""

    observed_generation: int | None = None
    """Generation of the spec last processed."""
    conditions: list[Condition] = Field(default_factory=list)
    """Latest observations (Valid, Deployed, Ready)."""
    last_validated: LastValidated | None = None
    """The file set that last passed validation."""
    diagnostics_summary: DiagnosticsSummary | None = None
    """Summary of the latest report."""


class ObjectMeta(BaseModel):
    """The subset of Kubernetes metadata the controller reads; the rest passes through."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1)
    namespace: str | None = None
    generation: int | None = None


class HAProxyTemplateConfig(ApiModel):
    """The HAProxyTemplateConfig resource."""

    api_version: Literal["haproxy-template.dev/v1alpha1"] = "haproxy-template.dev/v1alpha1"
    kind: Literal["HAProxyTemplateConfig"] = "HAProxyTemplateConfig"
    metadata: ObjectMeta
    spec: HAProxyTemplateConfigSpec
    status: HAProxyTemplateConfigStatus | None = None
