"""How the tests and the benches start Debian's headless Chromium through Playwright (never `playwright
install`, which downloads a browser)."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
#: Chromium 156 starts a renderer of its own for each new tab, the address bar's WebUI popup
#: (chrome://omnibox-popup.top-chrome/): in five of six traced page loads it kept one of the machine's two
#: cores busy for 100 to 200 ms while the page loaded (bench/console.py, docs/console.md). It is the
#: browser's own UI, which no test or bench looks at, so the browser goes without it. Chromium reads only
#: the last --disable-features, so the list repeats Playwright's own defaults first (Playwright 1.65,
#: chromiumSwitches.ts).
PLAYWRIGHT_DISABLED = ("AvoidUnnecessaryBeforeUnloadCheckSync,DestroyProfileOnBrowserClose,HttpsUpgrades,"
                       "HttpsFirstBalancedModeAutoEnable,LensOverlay,MediaRouter,PaintHolding,ThirdPartyStoragePartitioning,"
                       "AvoidCorsURLLoaderRestartOnRedirect,TcpPortRandomizationWin,OptimizationHints,"
                       "NetworkTimeServiceQuerying,AimEnabled,PreconnectToSearch")
NO_BROWSER_UI = "WebUIOmniboxPopup,WebUIOmniboxFullPopup,WebUIOmniboxAimPopup"


def launch_args(*extra: str) -> list[str]:
    """The browser's command line: no sandbox (as root Chromium refuses to start with it), no address-bar
    renderer, then the caller's own switches."""
    return ["--no-sandbox", f"--disable-features={PLAYWRIGHT_DISABLED},{NO_BROWSER_UI}", *extra]
