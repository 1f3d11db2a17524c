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
    found = _secrets(text) + _personal(text, phone_region)
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
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.strip():
            out.extend(_secrets_in_line(line, offset))
        offset += len(line)
    return out


def _secrets_in_line(line: str, offset: int) -> list[Finding]:
    out: list[Finding] = []
    lowered = line.lower()
    credential_words = any(stem in lowered for stem in _CREDENTIAL_STEMS) and _KEYWORD_CONTEXT.search(line)
    for name, plugin in _plugins():
        if isinstance(plugin, RegexBasedDetector):
            for pattern in plugin.denylist:
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
# Issuer prefixes of the card networks (Visa, Mastercard, Amex, Discover, JCB, Diners, UnionPay):
# a Luhn-valid digit run without one is more likely an id than a card.
_CARD_PREFIX = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|6(?:011|5|4[4-9]|22)|35|30[0-5]|36|38|62)")


def _personal(text: str, phone_region: str | None) -> list[Finding]:
    out = [Finding(m.start(), m.end(), "email_address", "personal") for m in _EMAIL.finditer(text)
           if not _RESERVED_DOMAIN.search(m.group())]
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _CARD_PREFIX.match(digits) and _luhn(digits):
            out.append(Finding(match.start(), match.end(), "credit_card", "personal"))
    for pattern in (_IPV4, _IPV6):
        for match in pattern.finditer(text):
            if _public_ip(match.group()):
                out.append(Finding(match.start(), match.end(), "ip_address", "personal"))
    if "+" in text or phone_region:
        leniency = phonenumbers.Leniency.VALID
        for match in phonenumbers.PhoneNumberMatcher(text, phone_region, leniency=leniency):
            out.append(Finding(match.start, match.end, "phone_number", "personal"))
    return out


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _public_ip(text: str) -> bool:
    """Addresses that can point at a person: global ones. Loopback, private ranges, documentation
    ranges and version-like strings (`1.2.3.4` in a changelog is as likely) are left alone."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return address.is_global and not address.is_multicast
