"""Kubernetes metadata validation with the API server's rules and messages.

Admission and the in-memory API server reject bad labels, annotations and names; users compare
what they see with what a real cluster prints, so the checks and the wording follow
k8s.io/apimachinery (util/validation and the ObjectMeta validation) closely.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253

_ERROR_TYPE_TEXT = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}
# Kubernetes prints these types without the offending value.
_VALUELESS_TYPES = frozenset(
    {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "InternalError"}
)

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_QUALIFIED_NAME_EXAMPLES = ("MyName", "my.name", "123-abc")
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)

_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)
_DNS1123_LABEL = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)


@dataclass(frozen=True)
class FieldError:
    """One field error, printed the way the API server prints ``field.Error``."""

    path: str
    value: object
    detail: str
    type: str = "FieldValueInvalid"

    def __str__(self) -> str:
        body = _ERROR_TYPE_TEXT[self.type]
        if self.type not in _VALUELESS_TYPES:
            body = f"{body}: {_go_value(self.value)}"
        if self.detail:
            body = f"{body}: {self.detail}"
        return f"{self.path}: {body}"


def validate_qualified_name(value: str, path: str) -> list[FieldError]:
    """A label key (or annotation key): an optional DNS subdomain prefix and '/', then a name."""
    return [FieldError(path, value, message) for message in _qualified_name_messages(value)]


def validate_label_value(value: str, path: str) -> list[FieldError]:
    messages = []
    if _byte_length(value) > LABEL_VALUE_MAX_LENGTH:
        messages.append(_max_length(LABEL_VALUE_MAX_LENGTH))
    if not _LABEL_VALUE.fullmatch(value):
        messages.append(
            _regex_message(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return [FieldError(path, value, message) for message in messages]


def validate_labels(labels: Mapping[str, str], path: str) -> list[FieldError]:
    """Every key and value; as in Kubernetes, errors carry the map's path, not the key's."""
    errors: list[FieldError] = []
    for key, value in labels.items():
        errors += validate_qualified_name(key, path)
        errors += validate_label_value(value, path)
    return errors


def validate_annotations(annotations: Mapping[str, str], path: str) -> list[FieldError]:
    """Keys are qualified names in any case; keys and values together fit in 256 KiB."""
    errors = [
        FieldError(path, key, message)
        for key in annotations
        for message in _qualified_name_messages(key.lower())
    ]
    size = sum(_byte_length(key) + _byte_length(value) for key, value in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        errors.append(
            FieldError(
                path,
                "",
                f"must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes",
                "FieldValueTooLong",
            )
        )
    return errors


def validate_dns1123_label(value: str, path: str) -> list[FieldError]:
    """A namespace name, for example."""
    messages = []
    if _byte_length(value) > DNS1123_LABEL_MAX_LENGTH:
        messages.append(_max_length(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            messages.append("must not contain dots")
        else:
            messages.append(
                _regex_message(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc")
            )
    return [FieldError(path, value, message) for message in messages]


def validate_dns1123_subdomain(value: str, path: str) -> list[FieldError]:
    """The name of most objects, and the prefix of a qualified name."""
    return [FieldError(path, value, message) for message in _dns1123_subdomain_messages(value)]


def _qualified_name_messages(value: str) -> list[str]:
    messages: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _regex_message(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, *_QUALIFIED_NAME_EXAMPLES)
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if len(parts) == 2 and not parts[0]:
        messages.append("prefix part must be non-empty")
    elif len(parts) == 2:
        messages += ["prefix part " + m for m in _dns1123_subdomain_messages(parts[0])]
    name = parts[-1]
    if not name:
        messages.append("name part must be non-empty")
    elif _byte_length(name) > QUALIFIED_NAME_MAX_LENGTH:
        messages.append("name part " + _max_length(QUALIFIED_NAME_MAX_LENGTH))
    if not _QUALIFIED_NAME.fullmatch(name):
        messages.append(
            "name part "
            + _regex_message(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, *_QUALIFIED_NAME_EXAMPLES)
        )
    return messages


def _dns1123_subdomain_messages(value: str) -> list[str]:
    messages = []
    if _byte_length(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        messages.append(_max_length(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        messages.append(
            _regex_message(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com")
        )
    return messages


def _max_length(length: int) -> str:
    return f"must be no more than {length} characters"


def _regex_message(message: str, fmt: str, *examples: str) -> str:
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _byte_length(text: str) -> int:
    """Kubernetes limits are in bytes of UTF-8, not in characters."""
    return len(text.encode("utf-8", "surrogatepass"))


def _go_value(value: object) -> str:
    """Render a bad value as Go's ``%q`` / ``%v`` would in a field error.

    Other values print with ``repr``, so a caller can give a value the form Go's ``%#v`` prints.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _go_quote(value)
    return repr(value)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_GO_ESCAPES |= {"\v": "\\v", '"': '\\"', "\\": "\\\\"}


def _go_quote(text: str) -> str:
    """Go's ``strconv.Quote``: printable characters as they are, others escaped."""
    out = []
    for char in text:
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'
