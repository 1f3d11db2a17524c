"""The scrub stage: after validation, before shaping. Each finding is redacted (a `redacted` ledger
entry), turns the record into a rejection, or is only reported (a warning issue), by the detector's
action; a record leaving as a rejection, at any stage, has its stored record and message scrubbed too,
so the rejects file never holds what the written rows do not."""

from __future__ import annotations

from ...ledger import LedgerEntry
from ...validate import Issue
from ..item import Item, reject
from .redact import Redactor

TARGET = "scrub"
REJECT_CODES = {"secret": "secret_found", "personal": "personal_data_found"}
REPORT_CODES = {"secret": "possible_secret", "personal": "possible_personal_data"}


class Scrubber:
    def __init__(self, config):  # a run.config.ScrubConfig
        self.config = config
        self.region = config.phone_region or None

    def action(self, detector: str) -> str:
        return self.config.actions.get(detector, self.config.action)

    def redactor(self) -> Redactor:
        return Redactor(phone_region=self.region, apply=lambda d: self.action(d) != "report")

    def scrub(self, item: Item) -> Item:
        redactor = self.redactor()
        item.conversation = redactor.conversation(item.conversation)
        item.scrubbed = redactor
        refused = None
        for hit in redactor.hits:
            action = self.action(hit.detector)
            if action == "report":
                item.issues.append(Issue(REPORT_CODES[hit.kind], "warning", hit.path,
                                         f"possible {hit.detector.replace('_', ' ')} in {hit.where} (kept)"))
                continue
            item.ledger.append(LedgerEntry("redacted", hit.path, f"{hit.detector} in {hit.where}", TARGET,
                                           detector=hit.detector))
            if action == "reject" and refused is None:
                refused = hit
        if refused is not None:
            reject(item, "scrub", REJECT_CODES[refused.kind],
                   f"{refused.detector.replace('_', ' ')} in {refused.where} ([scrub.actions] says reject)",
                   refused.path)
        return item

    def clean_rejection(self, item: Item) -> None:
        """What a rejection stores (record, message, flagged text) without secrets, whichever stage
        rejected it: values found in the conversation first, then a scan of the record itself."""
        redactor = getattr(item, "scrubbed", None) or self.redactor()
        redactor.apply = lambda d: True
        item.record = redactor.raw(item.record)
        outcome = item.outcome
        detail = outcome.detail
        if detail is not None:
            detail = {k: redactor.raw(v) if k == "text" else v for k, v in detail.items()}
        item.outcome = outcome._replace(message=redactor.raw(outcome.message), detail=detail)
