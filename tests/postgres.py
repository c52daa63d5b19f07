"""A throw-away PostgreSQL server from Debian's packages, for the tests of workers sharing one study.

The server runs as the unprivileged ``postgres`` user when the tests run as root (``initdb`` refuses root),
listens on a free loopback port with its socket in its own data directory, and is stopped afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

INSTALL_HINT = "install it with `apt-get install -y postgresql` (scripts/test.sh does this on Debian)"


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def server_bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb`` and ``pg_ctl``."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise PostgresMissing(f"PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): {INSTALL_HINT}")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def postgres_server(database: str = "tuner") -> Iterator[str]:
    """Start a server, create ``database`` and yield its SQLAlchemy URL; stop and delete it on exit."""
    bin_dir = server_bin_dir()
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    root = Path(tempfile.mkdtemp(prefix="tuner-pg-"))  # under /tmp: the postgres user can reach it
    data = root / "data"
    if as_user:
        shutil.chown(root, "postgres", "postgres")

    def run(*args: str) -> None:
        proc = subprocess.run([*as_user, *args], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")

    port = _free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {data} -c fsync=off -c synchronous_commit=off"
    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync")
        run(str(bin_dir / "pg_ctl"), "start", "-D", str(data), "-w", "-t", "60", "-l", str(root / "log"), "-o", options)
        try:
            run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", database)
            yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/{database}"
        finally:
            run(str(bin_dir / "pg_ctl"), "stop", "-D", str(data), "-m", "immediate", "-w")
    finally:
        shutil.rmtree(root, ignore_errors=True)
