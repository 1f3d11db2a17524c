"""Secrets and personal data found by structure and redacted, rejected or reported."""

from .detectors import DETECTORS, PERSONAL_DETECTORS, SECRET_DETECTORS, Finding, find
from .redact import Redactor
from .stage import Scrubber

__all__ = ["DETECTORS", "PERSONAL_DETECTORS", "SECRET_DETECTORS", "Finding", "Redactor", "Scrubber", "find"]
