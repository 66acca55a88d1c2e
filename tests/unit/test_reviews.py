"""How deep a review body nests is measured before it is decoded (controller.reviews), and the
measure is the JSON's own: brackets inside strings do not count, with escapes or without (the
two are found by different means)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.reviews import _depth

# Without quotes or backslashes, json.dumps writes strings with no escape at all.
PLAIN = st.text(alphabet="[]{}ax", max_size=8)
BRACKETY = st.text(alphabet='[]{}"\\ax', max_size=8)


def values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none() | st.integers() | strings,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
        max_leaves=20,
    )


def nesting(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(values(PLAIN), values(BRACKETY)))
def test_the_depth_is_the_nesting_of_the_value(value: Any) -> None:
    body = json.dumps(value, ensure_ascii=False).encode()

    assert _depth(body) == nesting(value)
