"""``agent-cache vllm-command``: the flags KV-event mode needs, from the command line."""

from __future__ import annotations

import json
import shlex

import pytest

from agent_cache.cli import main


def kv_config(out: str) -> dict[str, object]:
    line = next(x for x in out.splitlines() if x.strip().startswith("--kv-events-config"))
    config = json.loads(shlex.split(line.strip().removesuffix("\\"))[1])
    assert isinstance(config, dict)
    return config


def test_vllm_command_prints_the_kv_event_flags_with_the_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["vllm-command", "--model", "m", "--kv-replay-port", "5600"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "## flags checked against vLLM 0.33.0"
    assert "--enable-prefix-caching" in out
    assert kv_config(out) == {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": "tcp://*:5557",
        "topic": "",
        "replay_endpoint": "tcp://*:5600",
    }
    assert "kv_replay=['tcp://HOST:5600']" in out
    assert "PYTHONHASHSEED" not in out and "sha256_cbor" not in out


def test_vllm_command_ports_block_size_and_no_events(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["vllm-command", "--model", "m", "--kv-events-port", "6000", "--block-size", "64"])
        == 0
    )
    out = capsys.readouterr().out
    assert kv_config(out)["endpoint"] == "tcp://*:6000" and "replay_endpoint" not in kv_config(out)
    assert "--block-size 64" in out
    assert main(["vllm-command", "--model", "m", "--no-kv-events"]) == 0
    assert "--kv-events-config" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra",
    [
        ["--kv-replay-port", "5557"],  # the publisher's own port
        ["--kv-events-port", "8000"],  # the server's
        ["--kv-replay-port", "70000"],
        ["--no-kv-events", "--kv-replay-port", "5600"],  # replay without a publisher
    ],
)
def test_bad_ports_are_one_clear_error(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["vllm-command", "--model", "m", *extra]) == 2
    assert "port" in capsys.readouterr().err
