"""The depth bound of the JSON policy: a text is refused exactly when some container nests deeper than
MAX_DEPTH, on short texts (where brackets are counted first) and long ones (checked at once), as bytes
or str, with big integers beside (which send the check to its walk), from any thread."""

from __future__ import annotations

import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import jsonpolicy

LIMIT = jsonpolicy.MAX_DEPTH
BIG = 123456789012345678901234567890


def depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def nested(levels: int, leaf, key: str | None) -> object:
    for _ in range(levels):
        leaf = {key: leaf} if key is not None else [leaf]
    return leaf


@st.composite
def records(draw):
    """A record holding one deep branch (around the limit) among shallow siblings, some long strings."""
    leaf = draw(st.sampled_from([1, BIG, "x", None, [], {}]))
    branch = nested(draw(st.integers(LIMIT - 4, LIMIT + 2)), leaf, draw(st.sampled_from([None, "a", "[{"])))
    pad = "p" * draw(st.sampled_from([0, 10, 5000]))
    siblings = draw(st.lists(st.sampled_from([pad, "[[[{{{", BIG, [pad], {"s": [1, 2]}]), max_size=3))
    where = draw(st.integers(0, len(siblings)))
    items = siblings[:where] + [branch] + siblings[where:]
    return draw(st.sampled_from([items, {f"k{i}": v for i, v in enumerate(items)}]))


def outcome(text):
    try:
        return ("ok", json.dumps(jsonpolicy.loads(text)))
    except jsonpolicy.JsonPolicyError as exc:
        return (exc.code, exc.path)


@settings(max_examples=300, deadline=None)
@given(records(), st.booleans())
def test_refused_exactly_when_deeper_than_the_limit_with_the_deep_path(value, as_bytes):
    text = json.dumps(value)
    got = outcome(text.encode() if as_bytes else text)
    if depth(value) <= LIMIT:
        assert got == ("ok", text)
    else:
        assert got == ("too_deep", jsonpolicy._too_deep(value))


@pytest.mark.parametrize("pad", [0, 200, 5000])
@pytest.mark.parametrize("levels", [LIMIT - 1, LIMIT, LIMIT + 1])
def test_the_limit_itself_on_short_and_long_texts(pad, levels):
    text = json.dumps(["p" * pad, nested(levels - 2, [], None)])  # the outer list and the leaf count too
    assert outcome(text)[0] == ("ok" if levels <= LIMIT else "too_deep")


def test_threads_checking_at_once_each_get_their_own_answer():
    shallow = json.dumps(["p" * 5000, nested(LIMIT - 1, 1, None)]).encode()  # LIMIT levels with the outer list
    deep = json.dumps(["p" * 5000, nested(LIMIT, 1, None)]).encode()
    wrong: list = []

    def check(text, expected):
        for _ in range(200):
            if outcome(text)[0] != expected:
                wrong.append(expected)

    threads = [threading.Thread(target=check, args=(shallow, "ok")) for _ in range(3)]
    threads += [threading.Thread(target=check, args=(deep, "too_deep")) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
