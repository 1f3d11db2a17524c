"""The QA report as data: every figure the HTML page and the terminal summary show, and nothing they
compute themselves. Plain frozen structs, so `--json` is `msgspec.to_builtins(report)`."""

from __future__ import annotations

from msgspec import Struct, field


class Count(Struct, frozen=True):
    key: str
    count: int


class Stage(Struct, frozen=True):
    name: str
    seen: int
    passed: int
    rejected: list[Count]
    filtered: list[Count]


class Totals(Struct, frozen=True):
    """`read`..`balanced` come from stats.json (None without it); `rows` and `reject_lines` are counted
    in the files themselves, so the report can say when the two disagree."""

    read: int | None
    written: int | None
    rejected: int | None
    filtered: int | None
    balanced: bool | None
    rows: int
    reject_lines: int
    shards: int
    filtered_lines: int = 0  # lines of filtered.jsonl
    # data rows the run says it wrote: `written` counts records, and a windowed record is several rows
    row_count: int | None = None


class SourceFile(Struct, frozen=True):
    file: str
    written: int
    rejected: int
    formats: list[Count]  # of the written rows


class Format(Struct, frozen=True):
    name: str
    written: int
    with_tool_calls: int
    tokens: int
    parsed: int | None  # the run's own count of written records (stats.json tallies): a cross-check


class Bin(Struct, frozen=True):
    label: str
    low: int
    high: int | None  # None: open-ended
    count: int


class ToolUse(Struct, frozen=True):
    conversations: int
    with_calls: int
    calls: int
    hosted_calls: int  # provider-run tools (web search, code execution) kept as opaque items
    calls_per_conversation: list[Bin]
    mean_calls: float
    max_calls: int
    call_turns: int  # assistant turns holding at least one call
    parallel_turns: int  # ... holding two or more
    parallel_rate: float | None
    with_parallel: int  # conversations with a parallel turn
    distinct_tools: int
    top_tools: list[Count]
    results: int
    error_results: int
    error_rate: float | None
    image_results: int  # results whose content holds an image
    schema_failures_kept: int  # arguments_schema issues on written rows (when it is a warning)
    schema_failures_rejected: int  # records rejected for arguments_schema


class Example(Struct, frozen=True):
    source: str
    outcome: str  # "written" (a warning the record kept) | "rejected" | "filtered"
    path: str
    message: str
    excerpt: str  # what sits at `path`: a block of the conversation, or the rejected record


class FilterReason(Struct, frozen=True):
    """Records a filter removed (shape, render or dedup stage), from filtered.jsonl."""

    stage: str
    reason: str
    count: int
    examples: list[Example]


class IssueCode(Struct, frozen=True):
    code: str
    severity: str  # of the kept ones; "error" for rejects
    kept: int  # occurrences on written rows
    kept_rows: int
    rejected: int  # records rejected with this code (any stage)
    stage: str  # where the rejections happened ("" when none)
    tallied: int | None  # the run's own count (stats.json tallies.issues), None when absent
    examples: list[Example]


class Flattened(Struct, frozen=True):
    source: str
    outcome: str
    path: str
    family: str
    text: str


class TemplateTokens(Struct, frozen=True):
    template: str
    tokenizer: str
    rows: int
    tokens: int
    trained: int
    min: int
    median: float
    p95: float
    max: int
    histogram: list[Bin]


class Tokens(Struct, frozen=True):
    templates: list[TemplateTokens]
    tokens: int
    trained: int
    trained_share: float | None
    trimmed: int  # written after whole-unit trimming
    dropped: list[Count]  # filtered at render (too long, too short, nothing trained), from stats.json
    max_tokens: int | None  # the job's limit (config.json), None when unknown or off


class Duplicates(Struct, frozen=True):
    enabled: bool | None  # shape.dedup in config.json
    removed: int | None  # dedup stage, stats.json
    repeated_ids: int  # written rows whose id (content hash) another written row also has


class LedgerKind(Struct, frozen=True):
    kind: str
    entries: int
    rows: int
    targets: list[Count]  # entries by what could not carry them: a format, a template, the messages export
    # the run's own count (stats.json tallies.ledger), a cross-check
    tallied: int | None


class LedgerReason(Struct, frozen=True):
    target: str
    kind: str
    reason: str
    entries: int
    rows: int


class Ledger(Struct, frozen=True):
    kinds: list[LedgerKind]
    targets: list[Count]
    reasons: list[LedgerReason]  # the most frequent


class ReasoningDrop(Struct, frozen=True):
    target: str
    kind: str
    blocks: int
    rows: int


class ExpandedCase(Struct, frozen=True):
    case: str  # whole | final | prefix (pipeline/render/expand.py)
    rows: int
    tokens: int
    trained_tokens: int


class Reasoning(Struct, frozen=True):
    rows: int  # written conversations holding reasoning
    blocks: int
    with_text: int  # visible text or summary
    with_state: int  # signature, encrypted content or redacted data
    dropped: list[ReasoningDrop]  # ledger entries on reasoning blocks, by target and kind
    trained: bool | None  # the mask policy trains reasoning tokens (config.json)
    # past_reasoning="expand": rows by case; "prefix" rows are the extra ones (their tokens the cost)
    expanded: list[ExpandedCase] = []


class ConvSummary(Struct, frozen=True):
    id: str
    source: str
    source_format: str
    template: str
    tokens: int
    trained: int
    messages: int
    tool_calls: int
    trimmed: bool
    preview: str  # the opening user text


class SafetyExample(Struct, frozen=True):
    source: str
    path: str
    detector: str
    where: str
    excerpt: str  # the text around the placeholder, or the rejection's message


class Safety(Struct, frozen=True):
    enabled: bool | None  # scrub.enabled in config.json
    action: str | None
    actions: dict[str, str]
    by_detector: list[Count]  # redactions (stats.json)
    by_where: list[Count]  # tool_result, tool_arguments, user_text, ...
    rejected: list[Count]  # rejects by scrub code
    rejected_examples: list[SafetyExample]
    reported: list[Count]  # findings kept as warnings (action "report")
    examples: list[SafetyExample]


class NearCluster(Struct, frozen=True):
    kept: str  # the source of the row kept
    removed: int
    examples: list[str]  # sources of rows filtered as near-duplicates of it
    min_similarity: float


class NearDuplicates(Struct, frozen=True):
    enabled: bool | None
    threshold: float | None
    removed: int
    clusters: int
    largest: list[NearCluster]


# --- sessions, windows and trained tokens (qa/sessions.py) -------------------------------------------

class FoldedSource(Struct, frozen=True):
    file: str
    rows: int  # conversations written from the file
    folded: int  # records folded into them


class RowFlag(Struct, frozen=True):
    source: str
    window: int
    windows: int
    tokens: int
    trained: int
    preview: str  # the first text of the row


class RoleShare(Struct, frozen=True):
    role: str  # system, tools, user, assistant, tool (results), template (scaffolding)
    tokens: int
    share: float | None


class Sessions(Struct, frozen=True):
    mode: str | None  # shape.sessions (config.json)
    long: str | None  # shape.long
    folded: int | None  # records filtered as prefix_of (stats.json)
    folded_in_rows: int  # the written rows' own count of what they hold: a cross-check
    folded_by_source: list[FoldedSource]
    sessions: int
    branched_sessions: int  # sessions holding two or more conversations
    max_branches: int
    branches: list[Bin]  # conversations per session
    windowed: int  # conversations written as several windows
    window_rows: int
    windows_per_conversation: list[Bin]
    lost_units: int | None  # units alone over max_tokens, left out of their windows (stats.json)
    lost_assistant_turns: int | None
    trained_histogram: list[Bin]
    trained_log_scale: bool
    low_trained_threshold: int
    low_trained: int
    no_user_turn: int
    low_trained_examples: list[RowFlag]
    no_user_examples: list[RowFlag]
    role_tokens: list[RoleShare]


class Report(Struct, frozen=True):
    title: str
    inputs: list[str]  # the job's input paths (config.json), or the files given
    files: list[str]  # what the report was built from
    status: str  # "ok" | "empty" (nothing read) | "none_written" (all rejected or filtered) | "no_data"
    notes: list[str]  # cross-checks that failed, missing files: said plainly at the top
    totals: Totals
    stages: list[Stage]
    source_files: list[SourceFile]
    source_folders: list[SourceFile]
    formats: list[Format]
    shapes: list[Count]
    tools: ToolUse
    issues: list[IssueCode]
    flattened: list[Flattened]
    tokens: Tokens
    duplicates: Duplicates
    ledger: Ledger
    reasoning: Reasoning
    longest: list[ConvSummary]
    shortest: list[ConvSummary]
    safety: Safety | None = None
    near_duplicates: NearDuplicates | None = None
    config: dict = field(default_factory=dict)
    sessions: Sessions | None = None
    filtered: list[FilterReason] = field(default_factory=list)
