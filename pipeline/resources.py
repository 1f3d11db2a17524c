"""Where the project's Jinja templates are: the repository's templates/ folder in a checkout, or the
copy a regular install ships as pipeline/templates."""

from __future__ import annotations

from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent / "templates"
_INSTALLED = Path(__file__).resolve().parent / "templates"

TEMPLATES_DIR = _CHECKOUT if _CHECKOUT.is_dir() else _INSTALLED
