"""A throwaway PostgreSQL for the tests: started once per test run, on its own port.

PostgreSQL refuses to run as root, so as root it runs as the postgres user
(runuser) in a folder under /tmp that the postgres user owns.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid

import psycopg


def _bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: [int(x) for x in p.split("/")[4].split(".") if x.isdigit()])
    if not found:
        raise RuntimeError("PostgreSQL is not installed (scripts/test.sh installs it)")
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TempPostgres:
    def __init__(self) -> None:
        self.bin = _bin()
        self.root = tempfile.mkdtemp(prefix="apz-pg.")
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        os.chmod(self.root, 0o755)
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")

    def _run(self, *args: str) -> None:
        cmd = list(args)
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self) -> TempPostgres:
        data = os.path.join(self.root, "data")
        self._run(f"{self.bin}/initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale")
        self._run(
            f"{self.bin}/pg_ctl", "-D", data, "-l", os.path.join(self.root, "log"), "-w", "-t", "30",
            "-o", f"-k {self.root} -c listen_addresses=127.0.0.1 -p {self.port} -c max_connections=200 -c fsync=on",
            "start",
        )
        return self

    def stop(self) -> None:
        try:
            self._run(f"{self.bin}/pg_ctl", "-D", os.path.join(self.root, "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def new_database(self) -> str:
        name = "apz_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"
