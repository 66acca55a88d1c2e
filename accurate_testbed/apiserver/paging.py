"""Chunked lists: which version and which part of a collection a LIST reads; continue tokens.

The rules are kube-apiserver's with its watch cache on: ``ListOptions`` are validated first (422),
``limit`` is ignored for ``resourceVersion=0`` (served from the cache), ``limit`` with another
explicit version reads exactly that version (the legacy "Exact" of the API concepts' table), and a
``continue`` token carries the version of the first page and the key after the last item, so every
page shows the collection as it was when the first was served. A token whose version has left
the history gets 410 Expired with a token to go on at the latest version, as etcd's compaction
causes. Tokens and their errors are those of k8s.io/apiserver/pkg/storage (continue.go).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from accurate_testbed.apiserver import errors, go_parsing
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.store import Position
from libaccurate.validation import FieldError

TOKEN_VERSION = "meta.k8s.io/v1"
EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"
_INVALID_TOKEN = "continue key is not valid"
_LIST_TOO_OLD = "The resourceVersion for the provided list is too old."
_CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this response "
    "to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)
_FUTURE_REVISION = "etcdserver: mvcc: required revision is a future revision"
_TOKEN_FIELDS = {"v": "string", "rv": "int64", "start": "string"}


@dataclass(frozen=True)
class ListOptions:
    """The query parameters of a LIST that choose what it reads."""

    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""

    @classmethod
    def from_query(cls, query: dict[str, str]) -> ListOptions:
        """The options; a ``limit`` that is not an integer is refused as the parameter decoder
        refuses it."""
        try:
            limit = go_parsing.parse_integer(query.get("limit") or "0", signed=True)
        except ValueError as error:
            raise errors.bad_request(str(error)) from None
        return cls(
            limit,
            query.get("continue", ""),
            query.get("resourceVersion", ""),
            query.get("resourceVersionMatch", ""),
        )


@dataclass(frozen=True)
class Scope:
    """Where a list looks: the part of the key space its continue keys are relative to."""

    namespace: str | None  # None: every namespace of a namespaced resource
    namespaced: bool

    def key(self, position: Position) -> str:
        """The object's key below the list's prefix, as etcd's keys read."""
        namespace, name = position
        return f"{namespace}/{name}" if self.namespaced and self.namespace is None else name

    def position(self, key: str) -> Position:
        if self.namespaced and self.namespace is None:
            namespace, _, name = key.partition("/")
            return (namespace, name)
        return (self.namespace or "", key)


@dataclass(frozen=True)
class Read:
    """What a LIST reads: up to ``limit`` objects (0: all) from ``start``, at ``rv`` (None: the
    latest); ``start_key`` is the token's key when it continues an earlier list."""

    rv: int | None = None
    start: Position = ("", "")
    limit: int = 0
    start_key: str | None = None

    def expired(self) -> ApiError:
        """The 410 for a version that left the history; a continued list gets a token to go on
        from the same key at the latest version."""
        if self.start_key is None:
            return errors.gone(_LIST_TOO_OLD)
        error = errors.gone(_CONTINUE_TOO_OLD)
        error.status["metadata"]["continue"] = encode(-1, self.start_key)
        return error


def future_revision() -> ApiError:
    """etcd's answer to a read of a version it has not reached, passed on as is."""
    return ApiError(500, "", _FUTURE_REVISION)


def plan(options: ListOptions, scope: Scope) -> Read:
    """Validate the options as kube-apiserver does and say what to read."""
    _validate(options)
    rv, match = options.resource_version, options.resource_version_match
    limit = 0 if rv == "0" else max(options.limit, 0)
    exact = match == EXACT or (not match and limit > 0 and rv != "")
    # The watch cache cannot serve these; etcd's store parses the version with its own message.
    from_storage = exact or bool(options.continue_token)
    version = _parse_version(rv, from_storage) if rv else 0
    if options.continue_token:
        return _continued(options, scope)
    return Read(version if exact else None, limit=limit)


def encode(rv: int, key: str) -> str:
    token = {"v": TOKEN_VERSION, "rv": rv, "start": key}
    data = json.dumps(token, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def next_token(rv: int, scope: Scope, last: Position) -> str:
    """The token for the page after ``last``: its key plus a NUL, the smallest key above it."""
    return encode(rv, scope.key(last) + "\x00")


def _validate(options: ListOptions) -> None:
    match, path = options.resource_version_match, "resourceVersionMatch"
    if not match:
        return
    issues = []
    if not options.resource_version:
        issues.append(_forbidden("is forbidden unless resourceVersion is provided"))
    if options.continue_token:
        issues.append(_forbidden("is forbidden when continue is provided"))
    if match not in (EXACT, NOT_OLDER_THAN):
        supported = 'supported values: "Exact", "NotOlderThan", ""'
        issues.append(FieldError(path, match, supported, "FieldValueNotSupported"))
    if match == EXACT and options.resource_version == "0":
        issues.append(_forbidden('"exact" is forbidden for resourceVersion "0"'))
    if issues:
        raise errors.invalid("meta.k8s.io", "ListOptions", "", issues)


def _forbidden(rule: str) -> FieldError:
    path = "resourceVersionMatch"
    return FieldError(path, None, f"{path} {rule}", "FieldValueForbidden")


def _parse_version(text: str, from_storage: bool) -> int:
    """storage.APIObjectVersioner's parse: etcd's store wraps its error in a 400, the watch
    cache passes it on unconverted (500)."""
    try:
        return go_parsing.parse_integer(text, signed=False)
    except ValueError as error:
        invalid = str(FieldError("resourceVersion", text, str(error)))
        if from_storage:
            raise errors.bad_request(f"invalid resource version: {invalid}") from None
        raise ApiError(500, "", invalid) from None


def _continued(options: ListOptions, scope: Scope) -> Read:
    try:
        rv, key = _decode(options.continue_token)
    except ValueError as error:
        raise errors.bad_request(f"invalid continue token: {_INVALID_TOKEN}: {error}") from None
    if options.resource_version not in ("", "0"):
        raise errors.bad_request("specifying resource version is not allowed when using continue")
    return Read(rv if rv > 0 else None, scope.position(key), max(options.limit, 0), key)


def _decode(token: str) -> tuple[int, str]:
    """continue.go's DecodeContinue: the version and the key to start from, or ValueError with
    what follows "continue key is not valid: " in its message."""
    data = go_parsing.raw_url_base64(token)
    fields = go_parsing.unmarshal_struct(
        data, "continueToken", "storage.continueToken", _TOKEN_FIELDS
    )
    version = fields.get("v", "")
    if version != TOKEN_VERSION:
        raise ValueError(f"server does not recognize this encoded version {version}")
    rv, start = fields.get("rv", 0), fields.get("start", "")
    if rv == 0:
        raise ValueError(f"incorrect encoded start resourceVersion (version {TOKEN_VERSION})")
    if not start:
        raise ValueError(f"encoded start key empty (version {TOKEN_VERSION})")
    key = start if start.startswith("/") else "/" + start
    if not go_parsing.is_clean_path(key):
        raise ValueError(start)
    return rv, key[1:]
