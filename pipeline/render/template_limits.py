"""Bounds on a user template's work, enforced by the sandbox it runs in: a template is code from
elsewhere, and `range(10**9)`, `'a' * 10**9`, `10**1000000000`, endless recursion or a loop of 10^10
steps must end the one render (a `template_limit` rejection), not hang or crash the job.

What is bounded, per render: wall time, output size, loop steps over `range`, the size of a value a
`*` or `**` would build, and recursion (a macro calling itself). The built-in templates are trusted
and run without these checks.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import RenderError

MAX_SECONDS = 10.0  # wall time per render
MAX_OUTPUT_CHARS = 64 * 1024 * 1024  # the rendered text of one conversation
MAX_STEPS = 1_000_000  # iterations over range(), summed over the render
MAX_VALUE_SIZE = 16 * 1024 * 1024  # chars or items a '*' may build; bits of a '**' result / 8
_CHECK_EVERY = 4096  # steps between clock reads


class TemplateLimit(RenderError):
    code = "template_limit"


class _Budget(threading.local):
    steps = 0
    deadline: float | None = None
    name = ""


_budget = _Budget()


def _over(what: str) -> TemplateLimit:
    return TemplateLimit(f"template '{_budget.name}' exceeded its limit: {what}")


def _tick(n: int = 1) -> None:
    before = _budget.steps
    _budget.steps = before + n
    if _budget.deadline is None:
        return
    if _budget.steps > MAX_STEPS:
        raise _over(f"more than {MAX_STEPS:,} loop steps")
    if before // _CHECK_EVERY != _budget.steps // _CHECK_EVERY and time.monotonic() > _budget.deadline:
        raise _over(f"ran longer than {MAX_SECONDS:g} s")


def bounded_range(*args: int) -> Iterator[int]:
    """`range` for templates: each step counts against the render's budget."""
    for value in range(*args):
        _tick()
        yield value


class LimitedSandbox(ImmutableSandboxedEnvironment):
    """The sandbox, also refusing a `*` or `**` whose result would be huge (before building it)."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
            if right * math.log2(abs(left)) > 8 * MAX_VALUE_SIZE:
                raise _over(f"{operator} would build a number of more than {8 * MAX_VALUE_SIZE:,} bits")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and _is_int(n) and len(seq) * n > MAX_VALUE_SIZE:
                    raise _over(f"'*' would build a value of {len(seq) * n:,} items or chars")
        return super().call_binop(context, operator, left, right)


def check_value(value: Any) -> None:
    """A value a template stores (in a namespace, across loop steps) is bounded like a `*` result: a
    string doubled on each step would otherwise grow past memory before the clock could stop it."""
    if _budget.deadline is not None and isinstance(value, (str, list, tuple)) and len(value) > MAX_VALUE_SIZE:
        raise _over(f"a stored value of {len(value):,} items or chars")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@contextmanager
def limits(name: str) -> Iterator[None]:
    """The render inside runs under the limits: TemplateLimit when one is exceeded. The wall clock is
    also enforced by a timer signal where the render runs on the main thread (a loop that never comes
    back to the budget, such as nested loops over the conversation's own lists)."""
    _budget.steps, _budget.deadline, _budget.name = 0, time.monotonic() + MAX_SECONDS, name
    use_alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    previous: Any = None
    if use_alarm:
        def expire(signum: int, frame: Any) -> None:
            raise _over(f"ran longer than {MAX_SECONDS:g} s")

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, MAX_SECONDS)
    try:
        yield
    except RecursionError:
        raise _over("recursion too deep") from None
    except MemoryError:
        raise _over("out of memory") from None
    finally:
        _budget.deadline = None
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def bounded_output(pieces: Iterator[str]) -> str:
    """The template's output, joined, refused once over MAX_OUTPUT_CHARS (each piece also ticks the clock)."""
    out: list[str] = []
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > MAX_OUTPUT_CHARS:
            raise _over(f"output over {MAX_OUTPUT_CHARS:,} characters")
        out.append(piece)
        if len(out) % _CHECK_EVERY == 0 and _budget.deadline is not None and time.monotonic() > _budget.deadline:
            raise _over(f"ran longer than {MAX_SECONDS:g} s")
    return "".join(out)
