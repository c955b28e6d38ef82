"""The ``vllm serve`` command we recommend for prefix caching, with a reason per flag.

Two flags are left out on purpose: ``--enable-force-include-usage`` puts ``usage`` on
*every* stream chunk, which LangChain then adds up (three chunks of 100 prompt tokens are
reported as 300 input tokens); the router and the transports ask for usage on the final
chunk with ``stream_options.include_usage`` instead. ``--block-size`` overrides the
attention backend's choice (MLA backends need 64 or 128); it is printed only when asked for.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from agent_cache.errors import ConfigurationError

__all__ = ["ServeFlag", "vllm_command", "vllm_flags"]


@dataclass(frozen=True)
class ServeFlag:
    """One part of the command and why it is there."""

    arg: str
    why: str


def vllm_flags(
    model: str,
    *,
    gpus: int = 1,
    port: int = 8000,
    host: str = "0.0.0.0",
    gpu_memory_utilization: float = 0.90,
    max_model_len: int | None = None,
    block_size: int | None = None,
) -> list[ServeFlag]:
    """The environment, command and flags of :func:`vllm_command`, each with its reason.

    Example:
        >>> [f.arg for f in vllm_flags("m")][:2]
        ['PYTHONHASHSEED=0', 'vllm serve m']
    """
    if gpus < 1:
        raise ConfigurationError("gpus must be >= 1")
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise ConfigurationError("gpu_memory_utilization must be in (0, 1]")
    flags = [
        ServeFlag(
            "PYTHONHASHSEED=0",
            "fixes vLLM's NONE_HASH seed, so block hashes are reproducible across restarts "
            "and replicas",
        ),
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
            "--prefix-caching-hash-algo sha256_cbor",
            "collision-safe block hashes that are reproducible across processes and languages",
        ),
        ServeFlag(
            f"--gpu-memory-utilization {gpu_memory_utilization:.2f}",
            "memory left after the weights becomes KV blocks: more blocks keep more "
            "prefixes cached",
        ),
    ]
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


def vllm_command(
    model: str,
    *,
    gpus: int = 1,
    port: int = 8000,
    host: str = "0.0.0.0",
    gpu_memory_utilization: float = 0.90,
    max_model_len: int | None = None,
    block_size: int | None = None,
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

    Returns:
        A shell snippet: comment lines with the reasons, then the command.

    Example:
        >>> print(vllm_command("Qwen/Qwen2.5-7B-Instruct").splitlines()[-1].strip())
        --gpu-memory-utilization 0.90
    """
    flags = vllm_flags(
        model,
        gpus=gpus,
        port=port,
        host=host,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        block_size=block_size,
    )
    width = max(len(f.arg) for f in flags)
    comments = [f"# {f.arg:<{width}}  {f.why}" for f in flags]
    env, serve, *rest = flags
    lines = [f"{env.arg} {serve.arg} \\"] + [f"  {f.arg} \\" for f in rest]
    lines[-1] = lines[-1].removesuffix(" \\")
    return "\n".join(comments + lines)
