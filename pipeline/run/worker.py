"""The worker both engines call: one `Context` per worker process, built once, and the stages run over
each batch of records it is handed. The local engine's processes and Ray's actors hold one each."""

from __future__ import annotations

import gc
import signal

from ..ingest import RawRecord
from .config import JobConfig
from .item import Item
from .stages import Context, run_stages
from .stats import Stats

GC_THRESHOLD = 50_000  # a worker's for good; the parent's while a run streams results, then restored

# This process's context: set once by init_worker, read by every batch.
_context: Context | None = None


def init_worker(config: JobConfig, ignore_interrupt: bool = False, own_process: bool = False) -> None:
    global _context
    if ignore_interrupt:
        # Ctrl-C reaches the whole process group: the parent alone handles it, stopping the pool;
        # a worker dying mid-task would leave the parent waiting for its result.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # A forked worker inherits the command's SIGTERM handler; the parent stops workers with
        # SIGTERM, which must end them at once, not raise inside a batch.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _context = Context(config)
    if own_process:
        # The tokenizer, template and modules live as long as the worker: keep the cyclic garbage
        # collector from walking them again and again (about a seventh of a worker's time otherwise).
        try:
            _context.renderer
        except Exception:  # the parent checked this config; if it still fails, the batches will say why
            return
        gc.collect()
        gc.freeze()
        # A batch allocates and frees many containers: at the default threshold (700 more allocations
        # than frees) the collector ran ~800 times in a worker's 1,000 low-repetition conversations,
        # walking what the batch still held (9% of the worker's CPU). At this one it seldom runs, and
        # cyclic garbage, if any, still cannot pile up past this many objects.
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


def work(batch: list[RawRecord]) -> tuple[list[Item], Stats]:
    items, stats = run_stages(batch, _context)
    for item in items:  # ship back only what the parent writes
        item.conversation = None
        item.scrubbed = None
        # In the row's columns and the tallies already (pickling their objects was over 40% of pickling a result).
        item.issues, item.ledger, item.export, item.shape_tallies = [], [], None, []
        if item.outcome is None:
            item.record = None
    return items, stats
