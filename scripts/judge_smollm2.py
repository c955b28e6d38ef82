"""Measure the request judge on the local SmolLM2-135M server: how often it says yes to
paraphrases and to traps, and its latency (README, trust paragraph). Run with the venv's
python from the repository root: ``.venv/bin/python scripts/judge_smollm2.py``."""

from __future__ import annotations

from agent_cache.judge import Judge
from agent_cache.local_llm import LocalLlamaServer
from agent_cache.vllm import VllmRouter

PARAPHRASES = [
    ("What are the signs of diabetes?", "What are the symptoms of diabetes?"),
    ("How do I teach my dog to sit?", "How do I train my dog to sit?"),
    ("How do I restart the service?", "How do I restart the daemon?"),
    ("How do I set the timeout?", "How do I configure the timeout?"),
    ("What are the benefits of yoga?", "What are the advantages of yoga?"),
    ("How do I terminate my contract?", "How do I cancel my contract?"),
    ("Why is my laptop sluggish?", "Why is my laptop slow?"),
    ("How do I deploy to k8s?", "How do I deploy to Kubernetes?"),
    ("How do I back up the DB?", "How do I back up the database?"),
    ("How do I clone a repo?", "How do I clone a repository?"),
]
TRAPS = [
    ("Can I bring my dog to the office?", "Do I have to bring my dog to the office?"),
    ("How do I cancel my order?", "How do I track my order?"),
    ("What is the capital of France?", "What is the capital of Spain?"),
    ("How do I upload a file?", "How do I download a file?"),
    ("Is coffee good for you?", "Is coffee bad for you?"),
    ("How do I sort a list ascending?", "How do I sort a list descending?"),
    ("How do I open a bank account?", "How do I close a bank account?"),
    ("What time does the store open?", "What time does the store close?"),
    ("How do I add a user?", "How do I remove a user?"),
    ("Who wrote Hamlet?", "Who wrote Macbeth?"),
]


def main() -> None:
    with LocalLlamaServer(n_ctx=2048) as srv, VllmRouter([srv.base_url]) as router:

        def call(prompt: str) -> object:
            messages = [{"role": "user", "content": prompt}]
            return router.chat(messages, model=srv.model, max_tokens=3, temperature=0.0)

        judge = Judge(call, timeout=30)
        yes_p = sum(judge.ask(a, b) for a, b in PARAPHRASES)
        yes_t = sum(judge.ask(a, b) for a, b in TRAPS)
        st = judge.stats()
        print(
            f"SmolLM2-135M judge: yes to {yes_p}/{len(PARAPHRASES)} paraphrases, "
            f"{yes_t}/{len(TRAPS)} traps; p50 {st['p50_ms']:.0f} ms, p95 {st['p95_ms']:.0f} ms; "
            f"{st['reply_chars']:.0f} reply characters in {st['asked']:.0f} calls"
        )


if __name__ == "__main__":
    main()
