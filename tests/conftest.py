"""Shared fixtures: private folders for every test, and one PostgreSQL per run.

Every store-backed test runs twice, on SQLite and on the PostgreSQL that this
file starts itself (or the one named by APZ_TEST_PG_ADMIN_URL).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support.hubproc import stop_left_over  # noqa: E402
from support.pg import TempPostgres  # noqa: E402

os.environ.setdefault("POSTGRES_PASSWORD", "")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The test command runs the suite on several workers (pytest-xdist, ``--dist loadgroup``). Tests that
    boot microVMs all go to one worker, one after another: under TCG each boot takes a whole core, and their
    machines' cgroups and jail uids are named by machine name and CID, which two hubs would share.

    First of the hooks: xdist's own (on each worker) names the group from these marks."""
    for item in items:
        if item.get_closest_marker("vm"):
            item.add_marker(pytest.mark.xdist_group("vm"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report kept on the test (``rep_setup``, ``rep_call``): a fixture's teardown asks
    ``support.hubproc.failed`` whether the test failed, to print what the hub was doing."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


@pytest.fixture(autouse=True)
def vm_tests_run_in_one_group(request):
    """Under ``--dist loadgroup`` a vm test's id carries xdist's group suffix, so the scheduler sends every
    one to the same worker; if a pytest or xdist upgrade drops it, the VM tests would boot side by side on
    every worker and time out under load: fail at once and say so instead."""
    if request.node.get_closest_marker("vm") and getattr(request.config.option, "loadgroup", False) \
            and not request.node.nodeid.endswith("@vm"):
        pytest.fail(f"{request.node.nodeid} is not in xdist's 'vm' group: the VM tests are not serialised "
                    "(pytest-xdist no longer groups by xdist_group with this pytest)")


class _Pg:
    def __init__(self, admin_url: str | None, server: TempPostgres | None):
        self.server = server
        self.admin_url = admin_url or server.admin_url

    def new_database(self) -> str:
        if self.server:
            return self.server.new_database()
        import uuid

        import psycopg

        name = "apz_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        base = self.admin_url.rsplit("/", 1)[0]
        return f"{base}/{name}"


@pytest.fixture(autouse=True, scope="module")
def no_hub_left_running():
    """Every hub process a module's tests started is gone when the module ends (a restarted hub in a
    kill -9 test, a hub a test forgot): left running, each polls the log for the rest of the run."""
    yield
    stop_left_over()


@pytest.fixture(scope="session")
def postgres():
    given = os.environ.get("APZ_TEST_PG_ADMIN_URL")
    if given:
        yield _Pg(given, None)
        return
    server = TempPostgres().start()
    try:
        yield _Pg(None, server)
    finally:
        server.stop()


@pytest.fixture
def folders(tmp_path, monkeypatch):
    from agentplaza.config import Folders

    f = Folders(tmp_path / "state", tmp_path / "config", tmp_path / "data").make()
    monkeypatch.setenv("APZ_STATE_DIR", str(f.state))
    monkeypatch.setenv("APZ_CONFIG_DIR", str(f.config))
    monkeypatch.setenv("APZ_DATA_DIR", str(f.data))
    monkeypatch.delenv("APZ_DATABASE_URL", raising=False)
    monkeypatch.delenv("APZ_HUB", raising=False)
    monkeypatch.delenv("APZ_TOKEN", raising=False)
    monkeypatch.setenv("APZ_PRICE_FETCH", "off")  # tests never reach the network
    return f


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request):
    return request.param


@pytest.fixture
def database_url(backend, request):
    """None for SQLite (the state folder), a fresh database for Postgres."""
    if backend == "sqlite":
        return None
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture
def hub(folders, database_url):
    """A real apid process on this test's folders (and database)."""
    from support.hubproc import HubProcess

    h = HubProcess(folders, database_url).start()
    yield h
    h.stop()
