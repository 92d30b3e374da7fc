"""The HAProxyTemplateConfig API: pydantic models, loading with field-path errors, CRD generation."""

from controller.spec.models import (
    API_GROUP,
    API_VERSION,
    FULL_API_VERSION,
    KIND,
    HAProxyTemplateConfig,
    HAProxyTemplateConfigSpec,
    HAProxyTemplateConfigStatus,
    Output,
    ValidateBlock,
    ValidationRule,
    WatchedResource,
)

__all__ = [
    "API_GROUP",
    "API_VERSION",
    "FULL_API_VERSION",
    "KIND",
    "HAProxyTemplateConfig",
    "HAProxyTemplateConfigSpec",
    "HAProxyTemplateConfigStatus",
    "Output",
    "ValidateBlock",
    "ValidationRule",
    "WatchedResource",
]
