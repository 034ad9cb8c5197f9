"""The code of the dataclasses' methods, compiled once and kept for the next process
(``agentplaza/dataclass_code.py``): a process that finds it compiles none of the texts it holds, makes
the same classes from it, and a file that cannot be trusted is as no file.  Each test runs the imports in
processes of its own, with their bytecode (and so the kept code) in a folder of the test's
(``PYTHONPYCACHEPREFIX``)."""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

from support.hubproc import ROOT

from agentplaza import dataclass_code

# What the domain's import did: texts compiled, texts held, whether a file was written at the end.
REPORT = """
import json, sys
from agentplaza import dataclass_code as d
import agentplaza.domain.tasks, agentplaza.domain.treasury
from agentplaza.domain.base import Context
import dataclasses, datetime as dt
c = Context("owner", dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), "c1")
try:
    c.actor = "agent:1"
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
same = c == Context("owner", c.at, "c1") and hash(c) == hash(Context("owner", c.at, "c1"))
print(json.dumps({"compiled": d._new, "held": len(d._compiled), "frozen": frozen, "same": same, "repr": repr(c),
                  "file": str(d.cache_file()), "written": d.save(force="force" in sys.argv)}))
"""


def run(prefix: Path, *args: str, write: bool = True) -> dict:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(prefix))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    r = subprocess.run([sys.executable, "-c", REPORT, *args], env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_second_process_compiles_none_of_the_texts_the_first_kept(tmp_path):
    first = run(tmp_path)
    assert first["compiled"] > 100 and first["written"]
    kept = Path(first["file"])
    assert kept.is_relative_to(tmp_path) and kept.name == dataclass_code.CACHE_NAME
    second = run(tmp_path)
    assert second["compiled"] == 0 and second["held"] == first["held"] and not second["written"]
    for report in (first, second):  # the same classes, from the code compiled or the code kept
        assert report["frozen"] and report["same"]
    assert second["repr"] == first["repr"]


def test_a_file_that_cannot_be_trusted_is_as_no_file(tmp_path):
    kept = Path(run(tmp_path)["file"])
    good = kept.read_bytes()
    magic = importlib.util.MAGIC_NUMBER
    for bad in (b"", b"not marshal at all", b"\x00\x00\x00\x00" + good[len(magic):], magic + b"\xff\xfe",
                magic + marshal.dumps(["a list, not a dict"])):
        kept.write_bytes(bad)
        again = run(tmp_path)
        assert again["compiled"] > 100 and again["frozen"] and again["same"], bad[:20]
        assert again["written"] and kept.read_bytes().startswith(magic)


def test_nothing_is_written_where_python_writes_no_bytecode(tmp_path):
    quiet = run(tmp_path, write=False)
    assert quiet["compiled"] > 100 and not quiet["written"] and not Path(quiet["file"]).exists()
    forced = run(tmp_path, "force", write=False)  # as compileall writes bytecode whatever the setting says
    assert forced["written"] and Path(forced["file"]).exists()
    assert run(tmp_path, write=False)["compiled"] == 0


def test_a_text_not_kept_is_compiled_and_the_file_keeps_both(tmp_path):
    first = run(tmp_path)
    code = ("import json\nfrom agentplaza import dataclass_code as d\nimport agentplaza.domain.base\n"
            "from dataclasses import dataclass\n@dataclass(frozen=True)\nclass OnlyHere:\n    a_field_of_its_own: int\n"
            "assert OnlyHere(3) == OnlyHere(3)\nprint(json.dumps({'compiled': d._new, 'written': d.save()}))")
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(tmp_path))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    new = json.loads(r.stdout)
    assert new["compiled"] > 0 and new["written"]
    after = run(tmp_path)
    assert after["compiled"] == 0 and after["held"] > first["held"]


def test_an_interpreter_that_keeps_no_bytecode_keeps_no_code(monkeypatch):
    """Where there is no ``__pycache__`` at all (``cache_from_source`` cannot name one), there is no file to
    load or write: every text is compiled, as it was before the code was kept."""
    import importlib.util as util

    def no_bytecode(path):
        raise NotImplementedError("sys.implementation.cache_tag is None")

    monkeypatch.setattr(util, "cache_from_source", no_bytecode)
    monkeypatch.setattr(dataclass_code, "_new", 1)  # a text compiled here: only the missing folder stops the write
    assert dataclass_code.cache_file() is None
    assert dataclass_code.save(force=True) is False
