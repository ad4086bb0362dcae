"""A throwaway PostgreSQL server for tests and benches: unix socket only, trust auth, in a temp
folder. Debian's `postgresql` package provides the binaries (.ci/run installs it)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from tests.fakes.prefect_server import free_port


def pg_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    return Path(versions[0]).parent if versions else None


class Postgres:
    """A throwaway server: unix socket only, trust auth, in a temp folder; root runs it as the
    `postgres` user (initdb refuses root)."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="rf-pg-"))
        self.port = free_port()
        self.user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        if os.geteuid() == 0:
            os.chmod(self.dir, 0o755)
            shutil.chown(self.dir, "postgres")

    def run(self, *args: str) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        self.run("initdb", "-D", str(self.dir / "data"), "-A", "trust", "-U", self.user,
                 "--no-sync")
        self.run("pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "log"), "-w",
                 "-o", f"-p {self.port} -k {self.dir} -c listen_addresses='' -c fsync=off",
                 "start")

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

    def new_lake(self, data_root: Path) -> tuple[str, str]:
        """A fresh database: (the lake target, a data path for it)."""
        name = f"lake_{uuid.uuid4().hex[:8]}"
        self.run("createdb", "-h", str(self.dir), "-p", str(self.port), "-U", self.user, name)
        data = data_root / name
        data.mkdir(parents=True)
        return (f"ducklake:postgres:dbname={name} host={self.dir} port={self.port} "
                f"user={self.user}", f"{data}/")

    def new_database(self, owner: str | None = None) -> str:
        """A fresh, empty database (owned by `owner`, else the superuser); returns its name."""
        name = f"db_{uuid.uuid4().hex[:8]}"
        self.run("createdb", "-h", str(self.dir), "-p", str(self.port), "-U", self.user,
                 *(["-O", owner] if owner else []), name)
        return name

    def target(self, database: str, user: str) -> str:
        """The DuckLake target of `database`, connecting as `user`."""
        return f"ducklake:postgres:dbname={database} host={self.dir} port={self.port} user={user}"

    def psql(self, sql: str, database: str = "postgres") -> None:
        """Run one statement as the server's superuser, as `psql -c` does."""
        self.run("psql", "-h", str(self.dir), "-p", str(self.port), "-U", self.user,
                 "-d", database, "-v", "ON_ERROR_STOP=1", "-c", sql)

    def sqlalchemy_url(self, database: str) -> str:
        """What PREFECT_API_DATABASE_CONNECTION_URL takes (asyncpg over the unix socket)."""
        return (f"postgresql+asyncpg://{self.user}@/{database}"
                f"?host={self.dir}&port={self.port}")
