"""A real browser, a real hub and a second web site on this machine, once per module.

The browser is Debian's headless Chromium at /usr/bin/chromium driven by Playwright for Python
(scripts/test.sh installs both; `playwright install` is never run, it would download a browser).
Without it these tests fail and say how to get it: they never skip.
"""

from __future__ import annotations

import pytest
from support.chromium import CHROMIUM, launch_args
from support.hubproc import HubProcess

from .attacker import REBIND_HOST, serving


def need_chromium() -> None:
    if not CHROMIUM.exists():
        pytest.fail(f"the browser tests need headless Chromium at {CHROMIUM}: run them with bash scripts/test.sh, "
                    "which installs it, or apt-get install chromium", pytrace=False)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail("the browser tests need Playwright for Python: pip install -e '.[test]' "
                    "(never `playwright install`; the tests use Debian's Chromium)", pytrace=False)


@pytest.fixture(scope="module")
def browser():
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=launch_args(
            f"--host-resolver-rules=MAP {REBIND_HOST} 127.0.0.1"))
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def door_hub(tmp_path_factory):
    """A fresh hub with no node, on folders of its own."""
    from agentplaza.config import Folders

    root = tmp_path_factory.mktemp("door")
    f = Folders(root / "state", root / "config", root / "data").make()
    h = HubProcess(f, args=("--node", "off"))
    for name in ("APZ_TOKEN", "APZ_NODE"):
        h.env.pop(name, None)
    h.env["APZ_PRICE_FETCH"] = "off"  # tests never reach the network
    h.start()
    try:
        yield h
    finally:
        h.stop()


@pytest.fixture(scope="module")
def attacker_sites():
    """The attacker's web site on 127.0.0.1 and on 127.0.0.2: {address: port}."""
    with serving(("127.0.0.1", "127.0.0.2")) as sites:
        yield sites
