"""The HAProxyTemplateConfig API: pydantic models, loading with field-path errors, CRD generation."""

from controller.spec.crd import generate_crd, openapi_schema, render_crd_yaml
from controller.spec.docs import generate_api_docs
from controller.spec.loader import load_config, parse_config, read_documents
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
    "generate_api_docs",
    "generate_crd",
    "load_config",
    "openapi_schema",
    "parse_config",
    "read_documents",
    "render_crd_yaml",
]
