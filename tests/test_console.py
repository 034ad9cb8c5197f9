"""The web console's files, as the hub serves them (issue 18): at ``/`` and under ``/console/``, open
before a sign-in (they hold no plaza data), with a strict Content-Security-Policy, never framed, and
nothing outside the console's folder.  The files themselves hold to the console's rules: no inline
script, no HTML built from strings, no eval, nothing kept in the browser's storage, nothing fetched from
another origin.  tests/browser/test_console.py drives them in a real browser."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch

import pytest
from support.hubproc import ROOT, HubProcess

from agentplaza.api.routes.console import CONSOLE_CSP, CONSOLE_DIR, IMMUTABLE, MEDIA_TYPES, digest, preload_order

FILES = sorted(p for p in CONSOLE_DIR.rglob("*") if p.is_file())
SCRIPTS = [p for p in FILES if p.suffix == ".js"]
#: What no console script may contain, each with the rule it breaks.
FORBIDDEN = {
    r"\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write": "HTML from strings (text is set as text)",
    r"\beval\(|new Function\(": "code from strings",
    r"localStorage|sessionStorage|indexedDB": "the browser's storage (the owner token is never kept)",
    r"https?://(?!www\.w3\.org/2000/svg)": "another origin",
}


@pytest.fixture(scope="module")
def locked_hub(tmp_path_factory):
    from agentplaza.config import Folders

    root = tmp_path_factory.mktemp("console-files")
    f = Folders(root / "state", root / "config", root / "data").make()
    h = HubProcess(f, args=("--node", "off", "--loopback-trust", "off"))
    h.env.pop("APZ_TOKEN", None)
    h.env["APZ_PRICE_FETCH"] = "off"
    h.start()
    try:
        yield h
    finally:
        h.stop()


def test_the_front_page_and_its_files_are_served_open_with_a_strict_policy(locked_hub):
    with locked_hub.client() as c:
        assert c.get("/v1/hub").status_code == 401  # the plaza itself wants a sign-in
        page = c.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.headers["content-security-policy"] == CONSOLE_CSP
        assert page.headers["x-frame-options"] == "DENY" and page.headers["x-content-type-options"] == "nosniff"
        for path in FILES:
            r = c.get("/console/" + path.relative_to(CONSOLE_DIR).as_posix())
            assert r.status_code == 200, path
            assert r.headers["content-type"] == MEDIA_TYPES[path.suffix], path
            assert r.content == path.read_bytes()


def test_the_front_page_names_each_file_under_the_digest_of_all_of_them(locked_hub):
    """A file at /console/<digest>/... is kept by the browser; a new install is a new digest, so an old page's
    address (or none) is never kept."""
    with locked_hub.client() as c:
        page = c.get("/").text
        # main.js, which holds the frame's modules, is preloaded; the screens load when opened
        assert page.count('rel="modulepreload"') == len(preload_order()) < len(SCRIPTS)
        assert 'js/main.js"' in page and "js/ui.js" not in page and "js/screens/treasury.js" not in page
        named = re.findall(r'(?:href|src)="(/console/[^"]+)"', page)
        assert named and all(u.startswith(f"/console/{digest()}/") for u in named), named
        for url in named:
            r = c.get(url)
            assert r.status_code == 200 and r.headers["cache-control"] == IMMUTABLE, url
        old = c.get("/console/0123456789abcdef/js/main.js")
        assert old.status_code == 200 and old.headers["cache-control"] == "no-store"
        assert c.get("/").headers["cache-control"] == "no-store"


@pytest.mark.parametrize("path", ["/console/../routes/console.py", "/console/%2e%2e/routes/console.py",
                                  "/console/js/../../routes/console.py", "/console/", "/console/js",
                                  "/console/.hidden.js", "/console/nothing.js", "/console/index.py"])
def test_nothing_else_is_served_from_the_console_folder(locked_hub, path):
    with locked_hub.client() as c:
        r = c.get(path)
    assert r.status_code in (401, 404), (path, r.status_code)
    assert "def " not in r.text


def test_the_policy_allows_no_inline_script_and_no_other_origin():
    directives = dict(d.strip().split(" ", 1) for d in CONSOLE_CSP.split(";"))
    assert directives["script-src"] == "'self'" and directives["default-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'" and directives["form-action"] == "'none'"
    assert "unsafe" not in CONSOLE_CSP and "http" not in CONSOLE_CSP and "*" not in CONSOLE_CSP


def test_the_pages_carry_no_inline_script():
    for page in (p for p in FILES if p.suffix == ".html"):
        text = page.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            assert "src=" in tag, (page.name, tag)
        assert not re.search(r"<script\b[^>]*>\s*[^<\s]", text), page.name
        assert not re.search(r"\son[a-z]+=", text), page.name  # no inline event handlers
        assert "style=" not in text, page.name


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.relative_to(CONSOLE_DIR).as_posix() for s in SCRIPTS])
def test_the_scripts_keep_the_consoles_rules(script):
    text = script.read_text()
    broken = [rule for pattern, rule in FORBIDDEN.items() if re.search(pattern, text)]
    assert not broken, f"{script.name}: {', '.join(broken)}"


def test_every_module_opens_with_v8s_compile_hint():
    """Every console module, and main.js as the hub writes it, opens with V8's compile hint: its functions
    are compiled as the file is read, off the main thread, not one by one as the first screen draws.
    early.js, a classic script, is read from V8's code cache instead."""
    from agentplaza.api import console_bundle
    from agentplaza.api.routes.console import bundle

    for script in SCRIPTS:
        if script.name != "early.js":
            assert script.read_text().startswith(console_bundle.COMPILE_HINT + "\n"), script.name
    assert bundle().text.decode().startswith(console_bundle.COMPILE_HINT + "\n")


def test_every_console_file_is_installed_with_the_package():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["agentplaza"]
    package = ROOT / "agentplaza"
    for path in FILES:
        rel = path.relative_to(package).as_posix()
        assert any(fnmatch(rel, g) and rel.count("/") == g.count("/") for g in globs), rel
        assert path.suffix in MEDIA_TYPES, rel


def test_the_bench_fetches_what_the_screens_read_first():
    """bench/console.py's baseline fetches the same requests as the screen: the plaza's state and the
    screen's first reads, which early.js starts as the page opens."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_console", ROOT / "bench" / "console.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    early = (CONSOLE_DIR / "js" / "early.js").read_text()
    block = early[early.index("FIRST_READS = {"):]
    block = block[:block.index("};")]
    first = {name: re.findall(r'"([^"]+)"', paths) for name, paths in re.findall(r"(\w+): \[([^\]]*)\]", block)}
    assert set(first) == set(bench.READS)
    for screen, paths in bench.READS.items():
        assert sorted(paths) == sorted(["/v1/plaza", *first[screen]]), screen


def test_early_js_runs_first_as_a_classic_script_and_speaks_the_streams_subprotocol():
    """early.js starts the opened screen's reads before the page's first layout: a classic script in the
    head, neither async nor deferred nor a module, before the stylesheet (a classic script waits for the
    stylesheets above it); it opens the first socket with live.js's subprotocol."""
    page = (CONSOLE_DIR / "index.html").read_text()
    tags = re.findall(r"<(script|link)\b([^>]*)>", page)
    first = tags[0]
    assert first[0] == "script" and 'src="/console/js/early.js"' in first[1], tags
    assert not re.search(r"\b(async|defer|type)\b", first[1]), first
    assert "js/early.js" not in preload_order()
    early = (CONSOLE_DIR / "js" / "early.js").read_text()
    # A classic script: no module syntax (import() of the screen's module is a classic script's too).
    assert not re.search(r"^\s*(import|export)\b(?!\()", early, re.M)
    live = (CONSOLE_DIR / "js" / "live.js").read_text()
    proto = re.compile(r'SUBPROTOCOL = "([^"]+)"')
    assert proto.search(early).group(1) == proto.search(live).group(1) == "apz.events.v1"


def test_the_frames_modules_are_served_in_main_js_and_the_screens_import_it(locked_hub):
    """Under the digest, main.js holds every module of its static closure (one file to read and compile),
    api.js and ui.js included, and exports their names; a screen (or chips.js) that imports them is served
    with those imports addressed to main.js, so the frame and the screens share one instance of each.
    Under no digest, each file is served as it is."""
    from agentplaza.api.routes.console import bundle

    b = bundle()
    assert b is not None, "a console module breaks a rule console_bundle.py relies on (the hub's log says which)"
    assert set(b.written_in) == {"js/main.js", "js/frame.js", "js/live.js", "js/signin.js", "js/screens/index.js",
                                 "js/api.js", "js/ui.js"}
    assert b.separate == () and preload_order() == ["js/main.js"]
    assert {"js/chips.js", "js/screens/overview.js", "js/screens/treasury.js"} <= set(b.rewritten)
    with locked_hub.client() as c:
        served = c.get(f"/console/{digest()}/js/main.js")
        plain = c.get("/console/js/main.js")
        screen = c.get(f"/console/{digest()}/js/screens/treasury.js")
        plain_screen = c.get("/console/js/screens/treasury.js")
    assert served.content == b.text and plain.content == (CONSOLE_DIR / "js" / "main.js").read_bytes()
    assert screen.content == b.rewritten["js/screens/treasury.js"] and screen.headers["cache-control"] == IMMUTABLE
    assert plain_screen.content == (CONSOLE_DIR / "js" / "screens" / "treasury.js").read_bytes()
    assert set(re.findall(r'^import \{[^}]*\} from "([^"]+)";$', screen.text, re.M)) == {"../main.js"}
    text = b.text.decode()
    assert not re.findall(r"^import\b", text, re.M)
    assert re.search(r"^export const get = ", text, re.M) and re.search(r"^export function h\(", text, re.M)
    assert 'import("./screens/treasury.js")' in text and 'import("./treasury.js")' not in text
    lines = set(text.splitlines())
    for module in b.written_in:  # each module's every line but its imports is in it
        for line in (CONSOLE_DIR / module).read_text().splitlines():
            if module.startswith("js/screens/"):
                line = line.replace('import("./', 'import("./screens/')
            assert line.startswith("import {") or line in lines, (module, line)
    for module, served_text in b.rewritten.items():  # as the file, but for the addresses of its imports
        mine = (CONSOLE_DIR / module).read_text().splitlines()
        theirs = served_text.decode().splitlines()
        assert len(mine) == len(theirs)
        for a, z in zip(mine, theirs):
            assert a == z or (a.startswith("import {") and a.split(" from ")[0] == z.split(" from ")[0]), (module, a)


def _modules(**files):
    return {f"js/{name}": text for name, text in files.items()}


def _write(files):
    from agentplaza.api import console_bundle

    return console_bundle.write(files.__getitem__, set(files))


def test_a_module_a_screen_imports_too_is_written_in_and_the_screen_imports_it_from_main_js():
    b = _write(_modules(**{
        "main.js": 'import {a} from "./a.js";\nimport {s} from "./s.js";\na(s);\n',
        "a.js": 'import {t} from "./t.js";\nexport function a(x) { return t(x); }\n',
        "s.js": 'import {t} from "./t.js";\nexport const s = t(1);\n',
        "t.js": "export const t = (x) => x;\n",
        "screens/x.js": 'import {s} from "../s.js";\nimport {t as tt} from "../t.js";\nexport const x = s;\n',
        "screens/y.js": "export const y = 1;\n",
    }))
    # s.js and t.js, which a screen imports, are written in all the same: the screen imports main.js
    assert b.written_in == ("js/t.js", "js/a.js", "js/s.js", "js/main.js") and b.separate == ()
    text = b.text.decode()
    assert "import" not in text and "export function a(x)" in text and "export const s = t(1);" in text
    assert b.rewritten == {"js/screens/x.js": b'import {s} from "../main.js";\nimport {t as tt} from "../main.js";\n'
                                              b"export const x = s;\n"}


def test_a_module_imported_with_import_stays_apart_and_nothing_imports_main_js():
    from agentplaza.api.console_bundle import BundleError

    b = _write(_modules(**{
        "main.js": 'import {a} from "./a.js";\nimport {go} from "./go.js";\ngo(a);\n',
        "a.js": 'import {t} from "./t.js";\nexport const a = t;\n',
        "t.js": "export const t = 1;\n",
        "go.js": 'export const go = () => import("./a.js");\n',
    }))
    assert set(b.separate) == {"js/a.js", "js/t.js"} and b.written_in == ("js/go.js", "js/main.js")
    assert 'import {a} from "./a.js";' in b.text.decode()
    with pytest.raises(BundleError, match="imported by another module"):
        _write(_modules(**{"main.js": "export const m = 1;\n", "screens/x.js": 'import {m} from "../main.js";\n'}))


def test_a_dynamic_import_keeps_its_target_apart_and_is_readdressed():
    b = _write(_modules(**{
        "main.js": 'import {SCREENS} from "./screens/index.js";\nSCREENS[0]();\n',
        "screens/index.js": 'export const SCREENS = [() => import("./one.js")];\n',
        "screens/one.js": "export const one = 1;\n",
    }))
    assert "js/screens/index.js" in b.written_in and 'import("./screens/one.js")' in b.text.decode()


@pytest.mark.parametrize("files, says", [
    ({"main.js": 'import {a} from "./a.js";\nimport {b} from "./b.js";\n', "a.js": "export const a = 1;\nlet x;\n",
      "b.js": "export const b = 2;\nfunction x() {}\n"}, "both declare x"),
    ({"main.js": 'import {a as z} from "./a.js";\n', "a.js": "export const a = 1;\n"}, "renames a"),
    ({"main.js": "import a from \"./a.js\";\n", "a.js": "export default 1;\n"}, "an import not of the form"),
    ({"main.js": 'import {a} from "./a.js";\n', "a.js": 'import {m} from "./main.js";\nexport const a = 1;\n'},
     "an import cycle"),
    ({"main.js": 'import {a} from "./nothing.js";\n'}, "not a console module"),
    ({"main.js": 'import {h} from "./ui.js";\nimport {a} from "./a.js";\n', "ui.js": "export const h = 1;\n",
      "a.js": "export function h() {}\nexport const a = 1;\n", "screens/s.js": 'import {h} from "../ui.js";\n'},
     "declare"),
])
def test_a_module_that_breaks_a_rule_is_named_and_nothing_is_written(files, says):
    from agentplaza.api.console_bundle import BundleError

    with pytest.raises(BundleError, match=says):
        _write(_modules(**files))


def test_a_frame_that_cannot_be_written_in_is_preloaded_as_its_files(monkeypatch):
    """A module that breaks a rule (here: an import cycle) leaves the files served as they are: the front
    page then preloads the frame's whole static closure, each module before those that import it."""
    from agentplaza.api.routes import console

    monkeypatch.setattr(console, "_kept", {})
    monkeypatch.setattr(console.console_bundle, "write_from",
                        lambda folder: (_ for _ in ()).throw(console.console_bundle.BundleError("a cycle")))
    order = console.preload_order()
    assert order[-1] == "js/main.js" and {"js/api.js", "js/ui.js", "js/frame.js", "js/live.js"} <= set(order)
    assert order.index("js/api.js") < order.index("js/frame.js") < order.index("js/main.js")
