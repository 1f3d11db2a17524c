"""Job configuration: a TOML file, declared as structs so an unknown key is an error naming it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Struct, field

from ..errors import ConfigError
from ..suggest import did_you_mean

Severity = Literal["error", "warning", "off"]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class _Section(Struct, forbid_unknown_fields=True, omit_defaults=False):
    pass


class InputConfig(_Section):
    paths: list[str] = field(default_factory=lambda: ["data/"])
    format: str = "auto"  # auto or a format name
    shape: str = "auto"
    max_record_mb: int = 32


# The defaults are the job configs/default.toml spells out (a test holds them equal): running with no
# config is running that file.
class ValidateConfig(_Section):
    # Per-code severity overrides: {"unknown_tool": "warning", "empty_assistant_turn": "off"}.
    severity: dict[str, Severity] = field(default_factory=lambda: {
        "unanswered_call_at_end": "warning", "anthropic_blank_text": "warning"})
    # Records with any issue of these severities are rejected.
    reject: list[Severity] = field(default_factory=lambda: ["error"])


class ShapeConfig(_Section):
    drop_codes: list[str] = field(default_factory=list)  # filter records that have these issue codes
    min_tokens: int = 0
    max_tokens: int = 8192  # 0: no limit
    dedup: bool = True  # exact duplicates by canonical hash
    require_tool_calls: bool = False
    # Sessions and long conversations (pipeline/run/fold.py, window.py).
    # "longest": a conversation that is a prefix of another of its session is folded into it; "all": kept.
    sessions: Literal["longest", "all"] = "longest"
    # Rows held back at most (outside HTTP recordings) waiting for a longer conversation of their session.
    session_window: Annotated[int, msgspec.Meta(ge=1)] = 256
    # Over max_tokens: "trim" whole units from the end, "window" into several rows, or "drop".
    long: Literal["trim", "window", "drop"] = "trim"
    window_overlap: NonNegative = 1  # earlier call/result units repeated as masked context in each window
    # Near-duplicates: MinHash over the rendered text; a row this similar (Jaccard) to an earlier one is filtered.
    near_dedup: bool = False
    near_dedup_threshold: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.9


ScrubAction = Literal["redact", "reject", "report"]


class ScrubConfig(_Section):
    enabled: bool = True
    # What a finding does: "redact" (a typed placeholder), "reject" the record, or only "report" it.
    action: ScrubAction = "redact"
    actions: dict[str, ScrubAction] = field(default_factory=dict)  # per detector: {aws_access_key = "reject"}
    # Phone numbers written without a country code are read as numbers of this region ("US", "GB"...);
    # "" finds only international (+CC) numbers, which nothing else looks like.
    phone_region: str = ""


class ConvertConfig(_Section):
    to: str = "openai-chat"  # also export each conversation as this provider's body ("" for none)


class RenderConfig(_Section):
    template: str = "chatml"
    tokenizer: str = ""  # "": the template family's own (chatml: qwen2.5, llama3: llama3, harmony: gpt-oss)
    # "all" or "last" assistant turns, optionally ",no-reasoning" and ",no-eot" (e.g. "last,no-eot").
    mask: str = "all"
    # Several calls (or text beside a call) in one turn, where the template allows one call per turn
    # (llama3): "split" into consecutive turns, "drop-text" as the official template does, or "refuse".
    calls: Literal["split", "drop-text", "refuse"] = "split"
    date: str = "2026-01-01"  # pinned "today" for templates that print a date
    # Reasoning of turns before the current query, for templates that strip it (qwen3): "as_template",
    # "keep", "drop", or "expand" (one row per turn as the model saw it; see pipeline/render/expand.py).
    past_reasoning: Literal["as_template", "expand", "keep", "drop"] = "as_template"
    # Tokenized segments (text between special tokens) kept for reuse, per worker, counted in tokens
    # (about 50 bytes each); 0 turns the cache off. Ids are the same either way.
    segment_cache_tokens: NonNegative = 1_000_000
    # Who encodes the text between special tokens: "auto" (a fast engine, fastokens then gigatoken, where
    # its self-check at load gives HF tokenizers' ids; else HF, saying why), "hf", or an engine by name
    # (an error if it fails the self-check). Every Nth piece the engine encodes is also encoded by HF;
    # any difference stops the run. 0: no running check.
    tokenizer_backend: Literal["auto", "hf", "fastokens", "gigatoken"] = "auto"
    tokenizer_check_every: NonNegative = 100


class OutputConfig(_Section):
    dir: str = "out"
    format: Literal["parquet", "jsonl"] = "parquet"
    shard_size: int = 10_000
    keep_original: bool = False
    qa_report: bool = True
    # Share of rows (by content hash: stable across reruns and worker counts) written as the validation
    # split, to validation-*.parquet and each export's validation file; 0: no split.
    validation: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0


ExportFormat = Literal["openai", "trl", "sharegpt"]


class ExportConfig(_Section):
    # Also write each row as a record of these formats, beside the data (see README "Training with the output").
    formats: list[ExportFormat] = field(default_factory=list)


class RunConfig(_Section):
    workers: int = 0  # 0: all cores
    engine: Literal["local", "ray"] = "local"
    batch_size: int = 64
    ray_address: str = ""
    strict: bool = False


class JobConfig(_Section):
    input: InputConfig = field(default_factory=InputConfig)
    validate: ValidateConfig = field(default_factory=ValidateConfig)
    shape: ShapeConfig = field(default_factory=ShapeConfig)
    scrub: ScrubConfig = field(default_factory=ScrubConfig)
    convert: ConvertConfig = field(default_factory=ConvertConfig)
    render: RenderConfig = field(default_factory=RenderConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    run: RunConfig = field(default_factory=RunConfig)


def load_config(path: str | Path | None, overrides: dict[str, Any] | None = None) -> JobConfig:
    """Read a TOML job config (None: all defaults) and apply dotted overrides like
    {"render.template": "llama3"}. Relative input paths and the output dir are relative to the
    current directory, as a user typing them expects."""
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file '{path}' does not exist", code="no_config") from None
        except (OSError, UnicodeDecodeError) as exc:  # a directory, unreadable, a binary file
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text (a binary file?)"
            raise ConfigError(f"config file '{path}' cannot be read: {why}", code="bad_config") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file '{path}' is not valid TOML: {exc}", code="bad_config") from None
    _renamed_keys(raw)
    given: dict[str, Any] = {}
    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        given.setdefault(section, {})[key] = value
    _renamed_keys(given)  # an override of an older key wins over the file's newer one, as any override does
    for section, values in given.items():
        raw.setdefault(section, {}).update(values)
    where = f"config {'file ' + repr(str(path)) if path else ''}"
    try:
        config = msgspec.convert(raw, JobConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{where}: {_explain(exc)}", code="bad_config") from None
    _check_scrub(config.scrub, where)
    check_values(config, path)
    return config


def _check_scrub(scrub: ScrubConfig, where: str) -> None:
    from .scrub.detectors import DETECTORS

    unknown = sorted(set(scrub.actions) - set(DETECTORS))
    if unknown:
        raise ConfigError(f"{where}: unknown detector '{unknown[0]}' in [scrub.actions] (detectors: "
                          f"{', '.join(DETECTORS)})", code="bad_config")


# --- values the types allow but a run cannot honour: usage errors before any work ----------------

_RANGES = {  # key: (lowest, highest)
    "input.max_record_mb": (1, 4096),
    "shape.min_tokens": (0, 1 << 31),
    "shape.max_tokens": (0, 1 << 31),
    "output.shard_size": (1, 1 << 31),
    "run.workers": (0, 1024),
    "run.batch_size": (1, 1 << 20),
    "render.segment_cache_tokens": (0, 1 << 40),
}


def check_values(config: JobConfig, path: str | Path | None = None) -> None:
    from ..formats import FORMATS
    from ..ingest import INPUT_FORMATS, RECORD_SHAPES
    from ..validate import RULES

    where = f"config file '{path}': " if path else "config: "
    for dotted, (low, high) in _RANGES.items():
        section, _, key = dotted.partition(".")
        value = getattr(getattr(config, section), key)
        if not low <= value <= high:
            raise ConfigError(f"{where}{dotted} = {value} is out of range ({low:,} to {high:,})", code="bad_config")
    choices = {"input.format": ("auto", *INPUT_FORMATS), "input.shape": ("auto", *RECORD_SHAPES),
               "convert.to": ("", *FORMATS)}
    for dotted, valid in choices.items():
        section, _, key = dotted.partition(".")
        value = getattr(getattr(config, section), key)
        if value not in valid:
            raise ConfigError(f"{where}{dotted} = {value!r} is not one of: {', '.join(map(repr, valid))}",
                              code="bad_config")
    unknown = [code for code in config.shape.drop_codes if code not in RULES]
    if unknown:
        raise ConfigError(f"{where}shape.drop_codes: unknown code {', '.join(map(repr, unknown))}; "
                          f"valid: {', '.join(RULES)}", code="bad_config")


def _renamed_keys(raw: dict[str, Any]) -> None:
    """Keys of older configs: `shape.trim = true|false` is `shape.long = "trim"|"drop"`."""
    shape = raw.get("shape")
    if isinstance(shape, dict) and "trim" in shape:
        trim = shape.pop("trim")
        if not isinstance(trim, bool):
            raise ConfigError(f"shape.trim must be true or false (it means shape.long = \"trim\" | \"drop\"), "
                              f"got {trim!r}", code="bad_config")
        meant = "trim" if trim else "drop"
        if shape.setdefault("long", meant) != meant:
            raise ConfigError(f"shape.trim = {str(trim).lower()} and shape.long = {shape['long']!r} disagree: "
                              "give shape.long alone", code="bad_config")


def _explain(exc: msgspec.ValidationError) -> str:
    # msgspec says "Object contains unknown field `x` - at `$.render`": name the key as the user wrote it.
    text = str(exc)
    if "unknown field" in text and " - at `$." in text:
        name = text.split("`")[1]
        section = text.rsplit("`$.", 1)[1].rstrip("`")
        return f"unknown key '{section}.{name}'{did_you_mean(name, _keys(section), prefix=f'{section}.')}"
    if "unknown field" in text:
        name = text.split('`')[1]
        return f"unknown section '{name}'{did_you_mean(name, _keys(''))}"
    return text


def to_dict(config: JobConfig) -> dict[str, Any]:
    return msgspec.to_builtins(config)


def _keys(section: str) -> list[str]:
    """The keys a dotted section of JobConfig accepts ("" for the top: the section names)."""
    struct: Any = JobConfig
    for part in filter(None, section.split(".")):
        types = {f.name: f.type for f in msgspec.structs.fields(struct)}
        struct = types.get(part)
        if not (isinstance(struct, type) and issubclass(struct, Struct)):
            return []
    return [f.name for f in msgspec.structs.fields(struct)]
