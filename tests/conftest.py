"""Shared test settings: Hypothesis profiles, paths, and the kinds of test (tests/kinds.py)."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import kinds

# The pty fixtures of the bridge tests (``pair``, ``peer``) and a simulated base's port
# (``mecanum``), for every test module;
# FIXTURES for the modules that take it from here.
from tests.helpers import FIXTURES, controller, mecanum, pair, peer  # noqa: F401

# "ci" keeps the suite to a few minutes on two cores; "long" is for hunting.
# Health checks judge the generators, not the code: on a loaded two-core CI
# machine they fail at random, so the ci profile does not let them fail a run.
settings.register_profile(
    "ci", max_examples=150, deadline=None, derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)
settings.register_profile("long", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# The kinds of test (tests/kinds.py): marked at collection, held to them while they run.
_GUARD = kinds.GUARD


def pytest_configure(config: object) -> None:
    # python-can's vendored Back2Back suite marks two tests with pytest-timeout's marker
    config.addinivalue_line(  # type: ignore[attr-defined]
        "markers", "timeout(seconds): pytest-timeout's limit (inert without the plugin)")
    _GUARD.install()


def pytest_unconfigure(config: object) -> None:
    _GUARD.uninstall()


@pytest.hookimpl(tryfirst=True)  # before -m selects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    kinds.mark(items)


def _watched(item: pytest.Item) -> Generator[None, object, object]:
    _GUARD.watching(item)
    try:
        result = yield
    except BaseException as exc:
        caught = _GUARD.done()
        if caught is None or (isinstance(exc, pytest.fail.Exception) and exc.msg == caught):
            raise
        # what the test did without its mark, not what followed from the refusal
        raise pytest.fail.Exception(caught, pytrace=False) from exc
    caught = _GUARD.done()
    if caught is not None:  # refused in a thread, or caught by the test
        pytest.fail(caught, pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _watched(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _watched(item))


@pytest.fixture(autouse=True, scope="session")
def _private_bus_daemons(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # A shared bus the user left running ('fwbridge can bus up sim0') would take in every
    # test's fwbridge Bus on that channel: the tests look for daemons in a directory of their own.
    d = tmp_path_factory.mktemp("fwbridge-run")
    d.chmod(0o700)
    old = os.environ.get("FWBRIDGE_RUNTIME_DIR")
    os.environ["FWBRIDGE_RUNTIME_DIR"] = str(d)
    yield
    if old is None:
        os.environ.pop("FWBRIDGE_RUNTIME_DIR", None)
    else:
        os.environ["FWBRIDGE_RUNTIME_DIR"] = old


@pytest.fixture
def rundir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private runtime directory for the shared buses (daemons) of one test."""
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("FWBRIDGE_RUNTIME_DIR", str(d))
    return d
