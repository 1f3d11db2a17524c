"""The scrub detectors' screens skip only work that finds nothing: `find` equals the unscreened scan
(every plugin pattern on every line, every personal-data pattern on the whole text) on the corpus, on
the scrub fixtures and on generated texts built from fragments every detector fires on, mixed with
arbitrary unicode. And fold() is what the screens of case-insensitive patterns assume it is."""

from __future__ import annotations

import ipaddress
import json
import re
import sys

import phonenumbers
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from corpus import CORPUS, ROOT
from pipeline.run.scrub import detectors
from pipeline.run.scrub.detectors import _find, find
from pipeline.run.scrub.screen import Screens, _relax, fold, screen
from detect_secrets.plugins.base import RegexBasedDetector


# --- the scan without screens, as find() did it before them -----------------------------------------

def _reference_secrets(text: str) -> list[detectors.Finding]:
    out = [detectors.Finding(m.start(), m.end(), "private_key", "secret") for m in detectors._PEM_BLOCK.finditer(text)]
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.strip():
            out.extend(_reference_line(line, offset))
        offset += len(line)
    return out


def _reference_line(line: str, offset: int) -> list[detectors.Finding]:
    out = []
    lowered = line.lower()
    credential_words = (any(stem in lowered for stem in detectors._CREDENTIAL_STEMS)
                        and detectors._KEYWORD_CONTEXT.search(line))
    for name, plugin in detectors._plugins():
        if isinstance(plugin, RegexBasedDetector):
            for pattern in plugin.denylist:
                for match in pattern.finditer(line):
                    start, end = detectors._secret_span(match)
                    while end < len(line) and detectors._TOKEN_CHAR.match(line[end]):
                        end += 1
                    if end - start >= 6 and not detectors._looks_fake(line[start:end], line):
                        out.append(detectors.Finding(offset + start, offset + end, name, "secret"))
            continue
        if not credential_words:
            continue
        values = {s.secret_value or "" for kind in detectors._KEYWORD_FILE_KINDS
                  for s in plugin.analyze_line(filename=kind, line=line.rstrip("\n"), line_number=0)}
        for value in sorted(values):
            if len(value) < 6 or detectors._looks_fake(value, line) or detectors._not_a_value(value, line):
                continue
            start = line.find(value)
            while start >= 0:
                out.append(detectors.Finding(offset + start, offset + start + len(value), name, "secret"))
                start = line.find(value, start + len(value))
    return out


def _reference_personal(text: str, phone_region: str | None) -> list[detectors.Finding]:
    finding = detectors.Finding
    out = [finding(m.start(), m.end(), "email_address", "personal") for m in detectors._EMAIL.finditer(text)
           if not detectors._RESERVED_DOMAIN.search(m.group())]
    for match in detectors._CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and detectors._CARD_PREFIX.match(digits) and detectors._luhn(digits):
            out.append(finding(match.start(), match.end(), "credit_card", "personal"))
    for pattern in (detectors._IPV4, detectors._IPV6):
        for match in pattern.finditer(text):
            if _reference_public_ip(match.group()):
                out.append(finding(match.start(), match.end(), "ip_address", "personal"))
    if "+" in text or phone_region:
        for match in phonenumbers.PhoneNumberMatcher(text, phone_region, leniency=phonenumbers.Leniency.VALID):
            out.append(finding(match.start, match.end, "phone_number", "personal"))
    return out


def _reference_public_ip(text: str) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return address.is_global and not address.is_multicast


def _assert_same(text: str, phone_region: str | None = None) -> None:
    secrets, personal = _reference_secrets(text), _reference_personal(text, phone_region)
    # The unmerged lists too: ties in the merge are settled by their order.
    assert detectors._secrets(text) == secrets, text
    assert detectors._personal(text, phone_region) == personal, text
    assert _find(text, phone_region) == detectors._resolve(secrets + personal)


# --- fold() and the screens ------------------------------------------------------------------------

_EVERY_CHARACTER = "".join(map(chr, range(sys.maxunicode + 1)))


def test_fold_keeps_every_character_in_place():
    assert len(fold(_EVERY_CHARACTER)) == len(_EVERY_CHARACTER)
    assert all(len(fold(c)) == 1 for c in ("\u0130", "\u0131", "\u017f", "\u212a", "\u03a3"))


@pytest.mark.parametrize("form", ["{}", "[{}]"])
def test_fold_maps_whatever_re_matches_to_an_ascii_character_onto_it(form):
    # A lowercase ASCII literal of a screen, searched in fold(text), finds every character the original
    # case-insensitive pattern matches there, as a literal or in a class.
    for code in range(128):
        char = chr(code)
        pattern = re.compile(form.format(re.escape(char)), re.IGNORECASE)
        matched = {m.group() for m in pattern.finditer(_EVERY_CHARACTER)}
        assert {fold(c) for c in matched} == {char.lower()}, char


def test_digits_and_spaces_have_no_case():
    # Screens of case-insensitive patterns keep \d and \s as they are, in the folded text.
    for category in (r"\d", r"\s"):
        chars = re.findall(category, _EVERY_CHARACTER)
        assert all(fold(c) == c for c in chars), category


def test_every_plugin_pattern_has_a_screen_that_starts_with_a_literal():
    patterns = [p for _, plugin in detectors._plugins() if isinstance(plugin, RegexBasedDetector)
                for p in plugin.denylist] + [detectors._KEYWORD_CONTEXT]
    assert Screens(patterns).always == []
    # Each way a screen can start is one given character, so re searches for it fast, in groups.
    assert all(lead for pattern in patterns for _, lead in _relax(pattern))


@pytest.mark.parametrize(("pattern", "found", "missing"), [
    (re.compile(r"(?<![\w])AKIA[0-9A-Z]{4}(?!\w)"), "xAKIAABCD", "AKIA123"),
    (re.compile(r"(?:^|\s)pass(?:word)?\s*=\s*(\w+)$", re.IGNORECASE), "PAſſWORD = x", "pas word=x"),
    (re.compile(r"[0-9a-z]{4}-us\d"), "ab-us1", "abcd-usa"),
])
def test_a_screen_is_the_pattern_relaxed(pattern, found, missing):
    relaxed = screen(pattern)
    haystack = fold if pattern.flags & re.IGNORECASE else str
    assert relaxed.search(haystack(found)) and not relaxed.search(haystack(missing))


# --- find() against the unscreened scan -----------------------------------------------------------

def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _corpus_strings() -> list[str]:
    found: set[str] = set()
    for path in sorted(CORPUS.rglob("*")):
        if path.suffix == ".json":
            found.update(_strings(json.loads(path.read_text())))
        elif path.suffix in (".jsonl", ".txt"):
            text = path.read_text()
            found.add(text)
            for line in text.splitlines():
                try:
                    found.update(_strings(json.loads(line.removeprefix("data:"))))
                except ValueError:
                    found.add(line)
    return sorted(found)


@pytest.mark.slow
@pytest.mark.corpus
def test_find_equals_the_unscreened_scan_on_every_corpus_string():
    strings = _corpus_strings()
    assert len(strings) > 10_000
    for text in strings:
        _assert_same(text)
    # Phone numbers read with a region set run on every text, not only those with a "+".
    for text in strings[::20]:
        _assert_same(text, "US")


def test_find_equals_the_unscreened_scan_on_the_scrub_fixtures():
    texts = []
    for path in sorted((ROOT / "tests" / "fixtures" / "scrub").iterdir()):
        raw = path.read_text()
        texts.append(raw)
        for line in raw.splitlines():
            try:
                texts.extend(_strings(json.loads(line.removeprefix("data:"))))
            except ValueError:
                texts.append(line)
    planted = json.loads((ROOT / "tests" / "fixtures" / "scrub_planted.json").read_text())
    texts += [p["value"] for p in planted]
    assert sum(bool(find(t)) for t in texts) >= len(planted)
    for text in texts:
        _assert_same(text)
        _assert_same(f'password = "{text}"')


# Fragments each detector fires on (or nearly does), case variants, and the characters re folds onto
# ASCII letters, mixed with arbitrary text and every kind of line break.
_FRAGMENTS = [
    "AKIAIOSFODNN7EXAMPLE", "AKIAQ7RZ3K5M2XWV4HJB", "ASIA", "A3TX", "aws_secret_access_key = ",
    "\"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"", "AccountKey=", "ghp_", "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "glpat-", "glpat-abcdefghij0123456789", "GR1348941", "xoxb-", "xoxb-1234-5678-abcdef", "XOXP-12-ab",
    "sk_live_", "sk_live_0123456789abcdefghijklmn", "rk_live_", "eyJ", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.",
    "sk-", "T3BlbkFJ", "SG.", "sq0csp-", "pypi-AgEIcHlwaS5vcmc", "AP6", "AKC", "-us12", "12345678:",
    "https://hooks.slack.com/services/T000/B000/xyz", "https://user:hunter2secret@host.example.org",
    "password=", "password = ", "PASSWORD: ", "db_pass=", "api_key: ", "Secret=", "token ", "Bearer ",
    "contraseña=", "cloudant_password=", "ibm_cloud_iam_key: ", "softlayer_api_key=", "secret_access_key=",
    "s3cr3tV4lu3xYz", "Zm9vYmFyYmF6cXV4cXV1eA==", "0123456789abcdef0123456789abcdef", "$SECRET", "<password>",
    "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "BEGIN OPENSSH PRIVATE KEY",
    "PuTTY-User-Key-File-2", "mia.li3818@gmail.com", "a@b.co", "x@example.com", "@", "4111 1111 1111 1111",
    "4111-1111-1111-1111", "5500000000000004", "378282246310005", "8.8.8.8", "203.0.113.9", "1.2.3",
    "2001:4860:4860::8888", "fe80::1", "2606:4700:4700::1111", "15:00:00", "abcd:ef01::", "::",
    "+1 650-253-0000", "+44 20 7946 0958", "+", "(650) 253-0000", "+1", "\u0130", "\u0131", "\u017f", "\u212a",
    "PA\u017f\u017fWORD=", "A\u212aIA", "\u0130BM_CLOUD_IAM_KEY=", "tok\u0130n ", "\u03a3", "=", ":", "\"", "'",
    " ", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029", "\t",
]
_TEXT = st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=12)
                 | st.text(alphabet="0123456789abcdefABCDEF:.-_ +=@/", max_size=24), max_size=30).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_TEXT, st.sampled_from([None, None, None, "US"]))
@example("line one\nAKIAIOSFODNN7EXAMPLE\r\npassword = \"s3cr3tV4lu3xYz\"", None)
@example("PA\u017f\u017fWORD = \"s3cr3tV4lu3xYz\" at 2001:4860:4860::8888 or +1 650-253-0000", None)
@example("15:00:00 2001:db8::1 fe80::1:2:3:4 1::2 a:b:c:d:e:f:1:2", None)
def test_find_equals_the_unscreened_scan_on_generated_texts(text, region):
    _assert_same(text, region)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(alphabet="0123456789abcdefABCDEF", min_size=0, max_size=5), min_size=1, max_size=10)
       .map(":".join))
@example("2001:4860:4860:0:0:0:0:8888")
@example("15:00:00")
def test_public_ip_refuses_a_colon_string_as_ip_address_does(text):
    assert detectors._public_ip(text) == _reference_public_ip(text)
