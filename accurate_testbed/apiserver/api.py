"""The API verbs on top of the store: the request pipeline kube-apiserver runs for each write.

Order matters and follows kube-apiserver: decode and default, namespace lifecycle admission,
prepare (server-set metadata, status and generation rules), mutating webhooks, RBAC's escalation
check, validation (422), validating webhooks, then the optimistic-concurrency check and the
write. A write that changes nothing stores nothing, so the resourceVersion only moves when an
object really changed.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import yaml

from accurate_testbed.apiserver import conversion, crds, errors, paging, schema, validate
from accurate_testbed.apiserver.cloning import clone
from accurate_testbed.apiserver.defaults import apply_builtin_defaults
from accurate_testbed.apiserver.errors import ApiError, GoStruct
from accurate_testbed.apiserver.managedfields import ApplyConflict, record_update, server_side_apply
from accurate_testbed.apiserver.paging import ListOptions
from accurate_testbed.apiserver.patching import (
    PatchError,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)
from accurate_testbed.apiserver.resources import (
    ADMISSION,
    APIEXTENSIONS,
    AUTHENTICATION,
    AUTHORIZATION,
    Registry,
    Resource,
)
from accurate_testbed.apiserver.selectors import selector
from accurate_testbed.apiserver.store import Expired, Store
from accurate_testbed.apiserver.uids import new_uid
from accurate_testbed.apiserver.webhooks import WebhookConfigurations
from libaccurate.validation import FieldError

Obj = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")
_NAME_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_NAMESPACE_TERMINATING_CONFLICT = (
    "The system is ensuring all content is removed from this namespace.  Upon completion, this "
    "namespace will automatically be purged by the system."
)
_CONFLICT_RETRIES = 5
_VOLATILE_METADATA = ("resourceVersion", "managedFields")
WHOLE = ListOptions()  # a LIST without paging options: everything, now
# libyaml's loader when present: apply bodies are parsed on every apply, and the pure-Python
# loader costs milliseconds for a role's worth of rules.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Caller:
    """Who sends a request and with which write options."""

    user_info: dict[str, Any] = field(
        default_factory=lambda: {"username": "admin", "groups": ["system:masters"]}
    )
    user_agent: str = ""
    field_manager: str = ""
    force: bool = False
    dry_run: bool = False
    strict: bool = False  # fieldValidation=Strict
    # Filled by admission webhooks; the server sends them as ``Warning`` response headers.
    warnings: list[str] = field(default_factory=list)

    @property
    def manager(self) -> str:
        """The explicit field manager, else the User-Agent's product token (kube-apiserver's
        rule: the part before the first '/', printable characters only, at most 128 bytes)."""
        return self.field_manager or _agent_manager(self.user_agent)


@functools.lru_cache(maxsize=256)
def _agent_manager(user_agent: str) -> str:
    """The manager a User-Agent names; remembered, as a few clients make every request."""
    head = user_agent.split("/")[0]
    result = ""
    for char in head:
        if char.isprintable() and len((result + char).encode()) <= 128:
            result += char
        elif char.isprintable():
            break
    return result


class Guard(Protocol):
    """Refuses writes the caller may not make whatever their verb rights (RBAC escalation)."""

    def check(
        self,
        operation: str,
        resource: Resource,
        obj: Obj,
        old: Obj | None,
        user: dict[str, Any],
    ) -> None: ...


class Reviewer(Protocol):
    """Answers the authorization.k8s.io reviews, which are created but never stored."""

    def review(self, resource: Resource, review: Obj, caller: dict[str, Any]) -> Obj: ...


@dataclass(frozen=True)
class Attempt:
    """One write or deletion as the admission phases see it: ``obj`` is None for a DELETE,
    ``old`` for a CREATE."""

    operation: str
    resource: Resource
    obj: Obj | None
    old: Obj | None
    caller: Caller
    subresource: str | None = None
    options: Obj | None = None  # a DELETE's DeleteOptions, as the request gave them


class Admit(Protocol):
    """The admission phases around the server's own validation (``apiserver.admission``)."""

    def mutate(self, attempt: Attempt) -> Obj | None: ...

    def validate(self, attempt: Attempt) -> None: ...


class LastAdmission(Protocol):
    """The validating plugin that runs after the webhooks (``apiserver.quota``): it may write
    other objects through this API before the write it admits is stored."""

    def validate(self, attempt: Attempt) -> None: ...


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _without_volatile(obj: Obj) -> tuple[Obj, Obj, list[Obj] | None]:
    """The object minus what changes on every write even when nothing else does, in parts
    made for comparing: built of shallow copies, as it is done twice for every update."""
    meta = obj["metadata"]
    entries = meta.get("managedFields")
    return (
        {key: value for key, value in obj.items() if key != "metadata"},
        {key: value for key, value in meta.items() if key not in _VOLATILE_METADATA},
        None if entries is None else [_without_time(entry) for entry in entries],
    )


def _without_time(entry: Obj) -> Obj:
    return {key: value for key, value in entry.items() if key != "time"}


def _spec_part(obj: Obj, resource: Resource) -> Obj:
    """The part of an object whose change bumps metadata.generation."""
    skipped = ("metadata", "status") if resource.has_status else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skipped}


class Api:
    """Verbs on resources; every write path funnels through ``_persist``."""

    def __init__(
        self,
        store: Store,
        registry: Registry,
        admit: Admit | None = None,
        guard: Guard | None = None,
        reviewer: Reviewer | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.admit = admit
        self.guard = guard
        self.reviewer = reviewer
        # Set once the server is assembled: the ResourceQuota plugin writes through this API.
        self.quota: LastAdmission | None = None

    # -- reads -------------------------------------------------------------------------------

    def get(self, resource: Resource, namespace: str, name: str) -> Obj:
        return self.view(resource, self._current(resource, namespace, name))

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        labels: str = "",
        fields: str = "",
        options: ListOptions = WHOLE,
    ) -> Obj:
        """One page of the collection (all of it without ``limit``); selectors apply first, so
        a page holds up to ``limit`` matching objects."""
        matches = selector(labels, fields, resource.kind, resource.namespaced)
        scope = paging.Scope(namespace, resource.namespaced)
        read = paging.plan(options, scope)
        if read.rv is not None and read.rv > self.store.resource_version:
            raise paging.future_revision()
        unfiltered = not labels.strip() and not fields.strip()
        try:
            page = self.store.page(
                resource.group,
                resource.plural,
                namespace,
                read.start,
                read.rv,
                read.limit,
                None if unfiltered else matches,
            )
        except Expired:
            raise read.expired() from None
        metadata: dict[str, Any] = {"resourceVersion": str(page.rv)}
        if page.more:
            last = page.items[-1]["metadata"]
            metadata["continue"] = paging.next_token(
                page.rv, scope, (last.get("namespace", ""), last["name"])
            )
            if unfiltered:  # with a selector the count would include objects it drops
                metadata["remainingItemCount"] = page.remaining
        return {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.api_version,
            "metadata": metadata,
            "items": self.views(resource, page.items, listing=True),
        }

    def view(self, resource: Resource, obj: Obj) -> Obj:
        """The object as served at the resource's version (one storage form for all versions)."""
        return self.views(resource, [obj])[0]

    def views(
        self, resource: Resource, objects: Sequence[Obj], listing: bool = False
    ) -> Sequence[Obj]:
        """The objects as served at the resource's version: those stored at another are
        converted by the CRD's conversion webhook when it has one (all in one review), or
        only relabelled when its strategy is None."""
        wanted = resource.api_version
        others = [obj for obj in objects if obj.get("apiVersion") != wanted]
        if not others:
            return objects
        converted: Iterator[Obj]
        if resource.conversion is None:
            converted = iter([{**obj, "apiVersion": wanted} for obj in others])
        else:
            converted = iter(conversion.convert(resource.conversion, others, wanted, listing))
        return [obj if obj.get("apiVersion") == wanted else next(converted) for obj in objects]

    # -- writes ------------------------------------------------------------------------------

    def create(self, resource: Resource, namespace: str, body: Obj, caller: Caller) -> Obj:
        if resource.terminating:
            raise errors.method_not_supported(
                resource.group,
                resource.plural,
                "create",
                "create not allowed while custom resource definition is terminating",
            )
        obj = self._decode(resource, namespace, body, caller.strict)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(random.choices(_NAME_SUFFIX_CHARS, k=5))
            meta["name"] = meta["generateName"] + suffix
        if resource.group in (AUTHENTICATION, AUTHORIZATION):
            return self._review(resource, obj, caller)
        return self._create(resource, namespace, obj, caller, managed=False)

    def update(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: Obj,
        caller: Caller,
        subresource: str | None = None,
    ) -> Obj:
        obj = self._decode(resource, namespace, body, caller.strict)
        self._check_name(obj, name)
        if not obj["metadata"].get("resourceVersion") and not resource.unconditional_update:
            raise errors.invalid(
                resource.group,
                resource.kind,
                name,
                [
                    FieldError(
                        "metadata.resourceVersion",
                        GoStruct("0x0"),
                        "must be specified for an update",
                    )
                ],
            )
        return _retrying(
            resource,
            name,
            lambda: self._update(
                resource, self._current(resource, namespace, name), obj, caller, subresource, False
            ),
        )

    def patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: bytes,
        content_type: str,
        caller: Caller,
        subresource: str | None = None,
    ) -> tuple[Obj, bool]:
        """Apply a patch; returns the result and whether it created the object (apply only)."""
        if content_type == APPLY_PATCH:
            return self._apply(resource, namespace, name, body, caller, subresource)
        patch = _load_json(body)

        def attempt() -> Obj:
            old = self._current(resource, namespace, name)
            patched = self._decode(
                resource,
                namespace,
                self._patched(resource, old, patch, content_type),
                caller.strict,
            )
            self._check_name(patched, name)
            if patched["metadata"].get("resourceVersion") == old["metadata"]["resourceVersion"]:
                del patched["metadata"][
                    "resourceVersion"
                ]  # a precondition only if the patch set it
            return self._update(resource, old, patched, caller, subresource, managed=False)

        return _retrying(resource, name, attempt), False

    def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        options: Obj,
        caller: Caller,
        admission: bool = True,
    ) -> Obj:
        if resource.kind == "Namespace" and name in IMMORTAL_NAMESPACES:
            raise errors.forbidden("", "namespaces", name, "this namespace may not be deleted")

        def attempt() -> Obj:
            current = self._current(resource, namespace, name)
            self._check_preconditions(resource, current, options.get("preconditions") or {})
            if admission:
                self._admit_deletion(resource, current, caller, options)
            if resource.kind == "Namespace":
                return self._delete_namespace(resource, current, caller.dry_run)
            first = not current["metadata"].get("deletionTimestamp")
            if resource.kind == "CustomResourceDefinition" and first:
                marked = crds.marked_for_deletion(current, now())
                if caller.dry_run:
                    return self.view(resource, marked)
                return self.view(resource, self._persist(resource, current, marked))
            policy = options.get("propagationPolicy")
            return self._delete(resource, current, policy, caller.dry_run)

        return _retrying(resource, name, attempt)

    def delete_collection(
        self,
        resource: Resource,
        namespace: str | None,
        labels: str,
        fields: str,
        caller: Caller,
        options: Obj | None = None,
    ) -> Obj:
        """Delete each listed object as its own DELETE would be, admission included (the
        registry's DeleteCollection, with kube-apiserver's one worker: the first refusal ends
        it and is the answer; an object gone meanwhile is skipped)."""
        listed = self.list(resource, namespace, labels, fields)
        for item in listed["items"]:
            meta = item["metadata"]
            where = meta.get("namespace", "")
            try:
                self.delete(resource, where, meta["name"], options or {}, caller)
            except ApiError as error:
                if error.code != 404:
                    raise
        return {**listed, "items": []}

    # -- internal helpers for the CRD finalizer, which works on the storage directly ----------
    # (kube-controller-manager's controllers are API clients: they use the verbs above.)

    def delete_quietly(self, resource: Resource, obj: Obj) -> None:
        """Delete through the storage, without admission; tolerate it being gone already."""
        meta = obj["metadata"]
        current = self.store.get(
            resource.group, resource.plural, meta.get("namespace", ""), meta["name"]
        )
        if current is None or current["metadata"].get("deletionTimestamp"):
            return
        try:
            self._delete(resource, current, None)
        except _Retry:
            self.delete_quietly(resource, obj)

    def write_internal(self, resource: Resource, old: Obj, new: Obj) -> Obj:
        """Write a change without admission or field manager."""
        return self._persist(resource, old, new)

    def resource_of(self, group: str, plural: str) -> Resource | None:
        for resource in self.registry:
            if (resource.group, resource.plural) == (group, plural):
                return resource
        return None

    # -- pipeline ----------------------------------------------------------------------------

    def _current(self, resource: Resource, namespace: str, name: str) -> Obj:
        obj = self.store.get(resource.group, resource.plural, namespace, name)
        if obj is None:
            raise errors.not_found(resource.group, resource.plural, name)
        return obj

    def _decode(
        self,
        resource: Resource,
        namespace: str,
        body: Any,
        strict: bool = False,
        default: bool = True,
    ) -> Obj:
        """The body as an object of ``resource``; ``default=False`` keeps it as sent (an apply
        configuration: its manager owns what it sent, not the defaults the server fills in)."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request was not a JSON object")
        obj = clone(body)
        kind = obj.get("kind")
        if kind and kind != resource.kind:
            raise errors.bad_request(
                f"the API version in the data ({obj.get('apiVersion')}) does not match the "
                f"expected API version ({resource.api_version})"
                if obj.get("apiVersion") != resource.api_version
                else f"Object kind {kind} does not match {resource.kind}"
            )
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if resource.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if default:
            return self._default(resource, obj, strict)
        if strict and resource.custom:
            self._default(resource, clone(obj), strict)
        return obj

    def _default(self, resource: Resource, obj: Obj, strict: bool = False) -> Obj:
        if not resource.custom:
            apply_builtin_defaults(resource.group, resource.kind, obj)
            return obj
        pruned, dropped = schema.prune_and_default(obj, resource.schema)
        if strict and dropped:
            unknown = ", ".join(f'unknown field "{path}"' for path in dropped)
            raise errors.bad_request(
                f'{resource.kind} in version "{resource.version}" cannot be handled as a '
                f"{resource.kind}: strict decoding error: {unknown}"
            )
        return pruned

    def _check_name(self, obj: Obj, name: str) -> None:
        if obj["metadata"].get("name") not in (None, name):
            raise errors.bad_request(
                f"the name of the object ({obj['metadata']['name']}) does not match the name on "
                f"the URL ({name})"
            )
        obj["metadata"]["name"] = name

    def _check_namespace_lifecycle(self, resource: Resource, obj: Obj) -> None:
        if not resource.namespaced:
            return
        namespace = obj["metadata"]["namespace"]
        ns = self.store.get("", "namespaces", "", namespace)
        if ns is None:
            raise errors.not_found("", "namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.namespace_terminating(
                resource.group, resource.plural, obj["metadata"].get("name", ""), namespace
            )

    def _create(
        self, resource: Resource, namespace: str, obj: Obj, caller: Caller, managed: bool
    ) -> Obj:
        self._check_namespace_lifecycle(resource, obj)
        meta = obj["metadata"]
        for server_set in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(server_set, None)
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = now()
        if resource.has_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if resource.has_status:
            obj.pop("status", None)
        if not managed:
            obj = record_update(None, obj, caller.manager, resource.api_version, now())
        if _is_namespace(resource):
            # The namespace strategy's PrepareForCreate, after the field manager has recorded
            # the request: a new namespace is Active, and waits for the namespace controller
            # when deleted. Later only the finalize subresource changes its finalizers.
            obj["status"] = {"phase": "Active"}
            finalizers = obj["spec"].setdefault("finalizers", [])
            if "kubernetes" not in finalizers:
                finalizers.append("kubernetes")
        obj = self._admit_and_validate("CREATE", resource, obj, None, caller, None)
        if caller.dry_run:
            existing = self.store.get(resource.group, resource.plural, namespace, meta["name"])
            if existing is not None:
                raise _taken(resource, existing)
            return self.view(resource, obj)
        return self.view(resource, self._persist(resource, None, obj))

    def _update(
        self,
        resource: Resource,
        old: Obj,
        new: Obj,
        caller: Caller,
        subresource: str | None,
        managed: bool,
    ) -> Obj:
        new = self._prepare_update(resource, old, new, subresource)
        if not managed:
            new = record_update(old, new, caller.manager, resource.api_version, now(), subresource)
        wanted_rv = new["metadata"].get("resourceVersion")
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(
                resource.group, resource.plural, old["metadata"]["name"], errors.STALE
            )
        new = self._admit_and_validate("UPDATE", resource, new, old, caller, subresource)
        if _without_volatile(new) == _without_volatile(old):
            return self.view(resource, old)
        if caller.dry_run:
            return self.view(resource, new)
        return self.view(resource, self._persist(resource, old, new))

    def _prepare_update(
        self, resource: Resource, old: Obj, new: Obj, subresource: str | None
    ) -> Obj:
        requested_rv = new["metadata"].get("resourceVersion")
        if subresource == "status":
            new = {**clone(old), "status": new.get("status", {})}
        elif subresource == "finalize":
            new = {**clone(old), "spec": {**old.get("spec", {}), **new.get("spec", {})}}
        elif resource.has_status:
            new = {k: v for k, v in new.items() if k != "status"}
            if "status" in old:
                new["status"] = clone(old["status"])
        meta, old_meta = new["metadata"], old["metadata"]
        meta.pop("resourceVersion", None)
        if requested_rv:
            meta["resourceVersion"] = requested_rv  # the optimistic-concurrency precondition
        for kept in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if kept in old_meta:
                meta[kept] = old_meta[kept]
            else:
                meta.pop(kept, None)
        if _is_namespace(resource):
            # Only the finalize subresource changes spec.finalizers (namespace strategy's
            # PrepareForUpdate); an empty list is omitted, as it serializes.
            spec = new.setdefault("spec", {})
            source = spec if subresource == "finalize" else old.get("spec") or {}
            finalizers = clone(source.get("finalizers"))
            spec.pop("finalizers", None)
            if finalizers:
                spec["finalizers"] = finalizers
        if resource.has_generation:
            bump = _spec_part(new, resource) != _spec_part(old, resource)
            meta["generation"] = old_meta.get("generation", 1) + (1 if bump else 0)
        else:
            meta.pop("generation", None)
        return self._default(resource, new)

    def _admit_and_validate(
        self,
        operation: str,
        resource: Resource,
        obj: Obj,
        old: Obj | None,
        caller: Caller,
        subresource: str | None,
    ) -> Obj:
        attempt = Attempt(operation, resource, obj, old, caller, subresource)
        if self.admit is not None:
            mutated = self.admit.mutate(attempt)
            if mutated is not None and mutated != obj:
                obj = self._default(resource, mutated)
        if self.guard is not None:
            self.guard.check(operation, resource, obj, old, caller.user_info)
        issues = validate.check_object(resource, obj)
        if old is not None:
            issues += validate.check_update(resource, old, obj)
        if issues:
            raise errors.invalid(resource.group, resource.kind, obj["metadata"]["name"], issues)
        if obj is not attempt.obj:
            attempt = dataclasses.replace(attempt, obj=obj)
        if self.admit is not None:
            self.admit.validate(attempt)
        if self.quota is not None:
            self.quota.validate(attempt)
        if resource.group == ADMISSION:
            configurations = [obj]
            WebhookConfigurations.from_objects(
                configurations if "Mutating" in resource.kind else [],
                configurations if "Validating" in resource.kind else [],
            )
        if resource.kind == "CustomResourceDefinition":
            crds.establish(obj, now())
        return obj

    def _admit_deletion(
        self, resource: Resource, current: Obj, caller: Caller, options: Obj
    ) -> None:
        """Both phases for a DELETE: mutating webhooks are called too, but may not patch."""
        if self.admit is not None:
            attempt = Attempt("DELETE", resource, None, current, caller, options=options)
            self.admit.mutate(attempt)
            self.admit.validate(attempt)

    def _persist(self, resource: Resource, old: Obj | None, new: Obj) -> Obj:
        """Write under the store lock, re-checking what may have changed since ``old`` was read."""
        meta = new["metadata"]
        with self.store.changed:
            current = self.store.get(
                resource.group, resource.plural, meta.get("namespace", ""), meta["name"]
            )
            if old is None:
                if current is not None:
                    raise _taken(resource, current)
                stored = self.store.write(resource.group, resource.plural, new)
            else:
                if current is None:
                    raise errors.not_found(resource.group, resource.plural, meta["name"])
                if current["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]:
                    raise _Retry()
                if _finalized(resource, new):
                    stored = self.store.remove(resource.group, resource.plural, new)
                else:
                    stored = self.store.write(resource.group, resource.plural, new)
        if resource.kind == "CustomResourceDefinition":
            self._refresh_crds()
        return stored

    def _refresh_crds(self) -> None:
        defined, _ = self.store.select(APIEXTENSIONS, "customresourcedefinitions")
        self.registry.set_crds(defined)

    def _patched(self, resource: Resource, old: Obj, patch: Any, content_type: str) -> Obj:
        try:
            if content_type == MERGE_PATCH:
                result = json_merge_patch(old, patch)
            elif content_type == JSON_PATCH:
                result = json_patch(old, patch)
            elif content_type == STRATEGIC_PATCH and not resource.custom:
                result = strategic_merge_patch(old, patch, resource.kind)
            else:
                accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
                if not resource.custom:
                    accepted.insert(2, STRATEGIC_PATCH)
                raise errors.unsupported_media_type(accepted)
        except PatchError as error:
            raise ApiError(422, "Invalid", str(error)) from error
        if not isinstance(result, dict):
            raise ApiError(422, "Invalid", "the patch did not produce an object")
        return result

    def _apply(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: bytes,
        caller: Caller,
        subresource: str | None,
    ) -> tuple[Obj, bool]:
        if not caller.field_manager:
            raise errors.bad_request(
                "PATCH, application/apply-patch+yaml: fieldManager: Required value: is required "
                "for apply patch"
            )
        try:
            applied = yaml.load(body, Loader=_YAML_LOADER)
        except yaml.YAMLError as error:
            raise errors.bad_request(f"error decoding YAML: {error}") from error
        applied = self._decode(resource, namespace, applied, caller.strict, default=False)
        self._check_name(applied, name)

        def attempt() -> tuple[Obj, bool]:
            live = self.store.get(resource.group, resource.plural, namespace, name)
            self._check_apply_preconditions(resource, name, live, applied["metadata"])
            try:
                merged = server_side_apply(
                    live, applied, caller.manager, caller.force, resource.api_version, now()
                )
            except ApplyConflict as conflict:
                raise _apply_conflict(resource, name, conflict) from conflict
            merged = self._default(resource, merged)
            if live is None:
                return self._create(resource, namespace, merged, caller, managed=True), True
            return self._update(resource, live, merged, caller, subresource, managed=True), False

        return _retrying(resource, name, attempt)

    def _check_apply_preconditions(
        self, resource: Resource, name: str, live: Obj | None, applied: Obj
    ) -> None:
        """uid and resourceVersion in an apply configuration are preconditions, as for any
        patch: a uid that does not match (or names an object that is gone) and a stale
        resourceVersion are conflicts, so an applier never writes over an object it did not
        see."""
        if live is None:
            if applied.get("uid"):
                uid = applied["uid"]
                why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                raise errors.conflict(resource.group, resource.plural, name, why)
            return
        self._check_preconditions(resource, live, {"uid": applied.get("uid")})
        version = applied.get("resourceVersion")
        if version and version != live["metadata"].get("resourceVersion"):
            raise errors.conflict(resource.group, resource.plural, name, errors.STALE)

    def _check_preconditions(self, resource: Resource, current: Obj, preconditions: Obj) -> None:
        meta = current["metadata"]
        for field_name, shown in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = preconditions.get(field_name)
            if wanted and wanted != meta.get(field_name):
                why = (
                    f"Precondition failed: {shown} in precondition: {wanted}, "
                    f"{shown} in object meta: {meta.get(field_name)}"
                )
                raise errors.conflict(resource.group, resource.plural, meta["name"], why)

    def _delete_namespace(self, resource: Resource, current: Obj, dry_run: bool = False) -> Obj:
        if current["metadata"].get("deletionTimestamp"):
            name = current["metadata"]["name"]
            raise errors.conflict("", "namespaces", name, _NAMESPACE_TERMINATING_CONFLICT)
        new = clone(current)
        new["metadata"]["deletionTimestamp"] = now()
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new.setdefault("status", {})["phase"] = "Terminating"
        if dry_run:
            return self.view(resource, new)
        return self.view(resource, self._persist(resource, current, new))

    def _delete(
        self, resource: Resource, current: Obj, policy: str | None, dry_run: bool = False
    ) -> Obj:
        """Remove the object, or mark it deleting while finalizers hold it (markAsDeleting).

        A dry run answers exactly what the real deletion would, and stores nothing: the
        resourceVersion in the answer is the stored one. Deleting an object marked already
        only sets a missing deletionGracePeriodSeconds to 0 (a CRD's first DELETE sets none).
        """
        new = clone(current)
        meta = new["metadata"]
        finalizers = meta.setdefault("finalizers", [])
        extra = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}.get(policy or "")
        if extra and extra not in finalizers and not meta.get("deletionTimestamp"):
            finalizers.append(extra)
        if not finalizers:
            meta.pop("finalizers")
            removed = (
                current if dry_run else self.store.remove(resource.group, resource.plural, current)
            )
            if resource.custom:
                return self.view(resource, removed)
            return _success(resource, removed)
        if meta.get("deletionGracePeriodSeconds") == 0:
            return self.view(resource, current)  # marked already: nothing to write
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now()
            if meta.get("generation"):
                meta["generation"] += 1
        meta["deletionGracePeriodSeconds"] = 0
        if dry_run:
            return self.view(resource, new)
        return self.view(resource, self._persist(resource, current, new))

    def _review(self, resource: Resource, review: Obj, caller: Caller) -> Obj:
        if self.reviewer is None:
            raise errors.method_not_supported(resource.group, resource.plural, "create")
        return self.reviewer.review(resource, review, caller.user_info)


class _Retry(Exception):
    """The object changed between read and write; the caller re-reads and tries again."""


T = TypeVar("T")


def _retrying(resource: Resource, name: str, attempt: Callable[[], T]) -> T:
    """Run a read-modify-write until it wins the race, as GuaranteedUpdate does."""
    for _ in range(_CONFLICT_RETRIES):
        try:
            return attempt()
        except _Retry:
            continue
    raise errors.conflict(resource.group, resource.plural, name, errors.STALE)


def _taken(resource: Resource, existing: Obj) -> ApiError:
    """A create meeting ``existing`` under its name (dry run or not, as Store.Create words it)."""
    meta = existing["metadata"]
    being_deleted = bool(meta.get("deletionTimestamp"))
    return errors.already_exists(resource.group, resource.plural, meta["name"], being_deleted)


def _is_namespace(resource: Resource) -> bool:
    return (resource.group, resource.kind) == ("", "Namespace")


def _finalized(resource: Resource, obj: Obj) -> bool:
    """A deleted object whose last finalizer is gone leaves the store."""
    meta = obj["metadata"]
    if not meta.get("deletionTimestamp") or meta.get("finalizers"):
        return False
    return resource.kind != "Namespace" or not (obj.get("spec") or {}).get("finalizers")


def _success(resource: Resource, obj: Obj) -> Obj:
    meta = obj["metadata"]
    details = {"name": meta["name"], "kind": resource.plural, "uid": meta["uid"]}
    if resource.group:
        details["group"] = resource.group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def _apply_conflict(resource: Resource, name: str, conflict: ApplyConflict) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        str(conflict),
        {
            "name": name,
            **({"group": resource.group} if resource.group else {}),
            "kind": resource.plural,
            "causes": conflict.causes,
        },
    )


def _load_json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as error:
        raise errors.bad_request(f"error decoding patch: {error}") from error
