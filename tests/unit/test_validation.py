"""Metadata is rejected with the rules and the words of the Kubernetes API server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libaccurate.validation import (
    FieldError,
    validate_annotations,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_label_value,
    validate_labels,
    validate_qualified_name,
)

NAME_PART_RULE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _messages(errors: list[FieldError]) -> list[str]:
    return [str(error) for error in errors]


def test_an_invalid_label_value_reads_as_the_api_server_prints_it() -> None:
    assert _messages(validate_labels({"team": "~"}, "spec.labels")) == [
        'spec.labels: Invalid value: "~": a valid label must be an empty string or consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    ]


def test_an_invalid_annotation_key_reads_as_the_api_server_prints_it() -> None:
    assert _messages(validate_annotations({"foo-": "bar"}, "spec.annotations")) == [
        f'spec.annotations: Invalid value: "foo-": {NAME_PART_RULE}'
    ]


@pytest.mark.parametrize(
    "key",
    ["a", "team", "foo.bar/baz", "example.com/My_Name-1", "a" * 63, "b" * 253 + "/" + "c" * 63],
)
def test_valid_qualified_names(key: str) -> None:
    assert validate_qualified_name(key, "metadata.labels") == []


@pytest.mark.parametrize(
    ("key", "messages"),
    [
        ("", ["name part must be non-empty", NAME_PART_RULE]),
        ("foo-", [NAME_PART_RULE]),
        ("a" * 64, ["name part must be no more than 63 characters"]),
        ("/a", ["prefix part must be non-empty"]),
        ("a/", ["name part must be non-empty", NAME_PART_RULE]),
        ("Example.com/a", [f"prefix part {SUBDOMAIN_RULE}"]),
        (
            "b" * 254 + "/a",
            ["prefix part must be no more than 253 characters"],
        ),
        (
            "a/b/c",
            [
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                "'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain "
                "prefix and '/' (e.g. 'example.com/MyName')"
            ],
        ),
    ],
)
def test_invalid_qualified_names(key: str, messages: list[str]) -> None:
    errors = validate_qualified_name(key, "metadata.labels")
    assert [error.detail for error in errors] == messages
    assert all(error.path == "metadata.labels" and error.value == key for error in errors)


def test_length_limits_count_bytes() -> None:
    # 32 two-byte characters are 64 bytes: too long, besides not being alphanumeric.
    errors = validate_label_value("é" * 32, "metadata.labels")
    assert errors[0].detail == "must be no more than 63 characters"


@pytest.mark.parametrize("value", ["", "a", "My_value-1.2", "z" * 63])
def test_valid_label_values(value: str) -> None:
    assert validate_label_value(value, "metadata.labels") == []


@pytest.mark.parametrize("value", ["~", "-a", "a-", "a b", "z" * 64, "a\n"])
def test_invalid_label_values(value: str) -> None:
    assert validate_label_value(value, "metadata.labels") != []


def test_labels_check_keys_and_values_under_the_map_path() -> None:
    errors = validate_labels({"ok": "fine", "bad/key/x": "~"}, "metadata.labels")
    assert [error.value for error in errors] == ["bad/key/x", "~"]
    assert {error.path for error in errors} == {"metadata.labels"}


def test_annotation_keys_may_use_upper_case_anywhere() -> None:
    assert validate_annotations({"Example.COM/Key": "any value ~ at all"}, "a") == []


def test_annotations_may_not_exceed_256_kib_together() -> None:
    fits = {"a": "x" * (256 * 1024 - 1)}
    assert validate_annotations(fits, "metadata.annotations") == []
    too_big = {"a": "x" * (256 * 1024 - 1), "b": ""}
    assert _messages(validate_annotations(too_big, "metadata.annotations")) == [
        "metadata.annotations: Too long: must have at most 262144 bytes"
    ]


@pytest.mark.parametrize("name", ["a", "my-name", "123-abc", "a" * 63])
def test_valid_dns1123_labels(name: str) -> None:
    assert validate_dns1123_label(name, "metadata.name") == []


def test_dns1123_label_errors() -> None:
    assert _messages(validate_dns1123_label("a.b", "metadata.name")) == [
        'metadata.name: Invalid value: "a.b": must not contain dots'
    ]
    assert [e.detail for e in validate_dns1123_label("A" * 64, "metadata.name")] == [
        "must be no more than 63 characters",
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    ]


def test_dns1123_subdomains() -> None:
    assert validate_dns1123_subdomain("example.com", "metadata.name") == []
    assert [e.detail for e in validate_dns1123_subdomain("Example", "metadata.name")] == [
        SUBDOMAIN_RULE
    ]
    assert len(validate_dns1123_subdomain("a" * 254, "metadata.name")) == 1


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (
            FieldError("spec.x", 'a"b\\c\n\x01\u200b', "bad"),
            'spec.x: Invalid value: "a\\"b\\\\c\\n\\x01\\u200b": bad',
        ),
        (FieldError("spec.x", "\U000e0001", "bad"), 'spec.x: Invalid value: "\\U000e0001": bad'),
        (FieldError("spec.x", "é☺", "bad"), 'spec.x: Invalid value: "é☺": bad'),
        (FieldError("spec.x", 3, "bad"), "spec.x: Invalid value: 3: bad"),
        (FieldError("spec.x", True, "bad"), "spec.x: Invalid value: true: bad"),
        (FieldError("spec.x", None, "bad"), "spec.x: Invalid value: null: bad"),
        (FieldError("spec.x", [1], "bad"), "spec.x: Invalid value: [1]: bad"),
        (FieldError("spec.x", "", "", "FieldValueRequired"), "spec.x: Required value"),
        (FieldError("spec.x", "v", "no", "FieldValueForbidden"), "spec.x: Forbidden: no"),
        (FieldError("spec.x", "v", "", "FieldValueDuplicate"), 'spec.x: Duplicate value: "v"'),
    ],
)
def test_field_errors_print_like_kubernetes(error: FieldError, text: str) -> None:
    assert str(error) == text


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True))
def test_every_dns1123_label_is_a_valid_label_value_and_key(name: str) -> None:
    assert validate_dns1123_label(name, "p") == []
    assert validate_label_value(name, "p") == []
    assert validate_qualified_name(name, "p") == []
