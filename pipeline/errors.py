"""Every error says where: the record's source (file and line) and a JSON path inside it.

Callers branch on the type and `code`, never on the message text.
"""

from __future__ import annotations


class SftprepError(Exception):
    """Base of every error the project raises on bad input or configuration."""

    code = "error"

    def __init__(self, message: str, *, path: str = "$", source: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.source = source
        if code is not None:
            self.code = code

    def at(self, source: str) -> "SftprepError":
        """The same error, tagged with where the record came from (file:line)."""
        if self.source is None:
            self.source = source
        return self

    def __str__(self) -> str:
        where = f"{self.source} " if self.source else ""
        return f"{where}at {self.path}: {self.message}"

    def to_dict(self) -> dict:
        return {"code": self.code, "error": self.message, "path": self.path, "source": self.source}


class InputError(SftprepError):
    """The bytes are not a record: invalid JSON, not UTF-8, a truncated file."""

    code = "invalid_input"


class ShapeError(SftprepError):
    """The record's format or shape is unknown, or ambiguous between several candidates."""

    code = "unknown_shape"


class ParseError(SftprepError):
    """The record claims a format but breaks it: a required field missing, a wrong type."""

    code = "invalid_record"


class ConversionError(SftprepError):
    """The conversation cannot be written in the target format, or --strict refused a ledger entry."""

    code = "conversion"


class RenderError(SftprepError):
    """A template or tokenizer could not render the conversation faithfully."""

    code = "render"


class ConfigError(SftprepError):
    """A job configuration or command-line value is wrong."""

    code = "config"


def json_path(*parts: str | int) -> str:
    """`json_path("messages", 3, "content", 1)` -> `$.messages[3].content[1]`."""
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif part.startswith("["):
            out.append(part)
        else:
            out.append(f".{part}")
    return "".join(out)


class InternalError(SftprepError):
    """An unexpected exception while handling one record: a bug, or input no rule foresaw. The record is
    rejected with it (code `internal_error`, the exception and where it was raised) and the run goes on."""

    code = "internal_error"

    def __init__(self, exc: BaseException, *, stage: str, path: str = "$", source: str | None = None):
        self.exception = f"{type(exc).__name__}: {_clip(_safe_str(exc))}"
        self.where = _raised_at(exc)
        super().__init__(f"internal error in {stage}: {self.exception} (raised at {self.where})",
                         path=path, source=source)

    def detail(self) -> dict:
        return {"exception": self.exception, "where": self.where}


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # an exception whose __str__ raises
        return repr(type(exc))


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _raised_at(exc: BaseException) -> str:
    """`file:line in function` of the innermost frame, the file relative to the package when inside it."""
    tb = exc.__traceback__
    if tb is None:
        return "unknown"
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    name = code.co_filename.replace("\\", "/")
    if "/pipeline/" in name:
        name = "pipeline/" + name.rsplit("/pipeline/", 1)[1]
    return f"{name}:{tb.tb_lineno} in {code.co_name}"
