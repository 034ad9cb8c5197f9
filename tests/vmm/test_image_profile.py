"""The tuned image's login profile: bash learns the user from ``$EUID``, without running ``id -u``."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vmm.image.build import login_shell_without_forks

#: The lines of Debian bookworm's ``/etc/profile`` (base-files) that ask who the user is.
DEBIAN_PROFILE = """\
if [ "$(id -u)" -eq 0 ]; then
  PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
else
  PATH="/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"
fi
export PATH
"""


def fake_root(tmp_path: Path, uid: int) -> tuple[Path, Path, Path]:
    """A root holding the profile, and a folder with an ``id`` that marks each run and answers ``uid``."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/profile").write_text(DEBIAN_PROFILE)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    mark = tmp_path / "id-ran"
    (bin_ / "id").write_text(f"#!/bin/sh\necho run >> {mark}\necho {uid}\n")
    (bin_ / "id").chmod(0o755)
    return root, bin_, mark


def path_after(shell: str, profile: Path, bin_: Path) -> str:
    """The PATH a login shell of ``shell`` has after sourcing ``profile``, ``bin_`` first on its way in."""
    out = subprocess.run([shell, "-c", f". {profile}; echo \"$PATH\""], env={"PATH": f"{bin_}:/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("shell", ["bash", "dash"])
def test_the_profile_sets_the_same_path_and_only_a_shell_without_euid_runs_id(tmp_path: Path, shell: str):
    assert shutil.which(shell), f"no {shell}: both are essential packages of the Debian the guest is built from"
    root, bin_, mark = fake_root(tmp_path, os.geteuid())
    before = path_after(shell, root / "etc/profile", bin_)
    assert mark.read_text().count("run") == 1  # Debian's own profile runs it in every shell
    mark.unlink()
    login_shell_without_forks(root)
    assert path_after(shell, root / "etc/profile", bin_) == before
    assert mark.exists() == (shell == "dash")  # bash knows $EUID; dash has no such variable and asks id


def test_a_root_without_a_profile_is_left_as_it_is(tmp_path: Path):
    (tmp_path / "etc").mkdir()
    login_shell_without_forks(tmp_path)
    assert list((tmp_path / "etc").iterdir()) == []
