"""How deep a review body nests is measured before it is decoded (controller.reviews), and the
measure is the JSON's own: brackets inside strings do not count, with escapes or without (the
two are found by different means)."""

from __future__ import annotations

import json
from itertools import accumulate
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.reviews import MAX_DEPTH, _depth

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


def walked(body: bytes) -> int:
    """The depth of the brackets of a body without strings, by the plain walk (below zero
    when it starts by closing)."""
    steps = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
    return max(accumulate(steps[b] for b in body if b in steps), default=0)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="[]{}a", max_size=40).map(str.encode))
def test_unbalanced_brackets_are_measured_as_walked(body: bytes) -> None:
    """Not JSON, so the decoder refuses them; but the depth a refusal names is still right."""
    assert _depth(body) == walked(body)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
        b"{}" + b"[" * 5000 + b"]" * 5000,
        b"[[]]" * 40_000,  # more brackets than a review holds
        b"[" * 70_000,
        b"[" + b'"{", ' * 10 + b"[]]",  # a string with a bracket in it
    ],
)
def test_deep_long_or_stringy_bodies_are_measured_exactly(body: bytes) -> None:
    outside = body.replace(b'"{"', b"")
    assert _depth(body) == walked(outside)
