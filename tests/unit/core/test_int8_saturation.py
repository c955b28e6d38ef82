"""The int8 first pass is exact on CPUs whose uint8 x int8 product saturates (AVX2 without
VNNI: ONNX Runtime's vpmaddubsw sums two products in int16): queries are coded so that
their products never saturate, whatever this CPU is."""

from __future__ import annotations

import numpy as np

from agent_cache.vectors import _int8


def test_the_chosen_query_codes_give_the_exact_integer_product() -> None:
    assert _int8.available()
    levels, zero = _int8._query_format()
    assert (levels, zero) in {(127, 128), (63, 64)}
    rng = np.random.default_rng(0)
    codes = rng.integers(-127, 128, size=(384, 64)).astype(np.int8)
    codes[:, :4] = 127  # the worst case: every pair at the int16 limit
    codes[:, 4:8] = -127
    query = rng.integers(-levels, levels + 1, size=(3, 384))
    query[0] = levels
    query[1] = -levels
    session, _ = _int8._session(codes, 1)
    (got,) = session.run(None, {"q": (query + zero).astype(np.uint8)})
    np.testing.assert_array_equal(got.astype(np.int64), query @ codes.astype(np.int64))
