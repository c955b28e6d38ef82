"""``agent-cache demo``: the cache on a RAG and an agent workload, against a real local model.

Example (starts a local model server)::

    from agent_cache.demo import run_demo
    result = run_demo(quiet=True)
    result["model_calls_avoided"] > 0  # -> True
"""

from __future__ import annotations

from agent_cache.demo.run import add_arguments, main, run_demo

__all__ = ["add_arguments", "main", "run_demo"]
