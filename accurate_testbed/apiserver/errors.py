"""API errors as kube-apiserver reports them: metav1 Status bodies with the real codes and texts.

Clients branch on ``reason`` and ``code`` and users read ``message``; both must match what a real
cluster sends, or the product's error handling is tested against fiction.
"""

from __future__ import annotations

from typing import Any

from libaccurate.validation import FieldError


class ApiError(Exception):
    """An error response; ``status`` is the metav1 Status body, ``code`` its HTTP status."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code = code
        self.status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if not reason:  # StatusReasonUnknown: an error the server passes on unconverted
            del self.status["reason"]
        if details is not None:
            self.status["details"] = details


class GoStruct:
    """A value Go prints with %#v (or a Stringer's String()); field errors show it unquoted."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def qualified(group: str, plural: str) -> str:
    """A GroupResource as Go prints it: ``roles.rbac.authorization.k8s.io`` or ``namespaces``."""
    return f"{plural}.{group}" if group else plural


def _details(group: str, kind: str, name: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = kind
    details.update(extra)
    return details


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(group, plural)} "{name}" not found',
        _details(group, plural, name),
    )


def already_exists(group: str, plural: str, name: str, being_deleted: bool = False) -> ApiError:
    """409 AlreadyExists; the generic registry's Create says so when the name is taken by an
    object that is being deleted, which a client retrying a re-create needs to know."""
    prefix = "object is being deleted: " if being_deleted else ""
    return ApiError(
        409,
        "AlreadyExists",
        f'{prefix}{qualified(group, plural)} "{name}" already exists',
        _details(group, plural, name),
    )


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": {why}',
        _details(group, plural, name),
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def _cause(error: FieldError) -> dict[str, str]:
    return {"reason": error.type, "message": str(error)[len(error.path) + 2 :], "field": error.path}


def invalid(group: str, kind: str, name: str, issues: list[FieldError]) -> ApiError:
    """422 Invalid; ``kind`` is the Kind (not the resource), as the real server reports it."""
    text = str(issues[0]) if len(issues) == 1 else "[" + ", ".join(map(str, issues)) + "]"
    qualified_kind = f"{kind}.{group}" if group else kind
    return ApiError(
        422,
        "Invalid",
        f'{qualified_kind} "{name}" is invalid: {text}',
        _details(group, kind, name, causes=[_cause(issue) for issue in issues]),
    )


def forbidden(
    group: str, plural: str, name: str, why: str, causes: list[dict] | None = None
) -> ApiError:
    subject = f'{qualified(group, plural)} "{name}"' if name else qualified(group, plural)
    details = _details(group, plural, name)
    if causes:
        details["causes"] = causes
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)


def namespace_terminating(group: str, plural: str, name: str, namespace: str) -> ApiError:
    return forbidden(
        group,
        plural,
        name,
        f"unable to create new content in namespace {namespace} because it is being terminated",
        [
            {
                "reason": "NamespaceTerminating",
                "message": f"namespace {namespace} is being terminated",
                "field": "metadata.namespace",
            }
        ],
    )


def internal_error(why: str) -> ApiError:
    """NewInternalError: 500 with the cause in details."""
    return ApiError(
        500, "InternalError", f"Internal error occurred: {why}", {"causes": [{"message": why}]}
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_supported(group: str, plural: str, action: str, message: str = "") -> ApiError:
    """405; ``message`` replaces the generic one where a handler refuses a verb for a reason
    (a custom object's create while its CRD is terminating)."""
    return ApiError(
        405,
        "MethodNotAllowed",
        message or f"{action} is not supported on resources of kind {qualified(group, plural)!r}",
        _details(group, plural, ""),
    )


def unsupported_media_type(accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")
