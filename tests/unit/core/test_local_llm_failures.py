"""How :class:`~agent_cache.local_llm.LocalLlamaServer` reports a server process that died.

No llama.cpp here: ``server_argv`` runs a small Python stand-in that crashes the way a
llama.cpp built for another CPU does (SIGSEGV, SIGILL), is killed (SIGKILL, as the OOM
killer does), exits 1 on a missing module, or serves a minimal OpenAI-compatible API.
The last tests run pytest on the integration conftest with that stand-in: a dead model
stops the whole run once (exit status 3) instead of failing every test that needs it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_cache.errors import BackendError
from agent_cache.local_llm import LocalLlamaServer, LocalServerDied

REPO = Path(__file__).resolve().parents[3]

FAKE_SERVER = r'''
"""A stand-in for llama_cpp.server: python fake_server.py MODE HOST PORT."""
import json
import os
import resource
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file from a crash on purpose
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
print("llama_model_loader: loaded meta data from fake.gguf", flush=True)
if mode == "segv":
    print("load_tensors: CPU_AMX model buffer size = 42.00 MiB", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)
if mode == "sigkill":
    print("llama_kv_cache: allocating 64 GiB", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "import":
    raise ModuleNotFoundError("No module named 'uvicorn'")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send({"object": "list", "data": [{"id": "fake-model"}]})

    def do_POST(self):
        json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if mode == "ill-on-completion":
            print("ggml_compute_forward_mul_mat: illegal instruction", flush=True)
            os.kill(os.getpid(), signal.SIGILL)
        if mode == "wrong":
            self.send({"choices": [], "usage": {}})
            return
        self.send({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        })

    def send(self, payload):
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


print("INFO:     Uvicorn running", flush=True)
HTTPServer((host, port), Handler).serve_forever()
'''


@pytest.fixture(scope="module")
def fake_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fake-llama") / "fake_server.py"
    path.write_text(FAKE_SERVER)
    return path


def fake_argv(script: Path, mode: str) -> list[str]:
    return [sys.executable, str(script), mode, "{host}", "{port}"]


def fake(script: Path, mode: str) -> LocalLlamaServer:
    return LocalLlamaServer(server_argv=fake_argv(script, mode), startup_timeout=30)


@pytest.fixture
def serving(fake_server: Path) -> Iterator[LocalLlamaServer]:
    server = fake(fake_server, "serve").start()
    try:
        yield server
    finally:
        server.stop()
        if server.log_path is not None:  # kept because it died: the test's own mess
            server.log_path.unlink(missing_ok=True)


def died_at_start(server: LocalLlamaServer) -> LocalServerDied:
    with pytest.raises(LocalServerDied) as info:
        server.start()
    assert isinstance(info.value, BackendError)  # callers catching BackendError still do
    assert not server.running
    return info.value


def assert_log_named_and_kept(error: LocalServerDied, *tail: str) -> None:
    message = str(error)
    assert error.log_path is not None and error.log_path.is_file()
    assert f"Server log (kept): {error.log_path}" in message
    for line in tail:
        assert line in error.log_tail and f"  | {line}" in message
    error.log_path.unlink()


def test_sigsegv_at_start_names_the_signal_the_cpu_and_the_log(fake_server: Path) -> None:
    error = died_at_start(fake(fake_server, "segv"))
    message = str(error)
    assert error.returncode == -signal.SIGSEGV and error.signal_name == "SIGSEGV"
    assert error.phase == "during startup"
    assert "was killed by signal SIGSEGV (exit status -11) during startup" in message
    assert "compiled for another CPU (AVX-512/AMX" in message
    assert "python scripts/check_llama_build.py" in message
    assert "make install" in message
    assert "--no-cache-dir --no-binary llama-cpp-python" in message
    assert "-DGGML_NATIVE=OFF" in message and "-DGGML_AMX_TILE=OFF" in message
    assert_log_named_and_kept(
        error,
        "llama_model_loader: loaded meta data from fake.gguf",
        "load_tensors: CPU_AMX model buffer size = 42.00 MiB",
    )


def test_sigkill_at_start_says_out_of_memory(fake_server: Path) -> None:
    error = died_at_start(fake(fake_server, "sigkill"))
    message = str(error)
    assert error.signal_name == "SIGKILL"
    assert "was killed by signal SIGKILL (exit status -9)" in message
    assert "out of memory" in message
    assert "another CPU" not in message
    assert_log_named_and_kept(error, "llama_kv_cache: allocating 64 GiB")


def test_exit_1_on_a_missing_module_says_install_the_server_extra(fake_server: Path) -> None:
    error = died_at_start(fake(fake_server, "import"))
    message = str(error)
    assert error.returncode == 1 and error.signal_name is None
    assert "exited with code 1 during startup" in message
    assert "pip install 'llama-cpp-python[server]'" in message
    assert_log_named_and_kept(error, "ModuleNotFoundError: No module named 'uvicorn'")


def test_a_shell_wrapper_s_128_plus_signal_code_is_read_as_the_signal(fake_server: Path) -> None:
    """``sh -c`` reports its child killed by SIGSEGV as exit code 139."""
    child = " ".join(fake_argv(fake_server, "segv"))
    server = LocalLlamaServer(server_argv=["sh", "-c", f"{child}; exit $?"], startup_timeout=30)
    error = died_at_start(server)
    assert error.returncode == 128 + signal.SIGSEGV
    assert "exited with code 139 (128 + SIGSEGV)" in str(error)
    assert "compiled for another CPU" in str(error)
    assert_log_named_and_kept(error, "load_tensors: CPU_AMX model buffer size = 42.00 MiB")


def test_a_live_server_passes_check_and_smoke_test(serving: LocalLlamaServer) -> None:
    serving.raise_if_dead()  # alive: returns
    assert serving.died() is None
    serving.check()
    reply = serving.smoke_test()
    assert reply["choices"][0]["message"]["content"] == "OK"
    assert reply["usage"]["completion_tokens"] == 1


def test_a_death_after_start_is_raised_on_request_and_from_the_client_error(
    serving: LocalLlamaServer,
) -> None:
    assert serving.process is not None
    os.kill(serving.process.pid, signal.SIGSEGV)
    serving.process.wait(10)
    with pytest.raises(httpx.TransportError) as client_error:
        httpx.get(f"{serving.base_url}/models", timeout=5)
    with pytest.raises(LocalServerDied) as info:
        serving.raise_if_dead(client_error.value)
    assert info.value.__cause__ is client_error.value
    assert info.value.phase == "after it was ready"
    assert "SIGSEGV" in str(info.value) and "after it was ready" in str(info.value)
    assert "  | INFO:     Uvicorn running" in str(info.value)  # the log tail
    for call in (serving.check, serving.smoke_test):
        with pytest.raises(LocalServerDied, match="SIGSEGV"):
            call()
    log_path = serving.log_path
    serving.stop()
    assert log_path is not None and log_path.is_file()  # kept: the message names it
    with pytest.raises(LocalServerDied):  # still known after stop
        serving.raise_if_dead()


def test_a_normal_stop_is_no_death_and_removes_the_log(fake_server: Path) -> None:
    server = fake(fake_server, "serve").start()
    log_path = server.log_path
    server.stop()
    assert log_path is not None and not log_path.exists()
    assert server.died() is None
    server.raise_if_dead()  # stopped on purpose: nothing to raise


def test_the_smoke_test_reports_a_crash_during_the_completion(fake_server: Path) -> None:
    server = fake(fake_server, "ill-on-completion").start()
    try:
        server.check()  # answers until the model computes
        with pytest.raises(LocalServerDied) as info:
            server.smoke_test()
    finally:
        server.stop()
    assert info.value.signal_name == "SIGILL"
    assert isinstance(info.value.__cause__, httpx.TransportError)
    assert "compiled for another CPU" in str(info.value)
    assert_log_named_and_kept(info.value, "ggml_compute_forward_mul_mat: illegal instruction")


def test_the_smoke_test_rejects_a_wrong_answer(fake_server: Path) -> None:
    with (
        fake(fake_server, "wrong") as server,
        pytest.raises(BackendError, match="one-token completion wrongly") as info,
    ):
        server.smoke_test()
    assert not isinstance(info.value, LocalServerDied)


def test_leaving_the_block_after_a_death_raises_the_death(fake_server: Path) -> None:
    with pytest.raises(LocalServerDied) as info, fake(fake_server, "serve") as server:
        assert server.process is not None
        server.process.send_signal(signal.SIGBUS)
        server.process.wait(10)
        httpx.get(f"{server.base_url}/models", timeout=5)
    assert isinstance(info.value.__cause__, httpx.TransportError)
    assert info.value.signal_name == "SIGBUS"
    assert_log_named_and_kept(info.value, "INFO:     Uvicorn running")


def test_check_on_a_server_never_started_is_a_plain_backend_error() -> None:
    server = LocalLlamaServer(server_argv=["true"])
    server.raise_if_dead()
    with pytest.raises(BackendError, match="not running") as info:
        server.check()
    assert not isinstance(info.value, LocalServerDied)


# -- the integration conftest: one check before the tests, one message -------------------

PLUGIN = """
import functools, sys
from agent_cache.local_llm import LocalLlamaServer

_init = LocalLlamaServer.__init__


@functools.wraps(_init)
def init(self, *args, **kwargs):
    kwargs.setdefault("server_argv", {argv!r})
    _init(self, *args, **kwargs)


LocalLlamaServer.__init__ = init
"""

NEEDS_MODEL = """
import os, signal
from pathlib import Path

RAN = Path(__file__).with_name("ran")


def test_first(llm_server):
    with RAN.open("a") as f:
        f.write("first\\n")


def test_kills_it(local_llm):
    local_llm.process.send_signal(signal.SIGSEGV)
    local_llm.process.wait(10)


def test_after_the_death(llm_server):
    with RAN.open("a") as f:
        f.write("after\\n")
"""


def run_integration_conftest(tmp_path: Path, script: Path, mode: str) -> tuple[int, str]:
    """pytest on a copy of tests/integration/conftest.py whose LocalLlamaServer runs the
    stand-in in ``mode``; returns the exit status and the output."""
    (tmp_path / "conftest.py").write_text((REPO / "tests/integration/conftest.py").read_text())
    (tmp_path / "fake_llama_plugin.py").write_text(PLUGIN.format(argv=fake_argv(script, mode)))
    (tmp_path / "test_needs_model.py").write_text(textwrap.dedent(NEEDS_MODEL))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "fake_llama_plugin",
            "-p",
            "no:cacheprovider",
            "-q",
            "-o",
            "addopts=",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - started < 120
    output = proc.stdout + proc.stderr
    for kept in set(re.findall(r"Server log \(kept\): (\S+)", output)):
        Path(kept).unlink(missing_ok=True)
    return proc.returncode, output


def test_a_dead_model_stops_the_run_once_before_any_test(tmp_path: Path, fake_server: Path) -> None:
    status, output = run_integration_conftest(tmp_path, fake_server, "segv")
    assert status == 3, output
    assert output.count("was killed by signal SIGSEGV") == 1, output
    assert "failed its one-token check" in output
    assert "compiled for another CPU" in output
    assert "load_tensors: CPU_AMX model buffer size" in output  # the log tail
    assert not (tmp_path / "ran").exists(), output  # no test ran
    assert "Traceback" not in output and "RemoteProtocolError" not in output, output


def test_a_model_that_dies_mid_run_fails_the_next_tests_with_the_death(
    tmp_path: Path, fake_server: Path
) -> None:
    status, output = run_integration_conftest(tmp_path, fake_server, "serve")
    assert status == 1, output
    assert (tmp_path / "ran").read_text() == "first\n", output  # test_after_the_death: no
    assert "ERROR test_needs_model.py::test_kills_it" in output  # at its teardown
    assert "2 passed, 2 errors" in output, output  # test_kills_it errs at its teardown
    assert "ERROR test_needs_model.py::test_after_the_death" in output, output
    assert "the shared local model server is dead before this test" in output, output
    assert "was killed by signal SIGSEGV (exit status -11) after it was ready" in output
