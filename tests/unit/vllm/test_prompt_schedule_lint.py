"""schedule_batch (prefix-sharing runs back to back) and lint_prefix (volatile content)."""

from __future__ import annotations

import random

import pytest

from agent_cache.errors import ConfigurationError
from agent_cache.prompt import lint_prefix, schedule_batch, simulate_prefix_cache


def test_requests_sharing_a_prefix_run_back_to_back() -> None:
    batch = ["SYS docB q1", "SYS docA q2", "SYS docB q3", "SYS docA q4", "OTHER q5"]
    order = schedule_batch(batch)
    assert sorted(order) == list(range(5))
    runs = [batch[i].split()[1] if batch[i].startswith("SYS") else "other" for i in order]
    assert runs in (
        ["docA", "docA", "docB", "docB", "other"],
        ["other", "docA", "docA", "docB", "docB"],
    )


def test_ties_keep_their_arrival_order() -> None:
    assert schedule_batch(["same", "same", "same"]) == [0, 1, 2]


def test_token_lists_and_message_lists() -> None:
    assert schedule_batch([[1, 2, 9], [1, 3], [1, 2, 4]]) == [2, 0, 1]
    sys = {"role": "system", "content": "S"}
    batch = [
        [sys, {"role": "user", "content": "b 1"}],
        [sys, {"role": "user", "content": "a 1"}],
        [sys, {"role": "user", "content": "b 2"}],
    ]
    assert schedule_batch(batch) == [1, 0, 2]


def test_custom_key_and_bad_input() -> None:
    reqs = [{"prompt": "b"}, {"prompt": "a"}]
    assert schedule_batch(reqs, key=lambda r: r["prompt"]) == [1, 0]
    with pytest.raises(ConfigurationError):
        schedule_batch(reqs)
    with pytest.raises(ConfigurationError):
        schedule_batch(["text", [1, 2]])


def test_scheduling_beats_arrival_order_under_a_capacity_limit() -> None:
    rng = random.Random(3)
    groups = [[rng.randrange(1000) for _ in range(160)] for _ in range(8)]
    batch = [rng.choice(groups) + [rng.randrange(1000) for _ in range(20)] for _ in range(80)]
    arrival = simulate_prefix_cache(batch, capacity_blocks=30)
    order = schedule_batch(batch)
    scheduled = simulate_prefix_cache([batch[i] for i in order], capacity_blocks=30)
    assert scheduled.hit_rate > 2 * arrival.hit_rate


@pytest.mark.parametrize(
    ("text", "kind", "match"),
    [
        ("Today is 2024-05-01.", "date", "2024-05-01"),
        ("Now: 2024-05-01T12:30:00Z.", "timestamp", "2024-05-01T12:30:00Z"),
        ("It is 10:45 pm here.", "time", "10:45 pm"),
        ("on May 3, 2024 we", "date", "May 3, 2024"),
        ("date 03/05/2024", "date", "03/05/2024"),
        (
            "run 550e8400-e29b-41d4-a716-446655440000",
            "uuid",
            "550e8400-e29b-41d4-a716-446655440000",
        ),
        ("trace deadbeef00112233aa ok", "hex id", "deadbeef00112233aa"),
        ("Request #1234 of the day", "counter", "Request #1234"),
        ("This is turn 5.", "counter", "turn 5"),
        ("epoch 1716200000", "timestamp", "1716200000"),
    ],
)
def test_each_kind_of_volatile_content_is_found(text: str, kind: str, match: str) -> None:
    issues = lint_prefix(text)
    assert [(i.kind, i.text) for i in issues] == [(kind, match)]
    assert issues[0].start == text.index(match)


def test_clean_static_text_passes() -> None:
    assert (
        lint_prefix("You are helpful. Step 1: read the documents. Use version 2 of the API.") == []
    )


def test_positions_and_segment_names() -> None:
    issues = lint_prefix({"system": "ok\nnow 2024-01-02", "instructions": "fine"})
    assert [(i.segment, i.line, i.column) for i in issues] == [("system", 2, 5)]
    assert "system:2:5" in str(issues[0])
    msgs = [
        {"role": "system", "content": "id deadbeefdeadbeef1234"},
        {"role": "user", "content": "at 09:30"},
    ]
    assert [i.segment for i in lint_prefix(msgs)] == ["messages[0].system", "messages[1].user"]
