"""The review kinds, answered from who is calling and what RBAC grants, and never stored.

SelfSubjectReview (authentication.k8s.io, ``kubectl auth whoami``) tells the caller who the
server takes them for: the user, groups, uid and extra after authentication and impersonation.
SelfSubjectAccessReview (what ``kubectl auth can-i`` and the controller's startup self-check
send) and SelfSubjectRulesReview (``kubectl auth can-i --list``) are about the caller, as
impersonated if it is; SubjectAccessReview and LocalSubjectAccessReview ask about any user, for
those allowed to create them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accurate_testbed.apiserver import errors
from accurate_testbed.apiserver.rbac import MASTERS, Attributes, Authorizer, UserInfo, aggregate
from accurate_testbed.apiserver.resources import AUTHORIZATION, Resource
from libaccurate.validation import FieldError

Obj = dict[str, Any]

_EVERYTHING = {
    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
}


class AccessReviews:
    """Fills in the status of a review the way kube-apiserver's review endpoints do."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    def review(self, resource: Resource, review: Obj, caller: UserInfo) -> Obj:
        if resource.kind == "SelfSubjectReview":
            review["status"] = {"userInfo": _user_info(caller)}
            return review
        spec = review.setdefault("spec", {})
        if resource.kind == "SelfSubjectRulesReview":
            review["status"] = self._rules(spec, caller)
            return review
        if resource.kind == "LocalSubjectAccessReview":
            _default_local_namespace(spec, review["metadata"].get("namespace", ""))
        subject = caller if resource.kind == "SelfSubjectAccessReview" else _subject(spec)
        issues = _spec_issues(resource.kind, spec)
        if issues:
            raise errors.invalid(AUTHORIZATION, resource.kind, "", issues)
        decision = self.authorizer.authorize(_attributes(subject, spec))
        review["status"] = {"allowed": decision.allowed}
        if decision.reason:
            review["status"]["reason"] = decision.reason
        return review

    def _rules(self, spec: Obj, caller: UserInfo) -> Obj:
        namespace = spec.get("namespace") or ""
        if not namespace:
            raise errors.bad_request("no namespace on request")
        if MASTERS in (caller.get("groups") or ()):
            return {**_EVERYTHING, "incomplete": False}
        rules, problems = self.authorizer.rules_for(caller, namespace)
        status: Obj = {
            "resourceRules": [_resource_rule(r.source) for r in rules if r.resources],
            "nonResourceRules": [
                {"verbs": list(r.source.get("verbs") or []), "nonResourceURLs": list(r.urls)}
                for r in rules
                if r.urls
            ],
            "incomplete": bool(problems),
        }
        if problems:
            status["evaluationError"] = aggregate(problems)
        return status


def _user_info(caller: UserInfo) -> Obj:
    """authentication/v1 UserInfo: empty fields are left out, as Go's omitempty does."""
    keys = ("username", "uid", "groups", "extra")
    return {key: caller[key] for key in keys if caller.get(key)}


def _resource_rule(rule: Mapping[str, Any]) -> Obj:
    keys = ("verbs", "apiGroups", "resources", "resourceNames")
    return {key: list(rule[key]) for key in keys if rule.get(key)}


def _subject(spec: Obj) -> UserInfo:
    """The user a (Local)SubjectAccessReview asks about, exactly as given: no groups added."""
    return {
        "username": spec.get("user", ""),
        "groups": list(spec.get("groups") or []),
        "uid": spec.get("uid", ""),
        "extra": dict(spec.get("extra") or {}),
    }


def _default_local_namespace(spec: Obj, namespace: str) -> None:
    attributes = spec.get("resourceAttributes")
    if attributes is None:
        return
    attributes.setdefault("namespace", namespace)
    if not attributes["namespace"]:
        attributes["namespace"] = namespace
    if attributes["namespace"] != namespace:
        raise errors.bad_request(
            f"spec.resourceAttributes.namespace must match namespace: {namespace}"
        )


def _spec_issues(kind: str, spec: Obj) -> list[FieldError]:
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    issues = []
    if kind == "LocalSubjectAccessReview" and non_resource is not None:
        issues.append(
            FieldError(
                "spec.nonResourceAttributes", non_resource, "disallowed on this kind of request"
            )
        )
    elif resource is not None and non_resource is not None:
        issues.append(
            FieldError(
                "spec.nonResourceAttributes",
                non_resource,
                "cannot be specified in combination with resourceAttributes",
            )
        )
    if resource is None and non_resource is None:
        issues.append(
            FieldError(
                "spec.resourceAttributes",
                None,
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
        )
    if kind != "SelfSubjectAccessReview" and not spec.get("user") and not spec.get("groups"):
        issues.append(
            FieldError(
                "spec.user", spec.get("user", ""), "at least one of user or group must be specified"
            )
        )
    return issues


def _attributes(user: UserInfo, spec: Obj) -> Attributes:
    non_resource = spec.get("nonResourceAttributes")
    if non_resource is not None:
        return Attributes(
            user,
            non_resource.get("verb", ""),
            resource_request=False,
            path=non_resource.get("path", ""),
        )
    wanted = spec["resourceAttributes"]
    return Attributes(
        user,
        wanted.get("verb", ""),
        group=wanted.get("group", ""),
        resource=wanted.get("resource", ""),
        subresource=wanted.get("subresource", ""),
        name=wanted.get("name", ""),
        namespace=wanted.get("namespace", ""),
    )
