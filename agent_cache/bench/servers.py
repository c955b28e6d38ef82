"""Throwaway Redis and Chroma servers on loopback, for benchmarks and the integration tests.

:func:`redis_server` runs ``redis-server`` without persistence, :func:`chroma_server` runs
``chroma run`` (from the chromadb package) on a folder; both pick a free port, wait until
the server answers, yield its URL and stop it on exit. A missing binary or a server that
does not come up is a :class:`~agent_cache.errors.ConfigurationError` saying which.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_cache.errors import ConfigurationError

__all__ = [
    "chroma_server",
    "free_port",
    "redis_answers",
    "redis_argv",
    "redis_server",
    "stop",
]


def redis_argv(binary: str, port: int, workdir: Path) -> list[str]:
    """A throwaway redis-server on loopback: no persistence, files in ``workdir``."""
    return [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
    ]


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_answers(port: int) -> bool:
    """Whether a Redis server on loopback ``port`` answers ``PING``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a server process, killing it after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextmanager
def redis_server(workdir: Path, *, attempts: int = 3) -> Iterator[str]:
    """A ``redis-server`` on a free loopback port; yields ``redis://127.0.0.1:PORT/0``."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise ConfigurationError("redis-server is not on PATH (apt-get install redis-server)")
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "redis.log"
    for _ in range(attempts):  # the free port may be taken between probe and bind
        port = free_port()
        with log.open("wb") as out:
            proc = subprocess.Popen(
                redis_argv(binary, port, workdir), stdout=out, stderr=subprocess.STDOUT
            )
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and proc.poll() is None:
                if redis_answers(port):
                    yield f"redis://127.0.0.1:{port}/0"
                    return
                time.sleep(0.05)
        finally:
            stop(proc)
    raise ConfigurationError(
        f"redis-server did not start on loopback: {log.read_text(errors='replace')[-500:]}"
    )


@contextmanager
def chroma_server(workdir: Path, *, timeout: float = 60.0) -> Iterator[str]:
    """``chroma run`` on a free loopback port; yields ``http://127.0.0.1:PORT``."""
    binary = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    if not Path(binary).exists():
        raise ConfigurationError(
            "the `chroma` command is missing (pip install 'agent-cache[chroma]')"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = dict(os.environ, ANONYMIZED_TELEMETRY="False", CHROMA_TELEMETRY="False")
    log_path = workdir / "chroma.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [binary, "run", "--path", str(workdir / "data"), "--host", "127.0.0.1",
             "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-500:]
                raise ConfigurationError(f"the Chroma server did not start: {tail}")
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1):
                    break
            except OSError:
                time.sleep(0.3)
        yield url
    finally:
        stop(proc)
