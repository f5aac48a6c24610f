"""Start the real `metrics-kit serve` (and `metrics-kit dashboard`) on 127.0.0.1 with an ephemeral
port, and stop it by PID."""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

TEST_KEY = "test-key-0123456789abcdef"
_READY = re.compile(r"Serving (http://127\.0\.0\.1:\d+)")


class ServerProcess:
    """A `metrics-kit serve` child process. Use as a context manager."""

    def __init__(
        self,
        data_dir: Path | str | None,
        *args: str,
        key: str = TEST_KEY,
        cache_dir: Path | str | None = None,
        env: dict[str, str] | None = None,
    ):
        self.key = key
        cmd = [sys.executable, "-m", "metrics_kit", "serve", "--host", "127.0.0.1", "--port", "0", *args]
        if data_dir is not None:
            cmd += ["--data", str(data_dir)]
        # Only the test session's cache folder passes through (see conftest.py).
        child_env = {
            k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_") or k == "METRICS_KIT_CACHE_DIR"
        }
        child_env["METRICS_KIT_API_KEYS"] = key
        if cache_dir is not None:
            child_env["METRICS_KIT_CACHE_DIR"] = str(cache_dir)
        child_env.update(env or {})
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env)
        self.output: list[str] = []
        self.base_url = self._wait_ready(timeout=120)
        self.session = requests.Session()
        # Keep draining the child's output so it never blocks on a full pipe.
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = _READY.search(line)
            if match:
                return match.group(1)
        self.stop()
        raise RuntimeError("server did not start:\n" + "".join(self.output))

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def get(
        self,
        path: str = "/metrics",
        params: dict | None = None,
        *,
        key: str | None = "default",
        headers: dict | None = None,
        method: str = "GET",
    ) -> requests.Response:
        sent = {"Accept": "application/json"}
        if key == "default":
            key = self.key
        if key is not None:
            sent["x-api-key"] = key
        sent.update(headers or {})
        return self.session.request(method, self.base_url + path, params=params, headers=sent, timeout=30)

    def metric(self, metric_name: str, project: str, granularity: str, date: str) -> requests.Response:
        return self.get(
            params={"metric_name": metric_name, "project": project, "granularity": granularity, "date": date}
        )

    def value(self, metric_name: str, project: str, granularity: str, date: str):
        response = self.metric(metric_name, project, granularity, date)
        assert response.status_code == 200, response.text
        return response.json()["value"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # The child has exited, so its output reaches EOF: let the drain thread finish reading
        # before the pipe is closed under it (closing it first raises in that thread).
        drainer = getattr(self, "_drainer", None)
        if drainer is not None:
            drainer.join(timeout=10)
        if self.proc.stdout is not None and not self.proc.stdout.closed:
            self.proc.stdout.close()
        if hasattr(self, "session"):
            self.session.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


_DASHBOARD_URL = re.compile(r"The dashboard is at .*\n\s*(http://127\.0\.0\.1:(\d+))/\?token=(\w+)")
DASHBOARD_START_SECONDS = 180


class Dashboard:
    """``metrics-kit dashboard [NOTEBOOK] --no-browser --port PORT`` (``args`` added, and ``env`` to
    its environment) on a copy of ``notebooks``, as ``make dashboard`` starts it, its temporary
    folders (its own and Voilà's) in ``self.tmp``. ``stop()`` stops it by its PID alone, as a
    supervisor or ``kill PID`` does (SIGTERM, or ``how``), and checks that it left nothing: no
    process below it, and nothing in ``self.tmp``."""

    def __init__(
        self, notebooks: Path, home: Path, *args: str, env: dict[str, str] | None = None, port: int = 0
    ) -> None:
        self.folder = home / "notebooks"
        shutil.copytree(notebooks, self.folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        self.tmp = home / "tmp"
        self.tmp.mkdir()
        env = {
            **os.environ,
            "METRICS_KIT_NOTEBOOKS": str(self.folder),
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "TMPDIR": str(self.tmp),
            **(env or {}),
        }
        self.log = home / "dashboard.log"
        with open(self.log, "w") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "metrics_kit", "dashboard", *args, "--no-browser", "--port", str(port)],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=home,
                start_new_session=True,
            )
        deadline = time.monotonic() + DASHBOARD_START_SECONDS
        while not (found := _DASHBOARD_URL.search(self.log.read_text())):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop(check=False)
                raise AssertionError(f"the dashboard did not start ({self.process.returncode}):\n{self.text()}")
            time.sleep(0.25)
        self.base, port_text, self.token = found.groups()
        self.port = int(port_text)

    def text(self) -> str:
        """What it wrote on its terminal."""
        return self.log.read_text()[-5000:]

    def below(self) -> list[int]:
        """The processes below it (Voilà, its kernels), by PID."""
        return descendants(self.process.pid)

    def stop(self, how: signal.Signals = signal.SIGTERM, *, check: bool = True) -> None:
        """``how`` to its PID alone; after it exits, whatever it left is killed by PID, and (with
        ``check``) an AssertionError says what that was."""
        below = self.below()
        left: list[str] = []
        if self.process.poll() is None:
            os.kill(self.process.pid, how)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                left.append(f"metrics-kit still running 60 s after {how.name}")
                self.process.kill()
                self.process.wait(10)
        deadline = time.monotonic() + 10  # what it stopped may still be exiting
        while [pid for pid in below if alive(pid)] and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in below:
            if alive(pid):
                left.append(f"process {pid} ({command_line(pid)[:100]})")
                os.kill(pid, signal.SIGKILL)
        left += [f"{path.name} in its temporary folder" for path in self.tmp.iterdir()]
        if check:
            assert not left, f"the dashboard, stopped with {how.name}, left: {left}\n{self.text()}"


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux's /proc), children first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # gone meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop(0)
        found.append(child)
        todo += children.get(child, [])
    return found


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (an exited one waiting for its parent to reap it does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


def load_file(path: Path, name: str):
    """The Python file at ``path`` as a module named ``name`` (a script or a conftest.py, which
    `import` might not find, or might find under the same name elsewhere on sys.path)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def split_by_day(source: Path, folder: Path, table: str, days: set[str] | None = None) -> None:
    """Write the CSV ``table`` of ``source`` as ``folder/table/DAY.csv`` files, one per day its rows are
    written on (``days``: only those), as a daily export would give them."""
    lines = (source / f"{table}.csv").read_text().splitlines()
    (folder / table).mkdir(parents=True, exist_ok=True)
    by_day: dict[str, list[str]] = {}
    for line in lines[1:]:
        by_day.setdefault(line[:10], []).append(line)
    for day, rows in by_day.items():
        if days is None or day in days:
            (folder / table / f"{day}.csv").write_text("\n".join([lines[0], *rows]) + "\n")


GOLDEN = Path(__file__).parent / "golden" / "data"
# One more farm stake on 2025-01-02: the golden data says 1 staking transaction that day, this says 2.
ONE_MORE_STAKE = "2025-01-02T15:00:00Z,s99,zoe,farm,stake,\n"


def golden_plus_one_stake(folder: Path) -> Path:
    """A copy of the golden data in ``folder`` with ONE_MORE_STAKE: a second service whose answer to
    the same question differs (two servers with different data)."""
    shutil.copytree(GOLDEN, folder)
    with (folder / "transactions.csv").open("a") as table:
        table.write(ONE_MORE_STAKE)
    return folder


def utc(instant: dt.datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def live_exports(folder: Path, until: dt.datetime) -> Path:
    """A data folder of an exchange's swaps, two a day from 2025-05-01, the last at ``until``: an
    export run up to then (tests of which periods are complete)."""
    folder.mkdir(parents=True)
    (folder / "projects.csv").write_text("project,kinds,initial_circulating_supply,regular_pools\nswapx,dex,,true\n")
    rows = ["block_time,tx_id,signer,project,action,pool_type"]
    day = dt.date(2025, 5, 1)
    while day <= until.date():
        for hour, signer in ((6, "ann"), (11, "bob")):
            at = dt.datetime.combine(day, dt.time(hour), dt.UTC)
            if at < until:
                rows.append(f"{utc(at)},t{day:%m%d}{hour},{signer},swapx,swap,regular")
        day += dt.timedelta(days=1)
    rows.append(f"{utc(until)},last,cyd,swapx,swap,regular")
    (folder / "transactions.csv").write_text("\n".join(rows) + "\n")
    return folder
