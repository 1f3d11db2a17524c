"""Placeholder until the codec lands."""

NAME = "openai-chat"


def detect(obj):
    return None


def parse(obj, shape=None, strict=False):
    raise NotImplementedError


def serialize(conv, shape="request", ledger=None):
    raise NotImplementedError
