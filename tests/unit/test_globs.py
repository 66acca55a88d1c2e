"""Globs select the same label and annotation keys as Go's path.Match does for the Go Accurate."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libaccurate.globs import GlobError, glob_match, match_any, validate_glob

MATCHING = [
    ("team", "team"),
    ("*", "anything"),
    ("*", ""),
    ("*.glob/*", "foo.glob/a"),
    ("foo.bar/baz", "foo.bar/baz"),
    ("a*", "a"),
    ("a*/b", "abc/b"),
    ("a*b*c*d*e*/f", "axbxcxdxe/f"),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/f"),
    ("a*b?c*x", "abxbbxdbxebxczzx"),
    ("ab[c]", "abc"),
    ("ab[b-d]", "abc"),
    ("ab[^e-g]", "abc"),
    ("a\\*b", "a*b"),
    ("a?b", "a☺b"),
    ("a[^a]b", "a☺b"),
    ("[a-ζ]*", "\u03b1"),  # alpha
    ("[\\]a]", "]"),
    ("[\\-]", "-"),
    ("[x\\-]", "-"),
    ("[\\-x]", "x"),
    ("*x", "xxx"),
    ("[^/]", "a"),
    ("[/]", "/"),
]

NOT_MATCHING = [
    ("team", "teams"),
    ("team", "tea"),
    ("*.glob/*", "do.not.match/glob.pattern"),
    ("a*", "ab/c"),
    ("a*/b", "a/c/b"),
    ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f"),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/fff"),
    ("a*b?c*x", "abxbbxdbxebxczzy"),
    ("ab[e-g]", "abc"),
    ("ab[^c]", "abc"),
    ("ab[^b-d]", "abc"),
    ("a\\*b", "ab"),
    ("a???b", "a☺b"),
    ("a[^a][^a][^a]b", "a☺b"),
    ("*[a-ζ]", "A"),
    ("a?b", "a/b"),
    ("a*b", "a/b"),
    ("[x\\-]", "z"),
    ("[\\-x]", "a"),
    ("", "a"),
]

MALFORMED = ["[", "a[", "\\", "a\\", "[]a]", "[-]", "[x-]", "[-x]", "[a-b-c]", "[^", "[^bc", "[a-"]


@pytest.mark.parametrize(("pattern", "name"), MATCHING)
def test_matches(pattern: str, name: str) -> None:
    assert glob_match(pattern, name)


@pytest.mark.parametrize(("pattern", "name"), NOT_MATCHING)
def test_does_not_match(pattern: str, name: str) -> None:
    assert not glob_match(pattern, name)


@pytest.mark.parametrize("pattern", MALFORMED)
@pytest.mark.parametrize("name", ["", "a", "x", "ab", "]", "-"])
def test_malformed_patterns_are_errors_whatever_the_name(pattern: str, name: str) -> None:
    with pytest.raises(GlobError) as caught:
        glob_match(pattern, name)
    assert repr(pattern) in str(caught.value)
    assert caught.value.pattern == pattern


@pytest.mark.parametrize("pattern", ["a[", "a*[", "x/y[", "*x\\", "a*b*["])
def test_a_malformed_tail_after_a_mismatch_is_still_an_error(pattern: str) -> None:
    with pytest.raises(GlobError):
        glob_match(pattern, "zzz")


@pytest.mark.parametrize("pattern", MALFORMED)
def test_validate_rejects_malformed_patterns(pattern: str) -> None:
    with pytest.raises(GlobError):
        validate_glob(pattern)


@pytest.mark.parametrize("pattern", ["team", "*.glob/*", "[a-z]?", "\\*", "[^\\]]", "*"])
def test_validate_accepts_wellformed_patterns(pattern: str) -> None:
    validate_glob(pattern)


def test_a_star_does_not_backtrack_into_an_earlier_chunk() -> None:
    # Go takes the first place where the chunk after a star fits and never reconsiders it, so a
    # class that can match "/" may miss a name that a backtracking matcher would accept.
    assert not glob_match("*[^a]*", "bb/ba")
    assert glob_match("*[^a]*", "bbba")


def test_match_any() -> None:
    assert match_any(["team", "*.glob/*"], "x.glob/y")
    assert not match_any(["team", "*.glob/*"], "other")
    assert not match_any([], "team")


LITERAL_CHARS = st.sampled_from("ab./-_xyz")
NAME = st.text(alphabet=st.sampled_from("ab/.-"), max_size=8)


@given(st.text(alphabet=LITERAL_CHARS, max_size=8), st.text(alphabet=LITERAL_CHARS, max_size=8))
def test_a_pattern_without_metacharacters_is_string_equality(pattern: str, name: str) -> None:
    assert glob_match(pattern, name) == (pattern == name)
    assert glob_match(pattern, pattern)


@given(NAME)
def test_star_never_matches_a_slash(name: str) -> None:
    assert glob_match("*", name) == ("/" not in name)
    assert glob_match("?", name) == (len(name) == 1 and name != "/")


# Each glob token with its textbook meaning; Go agrees with it when no class can match "/".
GLOB_TOKENS = [
    ("a", "a"),
    ("b", "b"),
    ("/", "/"),
    ("*", "[^/]*"),
    ("?", "[^/]"),
    ("[ab]", "[ab]"),
    ("[^a/]", "[^a/]"),
]


@given(st.lists(st.sampled_from(GLOB_TOKENS), max_size=6), NAME)
def test_agrees_with_a_backtracking_matcher_when_no_class_matches_a_slash(
    tokens: list[tuple[str, str]], name: str
) -> None:
    pattern = "".join(glob for glob, _ in tokens)
    regex = "".join(meaning for _, meaning in tokens)
    assert glob_match(pattern, name) == (re.fullmatch(regex, name) is not None)
