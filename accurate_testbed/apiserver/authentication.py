"""Who is calling: bearer tokens to users, and the impersonation headers that act as another.

The kubeconfig's token is the admin (group ``system:masters``); tests add users with their own
tokens. Like kube-apiserver, every authenticated user is in ``system:authenticated``, an unknown
or missing token is 401 (anonymous requests are refused, as with ``--anonymous-auth=false``),
and each ``Impersonate-*`` header is itself authorized (verb ``impersonate``) before the request
is judged as the impersonated user, which is how ``kubectl --as/--as-group`` works.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Sequence
from typing import Any, Protocol
from urllib.parse import unquote

from accurate_testbed.apiserver import errors
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.rbac import (
    AUTHENTICATED,
    MASTERS,
    SERVICE_ACCOUNT_PREFIX,
    UNAUTHENTICATED,
    Attributes,
    Authorizer,
    UserInfo,
)

ADMIN: dict[str, Any] = {"username": "admin", "groups": [MASTERS, AUTHENTICATED]}
ANONYMOUS = "system:anonymous"
_EXTRA_PREFIX = "impersonate-extra-"


class Headers(Protocol):
    """The request headers (``http.client.HTTPMessage``): case-insensitive, repeatable."""

    def get(self, name: str, default: Any = None) -> Any: ...

    def get_all(self, name: str, failobj: Any = None) -> Any: ...

    def keys(self) -> list[str]: ...


def service_account(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a ``system:serviceaccount:NS:NAME`` user name."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, _, name = username[len(SERVICE_ACCOUNT_PREFIX) :].partition(":")
    return (namespace, name) if namespace and name and ":" not in name else None


def service_account_groups(namespace: str) -> list[str]:
    return ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]


class Users:
    """Bearer tokens and the users they stand for; thread-safe."""

    def __init__(self, admin_token: str) -> None:
        self.admin_token = admin_token
        self._lock = threading.Lock()
        self._by_token: dict[str, UserInfo] = {}
        self._tokens: dict[str, str] = {}

    def add(self, name: str, groups: Sequence[str] = ()) -> str:
        """A new token for ``name``; a ServiceAccount user also gets its two groups, as its
        token would give it."""
        account = service_account(name)
        all_groups = [*groups, *(service_account_groups(account[0]) if account else [])]
        token = secrets.token_hex(16)
        with self._lock:
            self._by_token[token] = {"username": name, "groups": [*all_groups, AUTHENTICATED]}
            self._tokens[name] = token
        return token

    def token_of(self, name: str) -> str:
        with self._lock:
            token = self._tokens.get(name)
        if token is None:
            raise ValueError(f"unknown user {name!r}: add it with add_user() first")
        return token

    def reset(self) -> None:
        """Only the admin is left."""
        with self._lock:
            self._by_token.clear()
            self._tokens.clear()

    def authenticate(self, authorization: str | None) -> UserInfo:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() == "bearer" and token == self.admin_token:
            return ADMIN
        with self._lock:
            user = self._by_token.get(token) if scheme.lower() == "bearer" else None
        if user is None:
            raise errors.unauthorized()
        return user


def impersonate(headers: Headers, requester: UserInfo, authorizer: Authorizer) -> UserInfo:
    """The user the request acts as: the requester, or whom its headers impersonate once each
    header passed authorization (the first refused one is the 403)."""
    username = headers.get("Impersonate-User") or ""
    groups = list(headers.get_all("Impersonate-Group") or [])
    uid = headers.get("Impersonate-Uid") or ""
    extra = _extra(headers)
    if not (username or groups or uid or extra):
        return requester
    if not username:
        raise ApiError(
            500,
            "InternalError",
            "Internal error occurred: requested impersonation of groups, uid or extra without "
            "impersonating a user",
        )
    for asked in _impersonation_attributes(requester, username, groups, uid, extra):
        authorizer.require(asked)
    account = service_account(username)
    if not groups and account is not None:
        groups = service_account_groups(account[0])
    if username != ANONYMOUS and not {AUTHENTICATED, UNAUTHENTICATED} & set(groups):
        groups.append(AUTHENTICATED)
    info: dict[str, Any] = {"username": username, "groups": groups}
    if uid:
        info["uid"] = uid
    if extra:
        info["extra"] = extra
    return info


def _extra(headers: Headers) -> dict[str, list[str]]:
    extra: dict[str, list[str]] = {}
    for key in dict.fromkeys(headers.keys()):
        if key.lower().startswith(_EXTRA_PREFIX):
            extra[unquote(key[len(_EXTRA_PREFIX) :]).lower()] = list(headers.get_all(key) or [])
    return extra


def _impersonation_attributes(
    requester: UserInfo,
    username: str,
    groups: Sequence[str],
    uid: str,
    extra: dict[str, list[str]],
) -> list[Attributes]:
    account = service_account(username)
    if account is not None:
        asked = [
            Attributes(
                requester,
                "impersonate",
                resource="serviceaccounts",
                namespace=account[0],
                name=account[1],
            )
        ]
    else:
        asked = [Attributes(requester, "impersonate", resource="users", name=username)]
    asked += [
        Attributes(requester, "impersonate", resource="groups", name=group) for group in groups
    ]
    asked += [
        Attributes(
            requester,
            "impersonate",
            group="authentication.k8s.io",
            resource="userextras",
            subresource=key,
            name=value,
        )
        for key, values in extra.items()
        for value in values
    ]
    if uid:
        asked.append(
            Attributes(
                requester, "impersonate", group="authentication.k8s.io", resource="uids", name=uid
            )
        )
    return asked
