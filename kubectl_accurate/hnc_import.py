"""``kubectl accurate import-hnc``: read what HNC left in the cluster, show the plan, carry it out.

The rules live in libaccurate.hnc; this module reads the cluster for them, prints the plan, and
makes the writes with the same care as the other commands: everything is reviewed with the
webhooks' rules and, where the answer does not depend on an earlier write of the import, judged
by the API server in a dry run before the first write. Every write carries the resourceVersion
it was planned on, so nothing read stale is overwritten, and a second run plans nothing.

The writes are refused while a prerequisite does not hold, and the plan names each of them: HNC
still runs (its webhooks refuse every change to the copies it made, and its controller would
fight Accurate's over them), or SubNamespaces are due and their CRD is not installed. HNC's
HierarchicalResourceQuotas are carried over when Accurate's HRQ CRD is installed; the
ResourceQuotas HNC made for them go in a later run, once Accurate's controller has counted its
own in their namespaces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kubectl_accurate.changes import CreateSubNamespace, LabelPatch, Refused
from kubectl_accurate.output import CliError, Printer
from kubectl_accurate.reads import NAMESPACES, namespace_path
from kubectl_accurate.subnamespace_api import NotServed, SubNamespaceApi
from kubectl_accurate.writes import DRY_RUN, FIELD_MANAGER, review, send
from libaccurate import quota
from libaccurate.constants import LABEL_PARENT, LABEL_TYPE, TYPE_ROOT
from libaccurate.forest import Forest
from libaccurate.hnc import (
    HNC_CONFIG_NAME,
    HNC_GROUP,
    HNC_QUOTA_LABEL,
    HNC_VERSION,
    CreateQuota,
    DeleteHncQuota,
    HncSnapshot,
    Kinds,
    MarkObject,
    Plan,
    TakeOwnership,
    counted,
    hnc_still_running,
    plan_import,
    propagated_kinds,
)
from libaccurate.network.kube import ApiError, Kube, resource_path

Write = MarkObject | TakeOwnership | LabelPatch | CreateSubNamespace | CreateQuota | DeleteHncQuota
Obj = dict[str, Any]


@dataclass(frozen=True)
class Prerequisite:
    """A condition ``--apply`` checks before its first write; ``found`` says why it fails."""

    check: str
    found: tuple[str, ...]

    @property
    def met(self) -> bool:
        return not self.found

    def describe(self) -> str:
        return f"{self.check}: {'yes' if self.met else 'no: ' + ', '.join(self.found)}"


@dataclass(frozen=True)
class Outcome:
    """What the command found and planned, for printing as text or data."""

    plan: Plan
    running: tuple[str, ...]
    prerequisites: tuple[Prerequisite, ...]
    writes: tuple[Write, ...]
    applied: bool


def run(
    api: SubNamespaceApi, printer: Printer, apply_: bool, output: str | None, hnc_namespace: str
) -> None:
    """Read, plan, and (with ``apply_``) write; then print what was found and what comes next."""
    snapshot, kinds, running, crd_served = _read(api, hnc_namespace)
    plan = plan_import(snapshot, kinds)
    namespaces = {ns["metadata"]["name"]: ns for ns in snapshot.namespaces}
    writes = _writes(plan, namespaces)
    prerequisites = _prerequisites(plan, running, crd_served, hnc_namespace)
    if apply_ and writes:
        unmet = [p for p in prerequisites if not p.met]
        if unmet:
            reasons = "; ".join(p.describe() for p in unmet)
            raise Refused(
                f"--apply checks first that {reasons}. Nothing was written; run "
                "without --apply for the steps."
            )
        _carry_out(api, writes, snapshot.namespaces)
    outcome = Outcome(plan, running, prerequisites, tuple(writes), apply_)
    if output:
        printer.data(_data(outcome, hnc_namespace), output)
    else:
        _show(printer, outcome, hnc_namespace)


# Reading


def _read(
    api: SubNamespaceApi, hnc_namespace: str
) -> tuple[HncSnapshot, Kinds, tuple[str, ...], bool]:
    kube = api.kube

    def hnc(plural: str) -> list[Obj]:
        return _items(kube, resource_path(HNC_GROUP, HNC_VERSION, plural)) or []

    hierarchies = _items(kube, resource_path(HNC_GROUP, HNC_VERSION, "hierarchyconfigurations"))
    if hierarchies is None:
        raise CliError(
            f"the API server does not serve HNC's API ({HNC_GROUP}/{HNC_VERSION}): "
            "there is nothing to import"
        )
    config_path = resource_path(HNC_GROUP, HNC_VERSION, "hncconfigurations", None, HNC_CONFIG_NAME)
    hnc_config = kube.find(config_path)
    kinds = propagated_kinds(hnc_config, kube.server_resources())
    existing = _subnamespaces(api)
    quotas = resource_path("", "v1", "resourcequotas")
    snapshot = HncSnapshot(
        namespaces=list(kube.list_objects(NAMESPACES).get("items") or []),
        hierarchies=hierarchies,
        anchors=hnc("subnamespaceanchors"),
        quotas=hnc("hierarchicalresourcequotas"),
        subnamespaces=existing or [],
        objects={
            kind: _items(kube, resource_path(kind.gvk.group, kind.gvk.version, kind.plural)) or []
            for kind in kinds.propagated
        },
        accurate_quotas=_items(kube, resource_path(quota.GROUP, quota.VERSION, quota.PLURAL)),
        resource_quotas=[
            *(_items(kube, quotas, labelSelector=HNC_QUOTA_LABEL) or []),
            *(_items(kube, quotas, labelSelector=quota.LABEL_HRQ_NAMESPACE) or []),
        ],
    )
    webhooks = [
        *(_items(kube, _admission("validatingwebhookconfigurations")) or []),
        *(_items(kube, _admission("mutatingwebhookconfigurations")) or []),
    ]
    deployments = _items(kube, resource_path("apps", "v1", "deployments", hnc_namespace)) or []
    running = hnc_still_running(webhooks, deployments)
    return snapshot, kinds, running, existing is not None


def _subnamespaces(api: SubNamespaceApi) -> list[Obj] | None:
    """Every SubNamespace, as v2 objects, through the adapter that asks discovery again when
    a cached version is no longer served; None when the cluster has no SubNamespace API."""
    try:
        return api.list(None)
    except NotServed:
        return None


def _prerequisites(
    plan: Plan, running: Sequence[str], crd_served: bool, hnc_namespace: str
) -> tuple[Prerequisite, ...]:
    """What ``--apply`` checks before it writes, each with what stands in its way."""
    webhooks = tuple(r for r in running if "WebhookConfiguration" in r)
    deployments = tuple(r for r in running if r.startswith("Deployment "))
    due = len(plan.subnamespaces)
    crd = () if crd_served or not due else (f"not installed, and {due} to create",)
    return (
        Prerequisite(
            "HNC's webhooks are gone (no validating or mutating webhook configuration holds a "
            "webhook named *.hnc.x-k8s.io)",
            webhooks,
        ),
        Prerequisite(
            f"HNC's controller is stopped (no Deployment in namespace {hnc_namespace} has "
            "replicas)",
            deployments,
        ),
        Prerequisite("the SubNamespace CRD is installed (when SubNamespaces are to be made)", crd),
    )


def _admission(plural: str) -> str:
    return resource_path("admissionregistration.k8s.io", "v1", plural)


def _items(kube: Kube, path: str, **query: str) -> list[Obj] | None:
    """A LIST's items, with apiVersion and kind filled in; None when the server does not serve
    the resource (or the namespace does not exist)."""
    try:
        listing = kube.list_objects(path, **query)
    except ApiError as error:
        if error.not_found:
            return None
        raise
    api_version = listing.get("apiVersion", "")
    kind = str(listing.get("kind", "")).removesuffix("List")
    return [
        {"apiVersion": api_version, "kind": kind, **item} for item in listing.get("items") or []
    ]


# Writing


def _writes(plan: Plan, namespaces: Mapping[str, Mapping[str, Any]]) -> list[Write]:
    """The plan as writes, in its order: copies, sources, HNC's ownership, roots, parents,
    SubNamespaces, HRQs, HNC's ResourceQuotas to delete."""
    writes: list[Write] = [*plan.copies, *plan.sources, *plan.takeovers]
    writes += [LabelPatch(namespaces[name], {LABEL_TYPE: TYPE_ROOT}) for name in plan.roots]
    writes += [LabelPatch(namespaces[name], {LABEL_PARENT: p}) for name, p in plan.parents]
    writes += [
        CreateSubNamespace(sub.parent, sub.name, sub.labels, sub.annotations)
        for sub in plan.subnamespaces
    ]
    return [*writes, *plan.quotas, *plan.quota_removals]


def _carry_out(
    api: SubNamespaceApi, writes: Sequence[Write], namespaces: Sequence[Mapping[str, Any]]
) -> None:
    """Review every write on the cluster as it will be, dry-run those whose verdict does not
    hang on an earlier write, then write in order. A label write to a namespace the import
    already wrote carries the resourceVersion of that write, so its precondition still says
    that nobody else changed the namespace in between."""
    now = Forest.build(namespaces)
    after = {ns["metadata"]["name"]: ns for ns in namespaces}
    for write in writes:
        if isinstance(write, LabelPatch):
            after[write.name] = write.after()
    judged = [write for write in writes if isinstance(write, (LabelPatch, CreateSubNamespace))]
    review(judged, (Forest.build(after.values()),))
    for write in writes:
        if _independent(write, now):
            try:
                _send(api, write, dry_run=True)
            except ApiError as error:
                raise CliError(f"{write.describe()}: {_explained(error)}") from error
    latest: dict[str, Mapping[str, Any]] = {}
    for index, write in enumerate(writes):
        if isinstance(write, LabelPatch) and write.name in latest:
            write = LabelPatch(latest[write.name], write.labels)
        try:
            written = _send(api, write, dry_run=False)
        except ApiError as error:
            raise CliError(
                f"{write.describe()}: {_explained(error)}\n  {index} of {len(writes)} writes "
                "were made; run the command again to finish (it plans only what is left)"
            ) from error
        if isinstance(write, (TakeOwnership, LabelPatch)):
            latest[write.name] = written


def _independent(write: Write, now: Forest) -> bool:
    """Whether the API server's verdict on ``write`` cannot hang on an earlier write: object
    annotations and new roots never do; a parent label or a SubNamespace only when the parent
    is already a root or a sub-namespace."""
    if isinstance(write, LabelPatch) and LABEL_PARENT in write.labels:
        parent = write.labels[LABEL_PARENT]
    elif isinstance(write, CreateSubNamespace):
        parent = write.namespace
    else:
        return True
    node = now.nodes.get(parent or "")
    return node is not None and (node.is_root or node.parent is not None)


def _send(api: SubNamespaceApi, write: Write, dry_run: bool) -> Any:
    if isinstance(write, (LabelPatch, CreateSubNamespace)):
        return send(api, write, dry_run)
    query = {"fieldManager": FIELD_MANAGER, **(DRY_RUN if dry_run else {})}
    if isinstance(write, CreateQuota):
        path = resource_path(quota.GROUP, quota.VERSION, quota.PLURAL, write.namespace)
        return api.kube.create(path, write.body(), **query)
    if isinstance(write, DeleteHncQuota):
        # With a body, kube-apiserver reads DeleteOptions from it alone: a dryRun in the
        # query would be ignored, and the quota deleted for real.
        metadata = write.obj.get("metadata") or {}
        keys = ("uid", "resourceVersion")
        body: Obj = {"preconditions": {key: metadata.get(key) for key in keys}}
        body.update({"dryRun": ["All"]} if dry_run else {})
        path = resource_path("", "v1", "resourcequotas", write.namespace, write.name)
        return api.kube.delete(path, body)
    if isinstance(write, TakeOwnership):
        version = write.namespace["metadata"].get("resourceVersion")
        metadata = {
            "resourceVersion": version,
            "managedFields": write.managed_fields(write.namespace),
        }
        return api.kube.patch(namespace_path(write.name), {"metadata": metadata}, **query)
    gvk = write.kind.gvk
    path = resource_path(gvk.group, gvk.version, write.kind.plural, write.namespace, write.name)
    version = (write.obj.get("metadata") or {}).get("resourceVersion")
    body = {"metadata": {"resourceVersion": version, "annotations": dict(write.annotations)}}
    return api.kube.patch(path, body, **query)


def _explained(error: ApiError) -> str:
    if error.conflict:
        return "it changed while the import ran; run the command again"
    return str(error.message)


# Printing


ANCHORS = "subnamespaceanchors.hnc.x-k8s.io"
HIERARCHIES = "hierarchyconfigurations.hnc.x-k8s.io"
RELEASE_FINALIZERS = """'{"metadata":{"finalizers":null}}'"""


def _steps(outcome: Outcome, hnc_namespace: str) -> list[str]:
    """How to move to Accurate and retire HNC without losing a namespace, from where the
    cluster stands: one ordered list, the same as docs/moving-from-hnc.md's."""
    steps = []
    webhooks = [r.split(" ", 1) for r in outcome.running if "WebhookConfiguration" in r]
    if webhooks:
        commands = "; ".join(f"kubectl delete {kind.lower()} {name}" for kind, name in webhooks)
        steps.append(
            f"Remove HNC's webhooks (`{commands}`): they fail closed, so once HNC's controller "
            "is gone they would refuse every change to namespaces and copies, the import's too."
        )
    if any(r.startswith("Deployment ") for r in outcome.running):
        steps.append(
            f"Stop HNC's controller (`kubectl -n {hnc_namespace} delete deployment --all`): "
            "from then on nothing deletes a namespace when its anchor goes."
        )
    steps.append(_install_step(outcome.plan))
    if outcome.writes and not outcome.applied:
        steps.append(f"Run `kubectl accurate import-hnc --apply --hnc-namespace {hnc_namespace}`.")
    steps += [
        "Wait until every SubNamespace is Ready "
        "(`kubectl wait --for=condition=Ready subnamespaces --all -A`): Accurate's controller "
        "then keeps HNC's copies current in place.",
        *_quota_step(outcome.plan),
        "Let go of the finalizers HNC put on its anchors and HierarchyConfigurations "
        f"(`{_release_command(ANCHORS)}; {_release_command(HIERARCHIES)}`): with HNC's "
        "controller stopped, nobody else would.",
        f"Delete HNC's CRDs (`kubectl delete crd {ANCHORS} {HIERARCHIES} "
        "hncconfigurations.hnc.x-k8s.io hierarchicalresourcequotas.hnc.x-k8s.io`): this removes "
        "the anchors without touching a namespace, as no HNC controller is left to act on it.",
        f"Delete the rest of HNC's release: its namespace (`kubectl delete namespace "
        f"{hnc_namespace}`) and its cluster-wide roles and bindings.",
    ]
    return [f"{i}. {step}" for i, step in enumerate(steps, start=1)]


def _quota_step(plan: Plan) -> list[str]:
    """Removing the ResourceQuotas HNC made for its HRQs, when some must wait for Accurate's."""
    if not plan.quotas_waiting:
        return []
    return [
        "Once Accurate's controller counts its hierarchical quotas (`kubectl get hrq -A` shows "
        "what each uses), run `kubectl accurate import-hnc --apply` again: it deletes the "
        f"ResourceQuotas HNC made for its HRQs (label {HNC_QUOTA_LABEL}), which nothing "
        "updates any more, in each namespace where Accurate's count. Until then they limit "
        "each namespace on its own."
    ]


def _install_step(plan: Plan) -> str:
    """Installing Accurate before ``--apply``: its CRD must be there, and its controller
    starts only with RBAC for every kind it watches."""
    kinds = ", ".join(gvk.kind for gvk in plan.config.watches)
    return (
        "Install Accurate (unless done), or update it, with the config above merged into its "
        "config (Helm: "
        "controller.config; kustomize: ConfigMap accurate-config) and RBAC for every kind of "
        f"watches ({kinds}): get, list, watch, create, update, patch and delete (Helm: "
        "controller.additionalRBAC.rules, where the default binds admin, which covers Roles, "
        "RoleBindings, Secrets and ConfigMaps; kustomize: ClusterRole "
        "accurate-additional-resources). Without list or watch on a kind the controller does "
        "not start. --apply needs the SubNamespace CRD, and the HierarchicalResourceQuota "
        "CRD to carry HNC's HRQs over (controller/config/quota; Helm: quota.enabled); the "
        "controller finds no tree of its own until the import writes one."
    )


def _release_command(resource: str) -> str:
    """A shell command that removes the finalizers of every ``resource`` object."""
    return (
        f"kubectl get {resource} -A --no-headers -o custom-columns=NS:.metadata.namespace,"
        f"NAME:.metadata.name | while read ns name; do kubectl -n $ns patch {resource} $name "
        f"--type=merge -p {RELEASE_FINALIZERS}; done"
    )


def _data(outcome: Outcome, hnc_namespace: str) -> dict[str, Any]:
    plan = outcome.plan
    return {
        "applied": outcome.applied and bool(outcome.writes),
        "hncRunning": list(outcome.running),
        "prerequisites": [
            {"check": p.check, "met": p.met, "found": list(p.found)} for p in outcome.prerequisites
        ],
        "writes": [write.describe() for write in outcome.writes],
        "notCarriedOver": [{"what": n.what, "reason": n.reason} for n in plan.not_carried],
        "config": plan.config_document(),
        "configNotes": list(plan.config_notes),
        "nextSteps": _steps(outcome, hnc_namespace),
    }


def _show(printer: Printer, outcome: Outcome, hnc_namespace: str) -> None:
    plan = outcome.plan
    count = counted(len(outcome.writes), "write")
    if not outcome.writes:
        printer.line("nothing to do: Accurate already holds HNC's trees and copies")
    elif outcome.applied:
        printer.line(f"imported: {count} made")
    else:
        printer.line((f"Would write ({len(outcome.writes)}):", "bold"))
    if outcome.writes:
        for write in outcome.writes:
            printer.line(f"  {'' if outcome.applied else 'would '}{write.describe()}")
    if plan.not_carried:
        printer.line("")
        printer.line((f"Not carried over ({len(plan.not_carried)}):", "bold"))
        for item in plan.not_carried:
            printer.line(f"  {item.what}: {item.reason}")
    printer.line("")
    printer.line(("Controller config (merge it into Accurate's config file):", "bold"))
    document = yaml.safe_dump(plan.config_document(), sort_keys=False).rstrip("\n")
    for line in document.splitlines():
        printer.line(f"  {line}")
    for note in plan.config_notes:
        printer.line(f"  # {note}")
    if outcome.writes and not outcome.applied:
        printer.line("")
        printer.line(("--apply checks first that:", "bold"))
        for prerequisite in outcome.prerequisites:
            printer.line(f"  {prerequisite.describe()}")
    printer.line("")
    printer.line(("To move to Accurate and retire HNC without deleting a namespace:", "bold"))
    for step in _steps(outcome, hnc_namespace):
        printer.line(f"  {step}")
