"""The bridge from the API pipeline to the admission webhooks registered in the store.

It builds the AdmissionRequest kube-apiserver would send (kinds, resources, the namespace rule
for Namespace objects, user info, options) and the current webhook configurations, which are
re-read only after one of those objects changed: every write asks for them, so asking must not
wait for the store's lock.
"""

from __future__ import annotations

from typing import Any

from accurate_testbed.apiserver.api import Attempt, Obj
from accurate_testbed.apiserver.resources import ADMISSION, Resource
from accurate_testbed.apiserver.store import Change, Store
from accurate_testbed.apiserver.webhooks import (
    AdmissionRequest,
    WebhookConfigurations,
    mutate,
    validate,
)

_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


class Admission:
    """The two admission phases kube-apiserver runs around its own validation of an object."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cached: WebhookConfigurations | None = None
        store.subscribe(self._follow)

    def _follow(self, change: Change | None) -> None:
        """Forget the configurations when one changes; called by the store under its lock."""
        if change is None or change.group == ADMISSION:
            self._cached = None

    def configurations(self) -> WebhookConfigurations:
        cached = self._cached
        if cached is None:
            with self.store.changed:  # no change can slip between reading and caching
                mutating, _ = self.store.select(ADMISSION, "mutatingwebhookconfigurations")
                validating, _ = self.store.select(ADMISSION, "validatingwebhookconfigurations")
                cached = self._cached = WebhookConfigurations.from_objects(mutating, validating)
        return cached

    def mutate(self, attempt: Attempt) -> Obj | None:
        """Run the mutating webhooks; returns the object they leave (None for DELETE)."""
        configurations = self.configurations()
        if not configurations.mutating:
            return attempt.obj
        request = _request(attempt)
        labels = self._namespace_labels(request.namespace)
        return mutate(configurations, request, labels, warnings=attempt.caller.warnings)

    def validate(self, attempt: Attempt) -> None:
        """Run the validating webhooks on the object as it would be stored."""
        configurations = self.configurations()
        if not configurations.validating:
            return
        request = _request(attempt)
        labels = self._namespace_labels(request.namespace)
        validate(configurations, request, labels, warnings=attempt.caller.warnings)

    def _namespace_labels(self, namespace: str | None) -> dict[str, str] | None:
        if not namespace:
            return None
        ns = self.store.get("", "namespaces", "", namespace)
        return None if ns is None else dict(ns["metadata"].get("labels") or {})


def _request(attempt: Attempt) -> AdmissionRequest:
    subject = attempt.obj if attempt.obj is not None else attempt.old
    assert subject is not None
    meta = subject["metadata"]
    resource = attempt.resource
    return AdmissionRequest(
        operation=attempt.operation,
        kind={"group": resource.group, "version": resource.version, "kind": resource.kind},
        resource={
            "group": resource.group,
            "version": resource.version,
            "resource": resource.plural,
        },
        sub_resource=attempt.subresource,
        name=meta.get("name", ""),
        namespace=_request_namespace(resource, attempt.operation, meta),
        obj=attempt.obj,
        old_obj=attempt.old,
        user_info=attempt.caller.user_info,
        dry_run=attempt.caller.dry_run,
        options=_options(attempt),
    )


def _request_namespace(resource: Resource, operation: str, meta: dict[str, Any]) -> str | None:
    """kube-apiserver fills a Namespace's own name in for requests addressed to it by name."""
    if resource.namespaced:
        return str(meta.get("namespace", ""))
    if resource.kind == "Namespace" and resource.group == "" and operation != "CREATE":
        return str(meta.get("name", ""))
    return ""


def _options(attempt: Attempt) -> dict[str, Any]:
    """The options as the request gave them: kube-apiserver decodes them from the query (or a
    DELETE's body) and passes them on as they are, so a DELETE's propagation policy and
    preconditions reach the webhook, for each object of a DeleteCollection too
    (``rest.AdmissionToValidateObjectDeleteFunc``); the manager it takes from the User-Agent
    when the query names none goes into managedFields only (``managerOrUserAgent`` in
    apiserver's endpoints/handlers). So the server's own writes (the quota admission's status
    update, kube-controller-manager's), whose clients name no manager, carry none."""
    operation, caller = attempt.operation, attempt.caller
    options: dict[str, Any] = {"kind": _OPTIONS_KIND[operation], "apiVersion": "meta.k8s.io/v1"}
    if operation == "DELETE":
        given = attempt.options or {}
        options.update((k, v) for k, v in given.items() if k not in ("kind", "apiVersion"))
    elif caller.field_manager:
        options["fieldManager"] = caller.field_manager
    if caller.dry_run:
        options["dryRun"] = ["All"]
    return options
