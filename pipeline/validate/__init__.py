"""Structural validation: rules with stable codes over canonical conversations, and the detector of
tool calls flattened into text."""

from .flattened import FAMILIES as FLATTENED_FAMILIES
from .flattened import Finding, find_flattened
from .validator import RULES, SEVERITIES, Issue, Rule, ValidateConfig, error_issue, has_errors, validate

__all__ = ["FLATTENED_FAMILIES", "RULES", "SEVERITIES", "Finding", "Issue", "Rule", "ValidateConfig", "error_issue",
           "find_flattened", "has_errors", "validate"]
