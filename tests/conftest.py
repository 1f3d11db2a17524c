import pytest

from corpus import require_corpus


@pytest.fixture(scope="session")
def corpus():
    return require_corpus()


def pytest_runtest_setup(item):
    """A test (or parameter) marked `corpus` skips without the corpus, and fails without it under CI."""
    if item.get_closest_marker("corpus") is not None:
        require_corpus()
