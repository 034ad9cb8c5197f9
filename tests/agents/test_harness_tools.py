"""The guest harness's own tools, run on this machine against a scratch workspace."""

from __future__ import annotations

import os

import pytest

from vmm.guest import harness as h


def test_files_stay_in_the_workspace(tmp_path):
    ws = str(tmp_path)
    assert h.run_guest_tool("vm.write_file", {"path": "src/a.txt", "content": "one two"}, workspace=ws).startswith("wrote 7")
    assert h.run_guest_tool("vm.read_file", {"path": "src/a.txt"}, workspace=ws) == "one two"
    h.run_guest_tool("vm.edit_file", {"path": "src/a.txt", "old": "two", "new": "three"}, workspace=ws)
    assert (tmp_path / "src/a.txt").read_text() == "one three"
    assert h.run_guest_tool("vm.list_dir", {"path": "."}, workspace=ws) == "src/"
    os.symlink("/etc", tmp_path / "escape")
    for args in ({"path": "../x"}, {"path": "/etc/passwd"}, {"path": "escape/passwd"}):
        with pytest.raises(h.ToolError, match="outside"):
            h.run_guest_tool("vm.read_file", args, workspace=ws)
    with pytest.raises(h.ToolError, match="outside"):
        h.run_guest_tool("vm.write_file", {"path": "../../evil", "content": "x"}, workspace=ws)
    with pytest.raises(h.ToolError, match="exactly once"):
        h.run_guest_tool("vm.edit_file", {"path": "src/a.txt", "old": "e", "new": "E"}, workspace=ws)


def test_the_shell_has_a_time_limit(tmp_path):
    out = h.run_guest_tool("vm.shell", {"command": "echo hi; pwd"}, workspace=str(tmp_path))
    assert out == f"exit 0\nhi\n{tmp_path}\n"
    with pytest.raises(h.ToolError, match="timed out after 1 s"):
        h.run_guest_tool("vm.shell", {"command": "echo started; sleep 30", "timeout": 1}, workspace=str(tmp_path))
    with pytest.raises(h.ToolError, match="timeout is 1 to 600"):
        h.run_guest_tool("vm.shell", {"command": "true", "timeout": 10_000}, workspace=str(tmp_path))


def test_the_shell_holds_only_the_placeholder_key_and_the_proxy(tmp_path):
    out = h.run_guest_tool("vm.shell", {"command": "env"}, workspace=str(tmp_path))
    assert "ANTHROPIC_API_KEY=plaza" in out and "https_proxy=http://127.0.0.1:3128" in out
