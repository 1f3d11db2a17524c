import pytest

from corpus import require_corpus


@pytest.fixture(scope="session")
def corpus():
    return require_corpus()
