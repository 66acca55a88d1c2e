"""Asking RBAC before acting: may the caller do this (SelfSubjectAccessReview), may someone
else (SubjectAccessReview). Answers come from the API server's own authorizer, so they hold
for every way a right can be granted."""

from __future__ import annotations

from typing import Any

from libaccurate.network.kube import Kube, resource_path

Obj = dict[str, Any]


def allowed(kube: Kube, attributes: Obj) -> bool:
    """A SelfSubjectAccessReview: may the caller do this?"""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    path = resource_path("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
    return bool(kube.create(path, review).get("status", {}).get("allowed"))


def judged(kube: Kube, review: Obj) -> Obj:
    """The status (``allowed``, ``reason``) of a SubjectAccessReview, which cluster
    administrators may create, or of a LocalSubjectAccessReview, which a namespace's admins
    may create there too."""
    namespace = (review.get("metadata") or {}).get("namespace")
    plural = "localsubjectaccessreviews" if namespace else "subjectaccessreviews"
    path = resource_path("authorization.k8s.io", "v1", plural, namespace)
    return dict(kube.create(path, review).get("status") or {})
