"""Two globs overlap exactly when some key matches both, by Go's path.Match (issue 27 point 1:
the controller warns where a tenant's SubNamespace value wins over an inherited key)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libaccurate.glob_overlap import common_key
from libaccurate.globs import GlobError, glob_match

# Small pieces, so that random patterns often meet on small keys; classes that match "/"
# (``[/]``, ``[^a]``) included, since there Go's first-fit scan differs from a regex.
PIECES = ["a", "b", "/", ".", "*", "?", "[ab]", "[^a]", "[/]", "[a-c]", "\\*", "*"]
PATTERN = st.lists(st.sampled_from(PIECES), max_size=5).map("".join)
KEY = st.text(alphabet=st.sampled_from("ab/.c*x"), max_size=7)


def literal(key: str) -> str:
    """A pattern matching ``key`` and nothing else."""
    return "".join("\\" + char if char in "*?[\\" else char for char in key)


@given(PATTERN, KEY)
@settings(max_examples=400)
def test_the_scan_is_gos(pattern: str, key: str) -> None:
    """A literal pattern overlaps ``pattern`` exactly when the key matches it: the scan
    explored here answers as glob_match does, key by key."""
    expected = key if key and glob_match(pattern, key) else None
    assert common_key(pattern, literal(key)) == expected


@given(PATTERN, PATTERN, st.lists(KEY, max_size=20))
@settings(max_examples=300)
def test_an_overlap_is_found_with_a_key_that_matches_both(
    first: str, second: str, keys: list[str]
) -> None:
    found = common_key(first, second)
    if found is not None:
        assert glob_match(first, found) and glob_match(second, found)
        assert len(found) <= min(
            (len(k) for k in keys if k and _both(first, second, k)), default=99
        )
    else:
        assert not any(_both(first, second, key) for key in keys if key)
    assert common_key(second, first) == found


def _both(first: str, second: str, key: str) -> bool:
    return glob_match(first, key) and glob_match(second, key)


@pytest.mark.parametrize(
    ("first", "second", "example"),
    [
        ("pod-security.kubernetes.io/*", "pod-security.kubernetes.io/enforce", None),
        ("*", "team", "team"),
        ("*", "*", "a"),  # never the empty key
        ("*.example.com/*", "a.example.com/owner", "a.example.com/owner"),
        ("*/enforce", "pod-security.kubernetes.io/*", "pod-security.kubernetes.io/enforce"),
        ("team", "team", "team"),
        ("[a-c]x", "[c-e]?", "cx"),
    ],
)
def test_overlapping_patterns(first: str, second: str, example: str | None) -> None:
    found = common_key(first, second)
    assert found is not None
    assert glob_match(first, found) and glob_match(second, found)
    if example is not None:
        assert found == example


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("team", "owner"),
        ("*", "example.com/*"),  # a star never crosses "/"
        ("a.example.com/*", "b.example.com/*"),
        ("[a-c]", "[d-f]"),
        ("?", "??"),
        # Go keeps the first fit after the star: "*[^a]*" never matches a key with a "/"
        # after its first non-"a" character, though a regex would.
        ("*[^a]*", "b*/*"),
    ],
)
def test_disjoint_patterns(first: str, second: str) -> None:
    assert common_key(first, second) is None
    assert common_key(second, first) is None


def test_a_malformed_pattern_is_an_error() -> None:
    with pytest.raises(GlobError):
        common_key("a[", "*")
