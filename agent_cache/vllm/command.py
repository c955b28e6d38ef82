"""The ``vllm serve`` command we recommend for prefix caching, with a reason per flag.

Two flags are left out on purpose: ``--enable-force-include-usage`` puts ``usage`` on
*every* stream chunk, which LangChain then adds up (three chunks of 100 prompt tokens are
reported as 300 input tokens); the router and the transports ask for usage on the final
chunk with ``stream_options.include_usage`` instead. ``--block-size`` overrides the
attention backend's choice (MLA backends need 64 or 128); it is printed only when asked for.
Neither ``PYTHONHASHSEED`` nor ``--prefix-caching-hash-algo`` is needed: sha256 (the
default) already hashes from a fixed seed, and the router's KV-event index keys blocks by
their tokens, never by vLLM's hash values.

The flags were checked against vLLM :data:`~agent_cache.vllm.kv_events.VLLM_VERSION`.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from agent_cache.errors import ConfigurationError
from agent_cache.vllm.kv_events import VLLM_VERSION

__all__ = ["ServeFlag", "vllm_command", "vllm_flags"]


@dataclass(frozen=True)
class ServeFlag:
    """One part of the command and why it is there."""

    arg: str
    why: str


def _check_flags(
    gpus: int,
    port: int,
    gpu_memory_utilization: float,
    kv_events_port: int | None,
    kv_replay_port: int | None,
) -> None:
    if gpus < 1:
        raise ConfigurationError("gpus must be >= 1")
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise ConfigurationError("gpu_memory_utilization must be in (0, 1]")
    ports = [p for p in (port, kv_events_port, kv_replay_port) if p is not None]
    if any(not 0 < p < 65536 for p in ports) or len(set(ports)) != len(ports):
        raise ConfigurationError(f"ports must be distinct and in 1..65535, not {ports}")
    if kv_replay_port is not None and kv_events_port is None:
        raise ConfigurationError("a replay port needs the KV-event publisher (kv_events_port)")


def _kv_events_flag(kv_events_port: int, kv_replay_port: int | None) -> ServeFlag:
    """``--kv-events-config``: the ZMQ publisher (and replay socket) the router reads."""
    config: dict[str, object] = {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"tcp://*:{kv_events_port}",
        "topic": "",
    }
    if kv_replay_port is not None:
        config["replay_endpoint"] = f"tcp://*:{kv_replay_port}"
    replay = (
        f"; kv_replay=['tcp://HOST:{kv_replay_port}'] reads the blocks cached before the "
        "router started and catches up on lost batches"
        if kv_replay_port is not None
        else ""
    )
    return ServeFlag(
        f"--kv-events-config {shlex.quote(json.dumps(config, separators=(',', ':')))}",
        "publishes each stored and evicted KV block on ZMQ, so the router knows what "
        f"every replica caches: VllmRouter(kv_events=['tcp://HOST:{kv_events_port}']) "
        "(token ids from the server's /tokenize unless tokenizer= is given); "
        f"data-parallel rank k publishes on the port plus k (kv_dp_ranks){replay}",
    )


def _sizing_flags(gpus: int, max_model_len: int | None, block_size: int | None) -> list[ServeFlag]:
    """The flags only some deployments need: block size, tensor parallelism, context cap."""
    flags: list[ServeFlag] = []
    if block_size is not None:
        flags.append(
            ServeFlag(
                f"--block-size {block_size}",
                "overrides the attention backend's block size (default 16; MLA backends "
                "force 64 or 128): only when the simulator must match a chosen size",
            )
        )
    if gpus > 1:
        flags.append(
            ServeFlag(
                f"--tensor-parallel-size {gpus}",
                "shards the model over the GPUs; more free memory per GPU for KV blocks",
            )
        )
    if max_model_len is not None:
        flags.append(
            ServeFlag(
                f"--max-model-len {max_model_len}",
                "caps the context; a smaller cap leaves more memory for cached blocks",
            )
        )
    return flags


def vllm_flags(
    model: str,
    *,
    gpus: int = 1,
    port: int = 8000,
    host: str = "0.0.0.0",
    gpu_memory_utilization: float = 0.90,
    max_model_len: int | None = None,
    block_size: int | None = None,
    kv_events_port: int | None = 5557,
    kv_replay_port: int | None = None,
) -> list[ServeFlag]:
    """The command and flags of :func:`vllm_command`, each with its reason.

    Example:
        >>> [f.arg for f in vllm_flags("m")][:1]
        ['vllm serve m']
    """
    _check_flags(gpus, port, gpu_memory_utilization, kv_events_port, kv_replay_port)
    flags = [
        ServeFlag(f"vllm serve {shlex.quote(model)}", "the OpenAI-compatible server"),
        ServeFlag(
            f"--host {host} --port {port}",
            "where the router reaches it (base URL "
            f"http://HOST:{port}/v1; /health, /metrics, /tokenize at the root)",
        ),
        ServeFlag(
            "--enable-prefix-caching",
            "automatic prefix caching; on by default in V1, explicit so an older or "
            "differently configured build cannot silently drop it",
        ),
        ServeFlag(
            "--enable-prompt-tokens-details",
            "returns usage.prompt_tokens_details.cached_tokens per request (off by "
            "default), which the router records as the cache's KV layer",
        ),
        ServeFlag(
            f"--gpu-memory-utilization {gpu_memory_utilization:.2f}",
            "memory left after the weights becomes KV blocks: more blocks keep more "
            "prefixes cached",
        ),
    ]
    if kv_events_port is not None:
        flags.append(_kv_events_flag(kv_events_port, kv_replay_port))
    return flags + _sizing_flags(gpus, max_model_len, block_size)


def vllm_command(
    model: str,
    *,
    gpus: int = 1,
    port: int = 8000,
    host: str = "0.0.0.0",
    gpu_memory_utilization: float = 0.90,
    max_model_len: int | None = None,
    block_size: int | None = None,
    kv_events_port: int | None = 5557,
    kv_replay_port: int | None = None,
) -> str:
    """The recommended ``vllm serve`` command line, each flag preceded by its reason.

    Args:
        model: The model to serve (a Hugging Face id or a local path).
        gpus: GPUs for one server (tensor parallel when > 1).
        port: The server's port.
        host: The interface to listen on.
        gpu_memory_utilization: Share of GPU memory vLLM may use (weights + KV cache).
        max_model_len: Optional context cap.
        block_size: KV block size in tokens; None (default) leaves it to the backend.
        kv_events_port: Port of the KV-event publisher the router subscribes to
            (``VllmRouter(kv_events=...)``); None leaves KV events off.
        kv_replay_port: Port of the publisher's replay socket, if wanted.

    Returns:
        A shell snippet: the vLLM version the flags were checked against, comment lines
        with the reasons, then the command.

    Example:
        >>> print(vllm_command("Qwen/Qwen2.5-7B-Instruct").splitlines()[-1].strip())
        --kv-events-config '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","topic":""}'
        >>> vllm_command("m").splitlines()[0]
        '## flags checked against vLLM 0.33.0'
    """
    flags = vllm_flags(
        model,
        gpus=gpus,
        port=port,
        host=host,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        block_size=block_size,
        kv_events_port=kv_events_port,
        kv_replay_port=kv_replay_port,
    )
    width = min(40, max(len(f.arg) for f in flags))
    comments = [f"# {f.arg:<{width}}  {f.why}" for f in flags]
    serve, *rest = flags
    lines = [f"{serve.arg} \\"] + [f"  {f.arg} \\" for f in rest]
    lines[-1] = lines[-1].removesuffix(" \\")
    header = f"## flags checked against vLLM {VLLM_VERSION}"
    return "\n".join([header, *comments, *lines])
