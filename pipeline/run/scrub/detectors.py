"""What counts as a secret or as personal data in a string: detect-secrets' plugins for credentials,
phonenumbers (libphonenumber) for phone numbers, and checked patterns for e-mail addresses, payment
cards (Luhn) and public IP addresses. Each finding is a span of the string and the detector's name."""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from typing import NamedTuple

import phonenumbers
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters import heuristic
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.keyword import DENYLIST as KEYWORDS

from .screen import Screens, fold, screen


class Finding(NamedTuple):
    start: int
    end: int
    detector: str
    kind: str  # "secret" or "personal"


# detect-secrets' own IP plugin is superseded by `ip_address` (v4 and v6, public only).
_SKIPPED_PLUGINS = {"IPPublicDetector"}
# High-entropy strings count only next to a word that says "credential": a commit hash, a request id or a
# base64 image alone is not a secret.
# Substrings every keyword above contains, checked before the (slower) keyword regex.
_CREDENTIAL_STEMS = ("key", "pass", "pwd", "secret", "contrase", "token", "credential", "auth", "bearer")
_KEYWORD_CONTEXT = re.compile("|".join(KEYWORDS + ("token", "credential", "auth", "bearer")), re.IGNORECASE)
_KEYWORD_SCREEN = screen(_KEYWORD_CONTEXT)  # searched in fold(text), far faster than ignoring case
# A transcript holds code and configuration alike: assignments are read as in Python (quoted), YAML
# (`key: value`) and config files (`KEY=value`).
_KEYWORD_FILE_KINDS = ("transcript.py", "transcript.yaml", "transcript.cfg")
_PEM_BLOCK = re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY[A-Z ]*-----.*?(?:-----END[A-Z ]*PRIVATE KEY[A-Z ]*-----|\Z)",
                        re.DOTALL)


def _snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


@lru_cache(maxsize=1)
def _plugins() -> tuple[tuple[str, object], ...]:
    found = []
    for secret_type, cls in sorted(get_mapping_from_secret_type_to_class().items()):
        if cls.__name__ in _SKIPPED_PLUGINS:
            continue
        found.append((_snake(secret_type), cls()))
    return tuple(found)


SECRET_DETECTORS = tuple(name for name, _ in _plugins())
PERSONAL_DETECTORS = ("email_address", "phone_number", "credit_card", "ip_address")
DETECTORS = SECRET_DETECTORS + PERSONAL_DETECTORS


# Logs repeat the same texts (system prompts, tool descriptions, replayed turns) in every record: the
# findings of each text are kept, up to this many characters of text per process, then forgotten at once.
CACHE_CHARS = 16_000_000
_cache: dict[tuple[str, str | None], tuple[Finding, ...]] = {}
_cached_chars = 0


def find(text: str, *, phone_region: str | None = None) -> list[Finding]:
    """Every secret and piece of personal data in `text`, as non-overlapping spans, earliest first
    (overlaps resolved as below)."""
    global _cached_chars
    if not text or len(text) < 6:
        return []
    key = (text, phone_region)
    known = _cache.get(key)
    if known is None:
        known = tuple(_find(text, phone_region))
        if _cached_chars + len(text) > CACHE_CHARS:
            _cache.clear()
            _cached_chars = 0
        _cache[key] = known
        _cached_chars += len(text)
    return list(known)


def _find(text: str, phone_region: str | None) -> list[Finding]:
    return _resolve(_secrets(text) + _personal(text, phone_region))


def _resolve(found: list[Finding]) -> list[Finding]:
    # Where two overlap, a secret wins over personal data (`://user:PASSWORD@host` is not an e-mail),
    # then the longer span.
    found.sort(key=lambda f: (f.start, f.kind != "secret", -(f.end - f.start)))
    kept: list[Finding] = []
    for finding in found:
        if kept and finding.start < kept[-1].end:
            continue
        kept.append(finding)
    return kept


# --- secrets ---------------------------------------------------------------------------------------

def _secrets(text: str) -> list[Finding]:
    out: list[Finding] = []
    for match in _PEM_BLOCK.finditer(text):
        out.append(Finding(match.start(), match.end(), "private_key", "secret"))
    # A line is part of the text: a pattern whose screen finds nothing in the text matches no line (the
    # credential-word pattern included).
    live = _screens().live(text, fold(text))
    if not live:
        return out
    keywords = _KEYWORD_CONTEXT in live
    live.discard(_KEYWORD_CONTEXT)
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.strip():
            out.extend(_secrets_in_line(line, offset, live, keywords))
        offset += len(line)
    return out


@lru_cache(maxsize=1)
def _screens() -> Screens:
    return Screens([_KEYWORD_CONTEXT, *(pattern for _, _, patterns in _plugin_patterns() for pattern in patterns or ())])


@lru_cache(maxsize=1)
def _plugin_patterns() -> tuple[tuple[str, object, tuple[re.Pattern, ...] | None], ...]:
    """Each plugin with the patterns of a regex plugin (None for the keyword and entropy plugins)."""
    return tuple((name, plugin, tuple(plugin.denylist) if isinstance(plugin, RegexBasedDetector) else None)
                 for name, plugin in _plugins())


def _secrets_in_line(line: str, offset: int, live: set[re.Pattern], keywords: bool) -> list[Finding]:
    out: list[Finding] = []
    credential_words = (keywords and any(stem in line.lower() for stem in _CREDENTIAL_STEMS)
                        and _KEYWORD_SCREEN.search(fold(line)) and _KEYWORD_CONTEXT.search(line))
    if not live and not credential_words:
        return out
    for name, plugin, patterns in _plugin_patterns():
        if patterns is not None:
            for pattern in patterns:
                if pattern not in live:
                    continue
                for match in pattern.finditer(line):
                    start, end = _secret_span(match)
                    while end < len(line) and _TOKEN_CHAR.match(line[end]):  # JWT: its signature too
                        end += 1
                    if end - start >= 6 and not _looks_fake(line[start:end], line):
                        out.append(Finding(offset + start, offset + end, name, "secret"))
            continue
        if not credential_words:  # the keyword and entropy plugins only fire beside a credential word
            continue
        values = {s.secret_value or "" for kind in _KEYWORD_FILE_KINDS
                  for s in plugin.analyze_line(filename=kind, line=line.rstrip("\n"), line_number=0)}
        for value in sorted(values):
            if len(value) < 6 or _looks_fake(value, line) or _not_a_value(value, line):
                continue
            start = line.find(value)
            while start >= 0:
                out.append(Finding(offset + start, offset + start + len(value), name, "secret"))
                start = line.find(value, start + len(value))
    return out


def _secret_span(match: re.Match) -> tuple[int, int]:
    """The secret inside a pattern's match: its first group when the pattern frames it with context
    (`://user:PASSWORD@`), the whole match when the group is only the key's prefix (`ghp`_...)."""
    if match.re.groups and match.group(1) and match.start(1) > match.start():
        return match.span(1)
    return match.span()


def _looks_fake(secret: str, line: str) -> bool:
    """detect-secrets' own false-positive heuristics: templates, sequences, UUIDs, indirect references."""
    return (heuristic.is_templated_secret(secret) or heuristic.is_sequential_string(secret)
            or heuristic.is_potential_uuid(secret) or heuristic.is_prefixed_with_dollar_sign(secret)
            or heuristic.is_not_alphanumeric_string(secret)
            or (secret.startswith("<") and secret.endswith(">")))


_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_\-+/=]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[._][A-Za-z0-9_]+)+|[a-z]+")
_PLACEHOLDERS = {"changeme", "password", "secret", "example", "redacted", "required", "optional", "string"}


def _not_a_value(value: str, line: str) -> bool:
    """A keyword's right-hand side that is code or prose, not a credential: a variable (`password_input`,
    `self.pw`), a call or index (`os.environ[...]`), words with spaces, a placeholder."""
    return (" " in value.strip() or bool(_IDENTIFIER.fullmatch(value)) or heuristic.is_indirect_reference(line)
            or value.strip("'\"").lower() in _PLACEHOLDERS or value.endswith(("(", "[", "{")))


# --- personal data ---------------------------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@(?:[A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,24}\b")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){2,7}(?::|[0-9A-Fa-f]{1,4})(?![\w:])|(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){1,6}:[0-9A-Fa-f]{1,4}(?![\w:])")
# Domains reserved for documentation and tests (RFC 2606, RFC 6761): nobody's address.
_RESERVED_DOMAIN = re.compile(r"@(?:[\w-]+\.)*(?:example\.(?:com|net|org)|[\w-]+\.(?:example|test|invalid|localhost))$|@localhost$",
                              re.IGNORECASE)
# Strings every match of a pattern above contains, searched first (each pattern starts with a lookbehind,
# so re tries it at every position). Card and IPv4 screens read the text with each ASCII digit as "0".
_DIGITS_AS_ZERO = bytes(ord("0") if chr(b) in "0123456789" else b for b in range(256))
_CARD_SCREEN = b"0" * 13  # thirteen digits, once the separators (" ", "-") between them are gone
_IPV4_SCREEN = re.compile(rb"0\.0{1,3}\.0{1,3}\.0")  # the middle of a dotted quad
# Every match of either form of _IPV6 starts one to four hex digits before its first colon, which has a
# second group or a second colon after it.
_IPV6_FIRST_COLON = re.compile(r":(?<=[0-9A-Fa-f]:)(?=[0-9A-Fa-f]{1,4}:|:)")
# Issuer prefixes of the card networks (Visa, Mastercard, Amex, Discover, JCB, Diners, UnionPay):
# a Luhn-valid digit run without one is more likely an id than a card.
_CARD_PREFIX = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|6(?:011|5|4[4-9]|22)|35|30[0-5]|36|38|62)")


def _personal(text: str, phone_region: str | None) -> list[Finding]:
    out = []
    if "@" in text:
        out += [Finding(m.start(), m.end(), "email_address", "personal") for m in _EMAIL.finditer(text)
                if not _RESERVED_DOMAIN.search(m.group())]
    # In an ASCII text the only characters \d matches are 0-9.
    zeroed = text.encode("ascii").translate(_DIGITS_AS_ZERO) if text.isascii() else None
    if zeroed is None or _CARD_SCREEN in zeroed.translate(None, b" -"):
        for match in _CARD.finditer(text):
            digits = re.sub(r"\D", "", match.group())
            if 13 <= len(digits) <= 19 and _CARD_PREFIX.match(digits) and _luhn(digits):
                out.append(Finding(match.start(), match.end(), "credit_card", "personal"))
    ipv4 = _IPV4.finditer(text) if zeroed is None or _IPV4_SCREEN.search(zeroed) else ()
    for match in (*ipv4, *_ipv6_matches(text)):
        if _public_ip(match.group()):
            out.append(Finding(match.start(), match.end(), "ip_address", "personal"))
    if "+" in text or phone_region:
        leniency = phonenumbers.Leniency.VALID
        for match in phonenumbers.PhoneNumberMatcher(text, phone_region, leniency=leniency):
            out.append(Finding(match.start, match.end, "phone_number", "personal"))
    return out


def _ipv6_matches(text: str) -> list[re.Match]:
    """What _IPV6.finditer(text) gives, trying the pattern only where a match can start (re's match at a
    position sees the whole text, as finditer does; each match is the leftmost one after the last)."""
    found: list[re.Match] = []
    end = tried = 0
    for colon in _IPV6_FIRST_COLON.finditer(text):
        for start in range(max(colon.start() - 4, end, tried), colon.start()):
            match = _IPV6.match(text, start)
            if match:
                found.append(match)
                end = match.end()  # at or past this colon: no match is shorter than four characters
                break
        tried = max(tried, colon.start())
    return found


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _public_ip(text: str) -> bool:
    """Addresses that can point at a person: global ones. Loopback, private ranges, documentation
    ranges and version-like strings (`1.2.3.4` in a changelog is as likely) are left alone."""
    if ":" in text and "::" not in text and text.count(":") != 7:
        return False  # not IPv6 (eight groups, or "::"): a time of day, which ip_address would refuse slowly
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return address.is_global and not address.is_multicast
