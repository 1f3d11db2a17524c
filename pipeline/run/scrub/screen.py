"""Cheap necessary conditions for a regular expression to match a line of a text, derived once from its
parsed form: the screen. A text the screen finds nothing in holds no match, so the pattern is not run on
its lines; a text it passes may still hold none.

The screen of a pattern is the pattern relaxed: lookarounds and anchors dropped (a match of the rest still
exists in the whole text), possessive and lazy repeats made plain (same strings), cut down to the run of
its parts from one that starts with a given character (so re searches for it fast), and spread over the
ways that part can start ((A|B)C = AC|BC). Every string the pattern matches in any context then contains
a string the screen matches, anywhere in the text.

A case-insensitive pattern's screen is case-sensitive, in lowercase, and searched in `fold(text)`, which
maps every character re matches to an ASCII letter under IGNORECASE onto that letter, and keeps every
other character's place (one character for one)."""

from __future__ import annotations

import re
from re import _constants as sre  # the opcodes of the parsed form
from re import _parser

# Characters re matches to an ASCII letter under IGNORECASE whose str.lower() is not that letter: the
# dotted capital I (lowercases to two characters), the dotless i and the long s (already lowercase).
# tests/run/test_scrub_screen.py checks fold() against re over every code point.
_FOLD_EXTRA = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})
_CATEGORIES = {sre.CATEGORY_DIGIT: r"\d", sre.CATEGORY_NOT_DIGIT: r"\D", sre.CATEGORY_SPACE: r"\s",
               sre.CATEGORY_NOT_SPACE: r"\S", sre.CATEGORY_WORD: r"\w", sre.CATEGORY_NOT_WORD: r"\W"}
# Digits and white space have no case: fold() leaves them as they are.
_UNCASED_CATEGORIES = {sre.CATEGORY_DIGIT, sre.CATEGORY_SPACE}
_ANY = "."  # compiled with DOTALL: any character
_SMALL_START = 3  # a part whose first character is one of at most this many can start a screen
_MAX_ALTERNATIVES = 32  # a screen spread over more ways to start than this stays one


def fold(text: str) -> str:
    if text.isascii():
        return text.lower()
    return text.translate(_FOLD_EXTRA).lower()


class _Unsupported(Exception):
    """A construct the screen cannot relax soundly (a back reference, a conditional, a scoped flag)."""


def screen(pattern: re.Pattern) -> re.Pattern | None:
    """The screen of `pattern`, searched in `fold(text)` when `pattern` ignores case, else in `text`;
    None when there is none (the pattern then runs on every line)."""
    alternatives = _relax(pattern)
    if alternatives is None:
        return None
    return re.compile("|".join(f"(?:{source})" for source, _ in alternatives), _flags(pattern))


class Screens:
    """The screens of many patterns, searched together: one search covers the screens that start with
    the same literal character (re factors it out of the alternation and still searches for it fast);
    only when it finds something are that group's screens searched one by one."""

    def __init__(self, patterns):
        self.always: list[re.Pattern] = []  # patterns without a screen
        groups: dict[tuple, list[tuple[re.Pattern, str]]] = {}
        for i, pattern in enumerate(patterns):
            alternatives = _relax(pattern)
            if alternatives is None:
                self.always.append(pattern)
                continue
            for j, (source, lead) in enumerate(alternatives):
                key = (bool(pattern.flags & re.IGNORECASE), _flags(pattern), lead or (i, j))
                groups.setdefault(key, []).append((pattern, source))
        # (group search, its members with their own screens), for the text and for the folded text
        self.plain: list[tuple[re.Pattern, list]] = []
        self.folded: list[tuple[re.Pattern, list]] = []
        for (folded, flags, _), members in groups.items():
            joined = re.compile("|".join(f"(?:{source})" for _, source in members), flags)
            # A group of one needs no second search.
            each = [(pattern, re.compile(source, flags) if len(members) > 1 else None) for pattern, source in members]
            (self.folded if folded else self.plain).append((joined, each))

    def live(self, text: str, folded: str) -> set[re.Pattern]:
        """The patterns that may match in a line of `text` (`folded` is fold(text))."""
        found = set(self.always)
        for haystack, groups in ((text, self.plain), (folded, self.folded)):
            for members in [members for joined, members in groups if joined.search(haystack)]:
                found.update(p for p, own in members if own is None or own.search(haystack))
        return found


def _flags(pattern: re.Pattern) -> int:
    return re.DOTALL | (pattern.flags & re.ASCII)


def _relax(pattern: re.Pattern) -> list[tuple[str, str | None]] | None:
    """The screen as alternatives, each with the literal character it starts with (None: not one)."""
    if not isinstance(pattern.pattern, str) or pattern.flags & re.LOCALE:
        return None
    parsed = _parser.parse(pattern.pattern, pattern.flags)
    try:
        return _relax_items(list(parsed.data), bool(pattern.flags & re.IGNORECASE), parsed.state)
    except _Unsupported:
        return None


def _relax_items(items: list, folded: bool, state, depth: int = 0) -> list[tuple[str, str | None]] | None:
    parts = [(_source(op, av, folded), _first_chars(op, av), _parser.SubPattern(state, [(op, av)]).getwidth()[0])
             for op, av in items]
    # Start where re searches fast: at the first part that begins with one given character, else with one
    # of a few, else at the first part with a width. (A match of the whole holds a match of the rest.)
    widths = [i for i, (_, _, width) in enumerate(parts) if width]
    start = next((i for i in widths if parts[i][1] is not None and len(parts[i][1]) == 1),
                 next((i for i in widths if parts[i][1] is not None), widths[0] if widths else None))
    if start is None:
        return None
    op, av = items[start]
    first = parts[start][1]
    if depth < 2 and (first is None or len(first) > 1):
        # Not one first character: one screen per way the part starts, (A|B)C being AC|BC.
        if op is sre.BRANCH:
            spread = [_relax_items(list(alt.data) + items[start + 1:], folded, state, depth + 1) for alt in av[1]]
        elif op is sre.IN and first:
            spread = [_relax_items([(sre.LITERAL, code)] + items[start + 1:], folded, state, depth + 1)
                      for code in sorted(first)]
        else:
            spread = []
        if spread and all(spread) and sum(map(len, spread)) <= _MAX_ALTERNATIVES:
            return [alternative for alternatives in spread for alternative in alternatives]
    lead = None
    if first is not None and len(first) == 1 and (not folded or min(first) < 128):
        lead = chr(min(first)).lower() if folded else chr(min(first))
    return [("".join(source for source, _, _ in parts[start:]), lead)]


def _first_chars(op, av) -> frozenset[int] | None:
    """The few characters a part's match can start with, or None when they are many or not known."""
    if op is sre.LITERAL:
        return frozenset({av})
    if op is sre.IN and all(member is sre.LITERAL for member, _ in av) and len(av) <= _SMALL_START:
        return frozenset(code for _, code in av)
    if op is sre.SUBPATTERN and av[3].data:
        inner = av[3].data[0]
        return _first_chars(*inner)
    if op is sre.BRANCH:
        firsts = [_first_chars(*alt.data[0]) if alt.data else None for alt in av[1]]
        if all(f is not None for f in firsts):
            union = frozenset().union(*firsts)
            return union if len(union) <= _SMALL_START else None
    return None


def _sequence(items, folded: bool) -> str:
    return "".join(_source(op, av, folded) for op, av in items)


def _source(op, av, folded: bool) -> str:
    if op is sre.LITERAL:
        char = chr(av)
        if folded:
            return re.escape(char.lower()) if char.isascii() else _ANY
        return re.escape(char)
    if op is sre.NOT_LITERAL:
        return _ANY if folded else f"[^{_class_char(av)}]"
    if op is sre.ANY:
        return _ANY
    if op is sre.IN:
        return _char_class(av, folded)
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return ""  # zero width: dropping it leaves a match in place
    if op is sre.SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        if (add_flags | del_flags) & (re.IGNORECASE | re.ASCII | re.LOCALE):
            raise _Unsupported("scoped flag")
        return f"(?:{_sequence(sub.data, folded)})"
    if op is sre.ATOMIC_GROUP:
        return f"(?:{_sequence(av.data, folded)})"
    if op is sre.BRANCH:
        return "(?:" + "|".join(_sequence(alt.data, folded) for alt in av[1]) + ")"
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        low, high, sub = av
        upper = "" if high is sre.MAXREPEAT else str(high)
        return f"(?:{_sequence(sub.data, folded)}){{{low},{upper}}}"
    raise _Unsupported(str(op))


def _class_char(code: int) -> str:
    char = chr(code)
    return "\\" + char if char in "\\]^-[" else char


def _char_class(members, folded: bool) -> str:
    if not folded:
        inner = []
        for op, av in members:
            if op is sre.NEGATE:
                inner.insert(0, "^")
            elif op is sre.LITERAL:
                inner.append(_class_char(av))
            elif op is sre.RANGE:
                inner.append(f"{_class_char(av[0])}-{_class_char(av[1])}")
            elif op is sre.CATEGORY and av in _CATEGORIES:
                inner.append(_CATEGORIES[av])
            else:
                raise _Unsupported(str(op))
        return "[" + "".join(inner) + "]"
    # Ignoring case: the lowercase of each ASCII member; anything less plain matches any character.
    chars: set[str] = set()
    categories = []
    for op, av in members:
        if op is sre.LITERAL and av < 128:
            chars.add(chr(av).lower())
        elif op is sre.RANGE and av[1] < 128:
            chars.update(chr(code).lower() for code in range(av[0], av[1] + 1))
        elif op is sre.CATEGORY and av in _UNCASED_CATEGORIES:
            categories.append(_CATEGORIES[av])
        else:
            return _ANY
    return "[" + "".join(categories) + "".join(_class_char(ord(c)) for c in sorted(chars)) + "]"
