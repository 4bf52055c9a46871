"""Shared fixtures: paths of the repository and its bundled tables."""

from __future__ import annotations

import atexit
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agentfsm.spec import Table, load_table
from hypothesis import settings
from private_server import Stopper

# make test is derandomised: the same examples every run, so a planted bug the oracle tests
# catch is caught on every run and a red run reproduces. make test-slow adds a run on fresh
# seeds (--hypothesis-profile=fresh).
settings.register_profile("derandomised", derandomize=True, print_blob=True)
settings.register_profile("fresh", derandomize=False, print_blob=True)
settings.load_profile("derandomised")

# In CI (CI=true, or AGENTFSM_CI=1) nothing may skip: a test that needs node, npm, spin, dot
# or PostgreSQL and skips would be a green run that tested nothing, so there each skip is a
# failure. A skip is allowed only on a developer's machine, and the summary says so.
IN_CI = os.environ.get("CI", "").lower() == "true" or os.environ.get("AGENTFSM_CI") == "1"

# With pytest -n, the controlling process's record of the private servers to stop at the end.
STOPPER = pytest.StashKey[Stopper]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where nothing may skip: {reason}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    skipped = len(terminalreporter.stats.get("skipped", []))
    if skipped:
        terminalreporter.write_line(f"{skipped} test(s) skipped: allowed only on a developer's machine; "
                                    "in CI (CI=true or AGENTFSM_CI=1) each is a failure", yellow=True)


def pytest_configure(config: pytest.Config) -> None:
    """With ``pytest -n``, the controlling process notes which private servers are down, to stop
    those its workers start (tests/private_server.py)."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        from pg_support import SERVER as PG
        from temporal_support import SERVER as TEMPORAL
        stopper = Stopper((PG, TEMPORAL))
        stopper.begin()
        config.stash[STOPPER] = stopper


def pytest_unconfigure(config: pytest.Config) -> None:
    stopper = config.stash.get(STOPPER, None)
    if stopper is not None:
        stopper.end()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A session whose tests used the Temporal SDK in-process ends before the interpreter
    finalizes, with pytest's status: the SDK's threads can abort the finalization (SIGABRT)
    after every test passed (agentfsm/impl/temporal/process_end.py). Registered last, this runs
    first among the exit handlers; a forked child that ends with os._exit never runs it."""
    from agentfsm.impl.temporal.process_end import exit_before_finalizing, used_temporal
    if used_temporal():
        atexit.register(exit_before_finalizing, int(exitstatus))

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"
TABLES = sorted(SPEC.glob("*.yaml"))


@pytest.fixture(scope="session")
def loom() -> Table:
    return load_table(SPEC / "loom-agent.yaml")


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``agentfsm ARGS`` in-process; return (exit status, stdout, stderr)."""
    from agentfsm.cli import main

    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL server for the shared-store tests: $AGENTFSM_TEST_PG_URL, else the private
    cluster of scripts/postgres.sh (started if need be, and then stopped after the session, so
    that nothing is left running). Skips only when none can be started."""
    from pg_support import SERVER
    from private_server import for_the_session
    with for_the_session(SERVER) as url:
        yield url


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """A Temporal server for the Temporal tests: $AGENTFSM_TEST_TEMPORAL_ADDRESS, else the private dev
    server of scripts/temporal.sh (started if need be, and then stopped after the session)."""
    from private_server import for_the_session
    from temporal_support import SERVER
    with for_the_session(SERVER) as address:
        yield address


@pytest.fixture(scope="session", autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The state folder of the session's processes (where a PostgreSQL run writes its protocol
    log): a temporary one, not the user's home."""
    folder = tmp_path_factory.mktemp("state")
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_STATE_HOME", str(folder))
    yield folder
    patch.undo()
