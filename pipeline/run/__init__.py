"""The batch job: its config, the stages a record passes (parse, validate, shape, render), the worker
both engines call, the local and Ray engines, and the writers of data, rejects and stats."""

from .config import JobConfig, load_config, to_dict
from .job import RunResult, execute_job
from .stats import Stats
from .writers import SCHEMA

__all__ = ["SCHEMA", "JobConfig", "RunResult", "Stats", "execute_job", "load_config", "to_dict"]
