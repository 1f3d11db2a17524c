"""Compositions across wings that the public API and the command line share."""

from __future__ import annotations

import time

from .run import JobConfig, RunResult, execute_job


def run_job(config: JobConfig, *, progress: bool | None = None) -> RunResult:
    """Run the job, then (when `output.qa_report` is on) build its QA report from the files just
    written, as `sftprep qa` would, and write it beside them."""
    started = time.perf_counter()
    result = execute_job(config, progress=progress)
    if config.output.qa_report:
        from .qa import build_report, write_html  # polars and the figures: only when the report is on

        result.report = build_report(result.output_dir)
        write_html(result.report, result.output_dir / "qa_report.html")
    result.seconds = time.perf_counter() - started
    return result
