"""Benchmarks run by ``agent-cache bench SUITE``; each suite writes its own section of
docs/benchmarks.md. Suites are imported on demand (``agent_cache.bench.core``, ...), so
importing this package costs nothing.
"""
