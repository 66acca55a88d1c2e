"""Naming policies decide sub-namespace names exactly as the Go Accurate does (ACCEPTANCE B2-B6)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libaccurate.config import NamingPolicy
from libaccurate.naming import check_name, compile_policy_root, expand_template

# The policies of the Go Accurate's own webhook tests.
GO_TEST_POLICIES = [
    NamingPolicy(root="naming-policy-root-1", match="naming-policy-root-1-child"),
    NamingPolicy(root="naming-policy-root-2", match="naming-policy-root-2-child"),
    NamingPolicy(root=".+-match-.+", match=".+-match-.+"),
    NamingPolicy(root="^ns-root.+", match="^ns-root.+"),
    NamingPolicy(root="^app-(?P<team>.*)", match="^app-${team}-.*"),
    NamingPolicy(root="^app-(?P<team>[^-]*)-(?P<app>[^-]*)", match="^app-$team-$app-.*"),
    NamingPolicy(root="^unuse-naming-group-(?P<team>.*)", match="^unuse-naming-group-child1"),
]


@pytest.mark.parametrize(
    ("root", "name"),
    [
        ("app-team1", "app-team1-child"),  # B2
        ("app-team2-app1", "app-team2-app1-subapp1"),  # B3: two policies apply, both pass
        ("unuse-naming-group-root1", "unuse-naming-group-child1"),  # B4
        ("naming-policy-root-1", "naming-policy-root-1-child"),
        ("root-match-1", "child-match-1"),
        ("ns-root-1", "ns-root-1-child"),
        ("other-root", "anything-at-all"),  # B6: no policy applies
        ("naming-policy-root-1", "naming-policy-root-1-child-of-child"),  # unanchored search
    ],
)
def test_allowed_names(root: str, name: str) -> None:
    assert check_name(GO_TEST_POLICIES, root, name) is None


@pytest.mark.parametrize(
    ("root", "name", "policy"),
    [
        ("app-team10", "app-team20-child", GO_TEST_POLICIES[4]),  # B2
        ("app-team2-app1", "app-team2-app2-subapp1", GO_TEST_POLICIES[4]),  # B3
        ("unuse-naming-group-root1", "unuse-naming-group-child2", GO_TEST_POLICIES[6]),  # B4
        ("naming-policy-root-1", "naming-policy-root-2-child", GO_TEST_POLICIES[0]),
        ("root-match-1", "child-1", GO_TEST_POLICIES[2]),
    ],
)
def test_denied_names_say_which_policy_root_and_name(
    root: str, name: str, policy: NamingPolicy
) -> None:
    message = check_name(GO_TEST_POLICIES, root, name)
    assert message is not None
    for part in (root, name, policy.root, policy.match):
        assert repr(part) in message


def test_policies_apply_through_the_root_of_the_tree() -> None:
    # B5: the caller passes the root of the tree, not the immediate parent.
    policies = [NamingPolicy(root="^team-(?P<t>[a-z]+)$", match="^${t}-")]
    assert check_name(policies, "team-blue", "blue-api") is None
    assert check_name(policies, "team-blue", "red-api") is not None


def test_each_match_in_the_root_is_expanded_and_concatenated() -> None:
    policies = [NamingPolicy(root="(?P<letter>[a-z])-", match="^${letter}")]
    # "a-b-" matches twice, so the required pattern is "^a" followed by "^b": "^a^b".
    message = check_name(policies, "a-b-", "ab")
    assert message is not None
    assert "'^a^b'" in message
    assert check_name([NamingPolicy(root="(?P<d>[0-9])", match="${d}")], "x1y2", "n-12") is None


def test_an_empty_match_right_after_a_match_is_skipped_as_in_go() -> None:
    # Go finds "" at 0 and "bb" at 1 in "abb", but not the "" at 3 that Python also reports.
    policies = [NamingPolicy(root="(?P<c>b*)", match="x${c}y")]
    assert check_name(policies, "abb", "xyxbby") is None
    assert check_name(policies, "abb", "xyxbbyxy") is None
    assert check_name(policies, "abb", "xybbxy") is not None


def test_an_expanded_match_that_does_not_compile_denies_with_the_reason() -> None:
    policies = [NamingPolicy(root="^(?P<x>.*)$", match="${x}")]
    message = check_name(policies, "a(", "anything")
    assert message is not None
    assert "not a valid regex" in message


def _match(pattern: str, text: str) -> re.Match[str]:
    found = compile_policy_root(pattern).search(text)
    assert found is not None
    return found


# Matched against "aac": first="aa", group 2 did not take part, third="c".
@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("$first", "aa"),
        ("${first}x", "aax"),
        ("$firstx", ""),  # the name is as long as possible: "firstx" is no group
        ("$1", "aa"),
        ("${1}", "aa"),
        ("${1}0", "aa0"),
        ("$10", ""),  # group ten, not group one then "0"
        ("$2", ""),  # a group that did not match
        ("$3", "c"),
        ("$4", ""),  # no such group
        ("$0", "aac"),
        ("$01", ""),  # a leading zero makes it a name, and there is no group "01"
        ("$99999999999", ""),
        ("$$first", "$first"),
        ("$$$first", "$aa"),
        ("$", "$"),
        ("a$", "a$"),
        ("$-x", "$-x"),
        ("${first", "${first"),
        ("${}", "${}"),
        ("${1x}", ""),
        ("$third$first", "caa"),
        ("$é", ""),  # letters beyond ASCII belong to the name too
        ("x$_", "x"),
        ("no references", "no references"),
    ],
)
def test_expand_template_follows_go(template: str, expected: str) -> None:
    match = _match("(?P<first>a+)(b)?(?P<third>c*)", "aac")
    assert expand_template(template, match) == expected


@given(st.text(alphabet=st.characters(blacklist_characters="$")))
def test_a_template_without_dollar_is_unchanged(template: str) -> None:
    assert expand_template(template, _match("(x)?", "")) == template


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("^app-(?P<team>.*)", "app-a", "app-a"),
        ("(?<team>a+)", "baa", "aa"),  # Go 1.22 group syntax
        ("a\\z", "a", "a"),
        ("a\\z", "ab", None),
        ("a$", "a\n", None),  # Go's "$" is the end of the text
        ("(?m)a$", "a\nb", "a"),  # or of a line with the m flag
        ("(?m)(a$)", "a\nb", "a"),
        ("(?m:a$)", "a\nb", "a"),
        ("(?m:x)a$", "a\nb", None),
        ("(?m-m)a$", "a\nb", None),
        ("((?m)x|a$)", "a\nb", "a"),
        ("\\Qa.b\\E+", "a.bb", "a.bb"),
        ("\\Qa.b", "axb", None),
        ("\\Q\\E", "x", ""),
        ("[[:alpha:]]+", "ab1", "ab"),
        ("[[:digit:][:punct:]]+", "1-2x", "1-2"),
        ("a(?i)b|c", "C", "C"),  # the flag holds to the end of the group, over the "|"
        ("a(?i)b|c", "aB", "aB"),
        ("(a(?i)b|c)d", "Cd", "Cd"),
        ("(a(?i)b|c)D", "cd", None),
        ("(?i:A)b", "aB", None),
        ("(?s).", "\n", "\n"),
        ("(?)a", "a", "a"),
        ("(?-i)a", "a", "a"),
        ("x{2,3}", "xxxx", "xxx"),
        ("x{2,}?", "xxxx", "xx"),
        ("a{,3}", "a{,3}", "a{,3}"),  # not a repetition in Go
        ("a{", "a{", "a{"),
        ("a}", "a}", "a}"),
        ("\\x41\\x{42}\\101\\0", "ABA\0", "ABA\0"),
        ("\\12", "\n", "\n"),  # octal, not a backreference
        ("[\\x{41}-\\x{43}]+", "ABCD", "ABC"),
        ("[\\d-z]+", "1-z", "1-z"),  # "-" after a class is a literal
        ("[a-]+", "a-", "a-"),
        ("[]a]+", "]a", "]a"),
        ("[^]a]", "b", "b"),
        ("[\\^x]+", "^x", "^x"),
        ("[[&~|]+", "[&~|", "[&~|"),
        ("[\\t-\\r]", "\n", "\n"),
        ("\\d+", "\u0661\u06623", "3"),  # ASCII digits only, as in Go
        ("\\w+", "é_a", "_a"),
        ("\\bab\\B", "ab", None),
        ("\\Aab", "ab", "ab"),
        ("\\.\\-", ".-", ".-"),
        ("a*?b", "aab", "aab"),
        ("(?P<x>a)|b", "b", "b"),
    ],
)
def test_go_regex_syntax_is_translated(pattern: str, text: str, expected: str | None) -> None:
    found = compile_policy_root(pattern).search(text)
    assert (found.group(0) if found else None) == expected


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(", "missing closing )"),
        (")", "unexpected )"),
        ("a**", "nested repetition"),
        ("a*+", "nested repetition"),
        ("a{2}{3}", "nested repetition"),
        ("*a", "missing argument"),
        ("(|*)", "missing argument"),
        ("a{1001}", "repeat count"),
        ("a{1,1001}", "repeat count"),
        ("(?=a)", "unsupported Perl syntax"),
        ("(?<=a)b", "unsupported Perl syntax"),
        ("(?P=x)", "unsupported Perl syntax"),
        ("(?#c)", "unsupported Perl syntax"),
        ("(?x)a", "unsupported Perl flags"),
        ("(?i-)a", "unsupported Perl flags"),
        ("(?U)a", "ungreedy"),
        ("\\pL", "Unicode classes"),
        ("[\\p{Greek}]", "Unicode classes"),
        ("\\1", "backreferences"),
        ("\\8", "invalid escape"),
        ("\\Z", "invalid escape"),
        ("\\C", "invalid escape"),
        ("\\é", "invalid escape"),
        ("[\\b]", "invalid escape"),
        ("\\xZZ", "invalid escape"),
        ("\\x{110000}", "invalid escape"),
        ("a\\", "trailing backslash"),
        ("[a", "missing closing ]"),
        ("[a-", "missing closing ]"),
        ("[[:^alpha:]]", "character class"),
        ("[[:nope:]]", "character class"),
    ],
)
def test_what_go_rejects_or_python_cannot_express_is_an_error(pattern: str, reason: str) -> None:
    with pytest.raises(re.error, match=re.escape(reason)):
        compile_policy_root(pattern)


def test_an_error_python_finds_is_still_an_error() -> None:
    with pytest.raises(re.error):
        compile_policy_root("[z-a]")
