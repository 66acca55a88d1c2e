"""An in-memory cluster that applies plans the way the API server would, for planner tests.

It models what the planner's correctness depends on: resourceVersion and uid preconditions,
POST refusing an existing name, server-side apply of namespace metadata with
``managedFields`` ownership (omitted keys the applier owned are removed unless another
manager owns them; force takes keys over), server defaults and dropped empty fields on
objects, immutable ``roleRef``, namespaces that terminate with their contents, finalizers,
and refusal to create in a terminating namespace. Failed actions are recorded, and steps that
depend on a failed step are skipped, as the controller does.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from libaccurate import quota
from libaccurate.actions import (
    Action,
    AddFinalizer,
    AnnotateObject,
    ApplyNamespaceMetadata,
    CreateNamespace,
    CreateObject,
    DeleteNamespace,
    DeleteObject,
    EmitEvent,
    PatchSubNamespaceStatus,
    RemoveFinalizer,
    ReplaceObject,
)
from libaccurate.closing import close
from libaccurate.config import Config, GroupVersionKind
from libaccurate.constants import FIELD_MANAGER, FINALIZER
from libaccurate.forest import Forest
from libaccurate.lifecycle import OWNED_CONDITIONS
from libaccurate.ownership import OwnedKeys, upgraded_managed_fields
from libaccurate.planner import Finding, Plan, Snapshot, plan

Obj = dict[str, Any]
ROLE = GroupVersionKind("rbac.authorization.k8s.io", "v1", "Role")
ROLE_BINDING = GroupVersionKind("rbac.authorization.k8s.io", "v1", "RoleBinding")
SECRET = GroupVersionKind("", "v1", "Secret")
SERVICE_ACCOUNT = GroupVersionKind("", "v1", "ServiceAccount")


class ApiError(Exception):
    """A refusal by the server, with the reason the real one would give."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class World:
    """Namespaces, SubNamespaces and objects of watched kinds, as the server stores them."""

    config: Config = field(default_factory=Config)
    namespaces: dict[str, Obj] = field(default_factory=dict)
    subnamespaces: dict[tuple[str, str], Obj] = field(default_factory=dict)
    objects: dict[tuple[GroupVersionKind, str, str], Obj] = field(default_factory=dict)
    owners: dict[str, Obj] = field(default_factory=dict)
    propagate_generated: bool = False
    events: list[EmitEvent] = field(default_factory=list)
    # HierarchicalResourceQuotas, and the ResourceQuotas kept for them by (namespace, name).
    hrqs: list[Obj] = field(default_factory=list)
    quotas: dict[tuple[str, str], Obj] = field(default_factory=dict)
    failures: list[tuple[Action, str]] = field(default_factory=list)
    _counter: itertools.count = field(default_factory=lambda: itertools.count(1000))

    # --- building -------------------------------------------------------------------------

    def _stamp(self, obj: Obj) -> None:
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(next(self._counter))

    def add_namespace(
        self,
        name: str,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        *,
        applied: Mapping[str, str] | None = None,
        by_go: Mapping[str, str] | None = None,
        terminating: bool = False,
    ) -> Obj:
        """A namespace; ``applied`` are labels the controller owns by an earlier apply,
        ``by_go`` labels a Go Accurate older than v1.4 wrote by update."""
        meta: Obj = {"name": name, "uid": f"uid-ns-{name}", "labels": dict(labels or {})}
        if annotations:
            meta["annotations"] = dict(annotations)
        entries = []
        if applied:
            meta["labels"].update(applied)
            entries.append(_apply_entry(set(applied), set()))
        if by_go:
            meta["labels"].update(by_go)
            entries.append(_entry(FIELD_MANAGER, "Update", set(by_go), set()))
        if entries:
            meta["managedFields"] = entries
        if terminating:
            meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
        self._stamp(ns)
        self.namespaces[name] = ns
        return ns

    def add_subnamespace(
        self,
        parent: str,
        name: str,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        *,
        finalizer: bool = True,
        deleting: bool = False,
        created: str = "2024-01-01T00:00:00Z",
    ) -> Obj:
        meta: Obj = {
            "namespace": parent,
            "name": name,
            "uid": f"uid-sub-{parent}-{name}",
            "generation": 1,
            "creationTimestamp": created,
            "finalizers": [FINALIZER] if finalizer else [],
        }
        if deleting:
            meta["deletionTimestamp"] = "2024-01-02T00:00:00Z"
        sub = {
            "apiVersion": "accurate.cybozu.com/v2",
            "kind": "SubNamespace",
            "metadata": meta,
            "spec": {"labels": dict(labels or {}), "annotations": dict(annotations or {})},
        }
        self._stamp(sub)
        self.subnamespaces[(parent, name)] = sub
        return sub

    def add_object(self, gvk: GroupVersionKind, obj: Obj) -> Obj:
        """Store an object as a client would create it (the server fills in the rest)."""
        stored = _defaulted(gvk, copy.deepcopy(obj))
        meta = stored["metadata"]
        meta.setdefault("uid", f"uid-{next(self._counter)}")
        self._stamp(stored)
        self.objects[(gvk, meta["namespace"], meta["name"])] = stored
        return stored

    def find(self, gvk: GroupVersionKind, namespace: str, name: str) -> Obj | None:
        return self.objects.get((gvk, namespace, name))

    def obj(self, gvk: GroupVersionKind, namespace: str, name: str) -> Obj:
        """An object that must exist (a KeyError says it does not)."""
        return self.objects[(gvk, namespace, name)]

    def label_by_hand(self, name: str, key: str, value: str | None) -> None:
        """``kubectl label``: an update takes the key's ownership away from other managers."""
        meta = self.namespaces[name]["metadata"]
        if value is None:
            meta.setdefault("labels", {}).pop(key, None)
        else:
            meta.setdefault("labels", {})[key] = value
        entries = meta.setdefault("managedFields", [])
        for entry in entries:
            _drop_keys(entry, "labels", {key})
        if value is not None:
            entries.append(_entry("kubectl", "Update", {key}, set()))
        self._stamp(self.namespaces[name])

    def snapshot(self) -> Snapshot:
        by_kind: dict[GroupVersionKind, list[Obj]] = {gvk: [] for gvk in self.config.watches}
        for (gvk, _, _), obj in self.objects.items():
            by_kind.setdefault(gvk, []).append(copy.deepcopy(obj))
        return Snapshot(
            config=self.config,
            namespaces=[copy.deepcopy(ns) for ns in self.namespaces.values()],
            subnamespaces=[copy.deepcopy(s) for s in self.subnamespaces.values()],
            objects=by_kind,
            owners=copy.deepcopy(self.owners),
            propagate_generated=self.propagate_generated,
            hrqs=copy.deepcopy(self.hrqs),
            hrq_quotas=[copy.deepcopy(q) for q in self.quotas.values()],
        )

    def keep_quotas(self) -> list[Obj]:
        """What the controller's quota keeper does in a pass: create and delete the
        ResourceQuotas the HRQs need (created without status, as on a cluster; a changed spec
        leaves the status as it was); returns the new ones."""
        forest = Forest.build(self.namespaces.values())
        planned = quota.plan_quotas(forest, self.hrqs, list(self.quotas.values()))
        for obj in planned.create:
            self.quotas[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = copy.deepcopy(
                dict(obj)
            )
        for obj in planned.replace:
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            self.quotas[key]["spec"] = copy.deepcopy(dict(obj["spec"]))
        for namespace, name, _ in planned.delete:
            del self.quotas[(namespace, name)]
        return list(planned.create)

    def count_quotas(self) -> None:
        """What kube-controller-manager's quota controller does with a new ResourceQuota:
        fill in status.hard from spec.hard and status.used (nothing used here)."""
        for obj in self.quotas.values():
            hard = dict(obj["spec"]["hard"])
            obj["status"] = {"hard": hard, "used": dict.fromkeys(hard, "0")}

    # --- applying -------------------------------------------------------------------------

    def apply(self, plan: Plan) -> None:
        """Run a plan stage by stage, skipping steps whose prerequisites failed, then send
        what the end of the pass decides, as the controller does."""
        happened: dict[int, Finding] = {}
        for stage in plan.stages():
            for step in stage:
                happened[step.index] = plan.hindrance(step, happened) or self._attempt(step.action)
        for send in close(plan, happened).sends:
            self._attempt(send.action)

    def _attempt(self, action: Action) -> Finding:
        try:
            self._do(action)
        except ApiError as error:
            if error.reason != "NamespaceTerminating":
                self.failures.append((action, error.reason))
                return Finding("failed", error.reason)
        return Finding("done")

    def _do(self, action: Action) -> None:
        if isinstance(action, CreateNamespace):
            self._create_namespace(action)
        elif isinstance(action, ApplyNamespaceMetadata):
            ns = self._namespace(action.name)
            if action.takeover:
                self._take_over(ns, action.takeover)
            self._apply_metadata(ns, action.labels, action.annotations)
        elif isinstance(action, DeleteNamespace):
            self._delete_namespace(action)
        elif isinstance(action, (AddFinalizer, RemoveFinalizer)):
            self._set_finalizer(action)
        elif isinstance(action, PatchSubNamespaceStatus):
            self._patch_status(action)
        elif isinstance(action, CreateObject):
            self._create_object(action.object)
        elif isinstance(action, ReplaceObject):
            self._replace_object(action)
        elif isinstance(action, DeleteObject):
            self._delete_object(action.ref.key, action.ref.uid, action.resource_version)
        elif isinstance(action, AnnotateObject):
            obj = self._object(action.ref.key)
            obj["metadata"].setdefault("annotations", {}).update(action.annotations)
            self._stamp(obj)
        else:
            self.events.append(action)

    def _namespace(self, name: str) -> Obj:
        if name not in self.namespaces:
            raise ApiError("NotFound")
        return self.namespaces[name]

    def _create_namespace(self, action: CreateNamespace) -> None:
        """One apply that creates: the controller's Apply entry owns every key it set; a
        namespace already there is refused (the controller's precondition)."""
        if action.name in self.namespaces:
            raise ApiError("Conflict")
        ns = self.add_namespace(action.name, {}, {})
        self._apply_metadata(ns, action.labels, action.annotations)

    def _take_over(self, ns: Obj, keys: OwnedKeys) -> None:
        """The controller's write of ``managedFields`` alone, as the writer sends it."""
        entries = upgraded_managed_fields(ns["metadata"].get("managedFields") or (), keys)
        if entries is not None:
            ns["metadata"]["managedFields"] = entries
            self._stamp(ns)

    def _apply_metadata(
        self, ns: Obj, labels: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None:
        """Server-side apply with force by the controller's field manager: a key applied with
        another value than it has is taken from other managers; one applied with the same value
        is shared with them, so their ownership keeps it when the controller stops applying it."""
        before = copy.deepcopy(ns["metadata"])
        meta = ns["metadata"]
        entries = meta.setdefault("managedFields", [])
        mine = next((e for e in entries if _is_controller_apply(e)), None)
        others = [e for e in entries if e is not mine]
        for section, wanted in (("labels", labels), ("annotations", annotations)):
            current = meta.setdefault(section, {})
            previously = _entry_keys(mine, section) if mine else set()
            changed = {key for key, value in wanted.items() if current.get(key) != value}
            for other in others:
                _drop_keys(other, section, changed)
            held_by_others = set().union(*(_entry_keys(e, section) for e in others))
            for key in previously - set(wanted) - held_by_others:
                current.pop(key, None)
            current.update(wanted)
        entries[:] = [e for e in others if _entry_keys(e, "labels") | _entry_keys(e, "annotations")]
        entries.append(_apply_entry(set(labels), set(annotations)))
        if meta != before:
            self._stamp(ns)

    def _delete_namespace(self, action: DeleteNamespace) -> None:
        ns = self._namespace(action.name)
        if action.uid is not None and ns["metadata"].get("uid") != action.uid:
            raise ApiError("Conflict")
        for gone in [k for k in self.objects if k[1] == action.name]:
            del self.objects[gone]
        for key, sub in list(self.subnamespaces.items()):
            if key[0] == action.name:
                sub["metadata"]["deletionTimestamp"] = "2024-01-03T00:00:00Z"
                self._settle_subnamespace(key)
        if any(key[0] == action.name for key in self.subnamespaces):
            ns["metadata"]["deletionTimestamp"] = "2024-01-03T00:00:00Z"
        else:
            del self.namespaces[action.name]

    def _settle_subnamespace(self, key: tuple[str, str]) -> None:
        """A deleted SubNamespace goes away once its finalizers are gone.

        A terminating namespace is left terminating: the namespace controller finishes it
        later, which is not part of applying a plan.
        """
        sub = self.subnamespaces[key]
        if sub["metadata"].get("deletionTimestamp") and not sub["metadata"].get("finalizers"):
            del self.subnamespaces[key]

    def _set_finalizer(self, action: AddFinalizer | RemoveFinalizer) -> None:
        sub = self.subnamespaces.get((action.namespace, action.name))
        if sub is None:
            raise ApiError("NotFound")
        if sub["metadata"]["resourceVersion"] != action.resource_version:
            raise ApiError("Conflict")
        finalizers = [f for f in sub["metadata"].get("finalizers") or () if f != FINALIZER]
        if isinstance(action, AddFinalizer):
            finalizers.append(FINALIZER)
        sub["metadata"]["finalizers"] = finalizers
        self._stamp(sub)
        self._settle_subnamespace((action.namespace, action.name))

    def _patch_status(self, action: PatchSubNamespaceStatus) -> None:
        sub = self.subnamespaces.get((action.namespace, action.name))
        if sub is None:
            raise ApiError("NotFound")
        status = sub.setdefault("status", {})
        status["observedGeneration"] = action.status.observed_generation
        kept = [c for c in status.get("conditions") or () if c["type"] not in OWNED_CONDITIONS]
        for c in action.status.conditions:
            kept.append(
                {
                    "type": c.type,
                    "status": c.status,
                    "reason": c.reason,
                    "message": c.message,
                    "lastTransitionTime": "2024-01-04T00:00:00Z",
                }
            )
        status["conditions"] = kept
        self._stamp(sub)

    def _gvk(self, obj: Mapping[str, Any]) -> GroupVersionKind:
        group, _, version = obj["apiVersion"].rpartition("/")
        return GroupVersionKind(group, version, obj["kind"])

    def _create_object(self, obj: Mapping[str, Any]) -> None:
        gvk = self._gvk(obj)
        meta = obj["metadata"]
        ns = self._namespace(meta["namespace"])
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError("NamespaceTerminating")
        if (gvk, meta["namespace"], meta["name"]) in self.objects:
            raise ApiError("AlreadyExists")
        self.add_object(gvk, dict(obj))

    def _object(self, key: tuple[str, str, str, str]) -> Obj:
        api_version, kind, namespace, name = key
        group, _, version = api_version.rpartition("/")
        obj = self.objects.get((GroupVersionKind(group, version, kind), namespace, name))
        if obj is None:
            raise ApiError("NotFound")
        return obj

    def _replace_object(self, action: ReplaceObject) -> None:
        ref = action.ref
        actual = self._object(ref.key)
        if actual["metadata"]["resourceVersion"] != action.resource_version:
            raise ApiError("Conflict")
        if ref.kind == "RoleBinding" and actual.get("roleRef") != action.object.get("roleRef"):
            self._delete_object(ref.key, action.uid, None)
            self._create_object(action.object)
            return
        replaced = _defaulted(self._gvk(actual), copy.deepcopy(dict(action.object)))
        replaced["metadata"]["uid"] = actual["metadata"]["uid"]
        self._stamp(replaced)
        self.objects[(self._gvk(actual), ref.namespace, ref.name)] = replaced

    def _delete_object(
        self, key: tuple[str, str, str, str], uid: str | None, resource_version: str | None
    ) -> None:
        obj = self._object(key)
        if uid is not None and obj["metadata"].get("uid") != uid:
            raise ApiError("Conflict")
        if resource_version is not None and obj["metadata"]["resourceVersion"] != resource_version:
            raise ApiError("Conflict")
        del self.objects[(self._gvk(obj), key[2], key[3])]


def _entry(manager: str, operation: str, labels: set[str], annotations: set[str]) -> Obj:
    fields: Obj = {}
    if labels:
        fields["f:labels"] = {f"f:{k}": {} for k in sorted(labels)}
    if annotations:
        fields["f:annotations"] = {f"f:{k}": {} for k in sorted(annotations)}
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": fields},
    }


def _apply_entry(labels: set[str], annotations: set[str]) -> Obj:
    return _entry(FIELD_MANAGER, "Apply", labels, annotations)


def _is_controller_apply(entry: Mapping[str, Any]) -> bool:
    return entry.get("manager") == FIELD_MANAGER and entry.get("operation") == "Apply"


def _entry_keys(entry: Mapping[str, Any], section: str) -> set[str]:
    fields = entry.get("fieldsV1", {}).get("f:metadata", {}).get(f"f:{section}", {})
    return {key[2:] for key in fields}


def _drop_keys(entry: Obj, section: str, keys: set[str]) -> None:
    fields = entry.get("fieldsV1", {}).get("f:metadata", {}).get(f"f:{section}")
    if fields:
        for key in keys:
            fields.pop(f"f:{key}", None)


def _defaulted(gvk: GroupVersionKind, obj: Obj) -> Obj:
    """What the server stores: defaults filled in, empty optional fields dropped."""
    obj.setdefault("apiVersion", gvk.api_version)
    obj.setdefault("kind", gvk.kind)
    meta = obj["metadata"]
    for key in ("labels", "annotations"):
        if not meta.get(key):
            meta.pop(key, None)
    if gvk == SECRET:
        obj.setdefault("type", "Opaque")
        if not obj.get("data"):
            obj.pop("data", None)
    if gvk == ROLE_BINDING:
        for subject in obj.get("subjects") or ():
            if subject.get("kind") in ("User", "Group"):
                subject.setdefault("apiGroup", "rbac.authorization.k8s.io")
    if gvk == ROLE and not obj.get("rules"):
        obj.pop("rules", None)
    meta.setdefault("creationTimestamp", "2024-01-01T00:00:00Z")
    return obj


def settle(world: World, passes: int = 5) -> int:
    """Plan and apply until a plan changes nothing; returns the number of passes it took."""
    for count in range(1, passes + 1):
        current = plan(world.snapshot())
        if not current.changes():
            return count - 1
        world.apply(current)
    raise AssertionError(f"no fixpoint after {passes} passes")
