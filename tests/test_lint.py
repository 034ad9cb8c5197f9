"""The codebase keeps to its ruff configuration (pyproject.toml [tool.ruff]): errors, pyflakes, import
order, bugbear and modern syntax. A finding here names the file, the line and the rule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."], cwd=ROOT,
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
