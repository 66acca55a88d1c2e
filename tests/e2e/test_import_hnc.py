"""``kubectl accurate import-hnc`` end to end: a cluster as HNC leaves it (its CRDs, a tree made
of an anchor and a full namespace, copies labelled ``inherited-from``), imported with the real
plugin, then handed to the real controller started with the config the import printed.

What a user must be able to count on: every copy HNC had is still there, with the same uid, and
is kept current by Accurate from then on; a second ``--apply`` writes nothing; nothing is
written while HNC still runs.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from accurate_testbed.cluster import Cluster
from accurate_testbed.manifests import CRDS
from accurate_testbed.waiting import wait_for
from kubectl_accurate.subnamespace_api import SubNamespaceApi
from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_PROPAGATE,
    ANNOTATION_PROPAGATE_NONE,
    ANNOTATION_PROPAGATE_SELECT,
    ANNOTATION_SOURCE_HASH,
    LABEL_PARENT,
    LABEL_TYPE,
)
from libaccurate.network.kube import ApiError, Kube, resource_path
from tests.e2e.cli import failed, plugin_env, run_plugin, succeeded
from tests.e2e.controller import Controllers, Scene
from tests.e2e.test_hierarchical_quotas import hrq_crd
from tests.e2e.webhooks import Webhooks, connect

__all__ = ["hrq_crd"]
HNC = "hnc.x-k8s.io/v1alpha2"
HNC_CRDS = Path(__file__).with_name("hnc_crds.yaml")
INHERITED_FROM = "hnc.x-k8s.io/inherited-from"
RBAC = "rbac.authorization.k8s.io"
KINDS = {
    "Role": (RBAC, "roles"),
    "RoleBinding": (RBAC, "rolebindings"),
    "Secret": ("", "secrets"),
}
WEBHOOKS = resource_path("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
MUTATING = resource_path("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
NAMESPACES = resource_path("", "v1", "namespaces")
# HNC's controller writes by update; controller-runtime names its field manager after the
# binary, /manager.
AS_HNC = {"fieldManager": "manager"}
# HNC's managed label (set on the root, asked otherwise by the anchor) and annotation.
TIER = "example.com/tier"
OWNER = "example.com/owner"


@pytest.fixture
def hnc_api(cluster: Cluster) -> bool:
    """HNC's CRDs, installed unless the cluster has them, and served; whether the test
    installed them (and so may delete them)."""
    kube = connect(cluster)
    installed = False
    for crd in yaml.safe_load_all(HNC_CRDS.read_text()):
        path = f"{CRDS}/{crd['metadata']['name']}"
        if kube.find(path) is None:
            kube.create(CRDS, cluster.owned(crd))
            cluster.on_cleanup(functools.partial(_remove_crd, kube, path))
            installed = True
    listing = resource_path("hnc.x-k8s.io", "v1alpha2", "hierarchicalresourcequotas")
    wait_for(lambda: _served(kube, listing), 30, "HNC's CRDs to be served")
    return installed


@dataclass(frozen=True)
class HncTree:
    """team <- dev (made through an anchor) <- tools (a full namespace HNC was told about)."""

    team: str
    dev: str
    tools: str

    @property
    def below(self) -> tuple[str, str]:
        return (self.dev, self.tools)


def hnc_tree(scene: Scene) -> HncTree:
    """The tree, its copies and HNC's config, as HNC would have left them. The HNC stand-in
    writes what HNC's controller writes (namespace metadata, the subnamespace, the copies) by
    update under HNC's field manager, which then co-owns it, as on a real cluster."""
    tree = HncTree(scene.name("team"), scene.name("dev"), scene.name("tools"))
    chain = (tree.team, tree.dev, tree.tools)
    # An administrator made team and tools; HNC made dev for its anchor.
    scene.apply(*(_namespace(scene, name, {}, {}) for name in (tree.team, tree.tools)))
    scene.cluster.on_cleanup(lambda: _release_anchors(scene, tree))
    for depth, name in enumerate(chain):
        labels = {
            f"{above}.tree.hnc.x-k8s.io/depth": str(depth - i)
            for i, above in enumerate(chain[: depth + 1])
        }
        labels[TIER] = "gold"  # the root's value wins over the anchor's "free"
        if name != tree.team:
            labels["env"] = "dev"
        annotations = {OWNER: "ops"}
        if name == tree.dev:
            annotations["hnc.x-k8s.io/subnamespace-of"] = tree.team
            scene.kube.create(NAMESPACES, _namespace(scene, name, labels, annotations), **AS_HNC)
        else:
            body = {"metadata": {"labels": labels, "annotations": annotations}}
            scene.kube.patch(_namespace_path(name), body, **AS_HNC)
    scene.apply(
        _hierarchy(
            tree.team,
            None,
            {"labels": _pairs({TIER: "gold"}), "annotations": _pairs({OWNER: "ops"})},
        ),
        _hierarchy(tree.dev, tree.team),
        _hierarchy(tree.tools, tree.dev),
        {
            "apiVersion": HNC,
            "kind": "SubnamespaceAnchor",
            "metadata": {"name": tree.dev, "namespace": tree.team, "finalizers": ["hnc.x-k8s.io"]},
            "spec": {"labels": _pairs({"env": "dev", TIER: "free"})},
            "status": {"status": "Ok"},
        },
        {
            "apiVersion": HNC,
            "kind": "HierarchicalResourceQuota",
            "metadata": {"name": "pods", "namespace": tree.team},
            "spec": {"hard": {"pods": "20"}},
        },
    )
    if scene.get(_hnc_config_path()) is None:
        scene.apply(
            {
                "apiVersion": HNC,
                "kind": "HNCConfiguration",
                "metadata": {"name": "config"},
                "spec": {"resources": [{"resource": "secrets", "mode": "Propagate"}]},
            }
        )
        scene.cluster.on_cleanup(lambda: _delete_if_there(scene.kube, _hnc_config_path()))
    scene.apply(*(_object(kind, tree.team, None) for kind in KINDS))
    for name in tree.below:
        for kind in KINDS:
            group, plural = KINDS[kind]
            path = resource_path(group, "v1", plural, name)
            scene.kube.create(path, _object(kind, name, tree.team), **AS_HNC)
    return tree


def _namespace(
    scene: Scene, name: str, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    metadata = {"name": name, "labels": scene.cluster.own(labels), "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def _namespace_path(name: str) -> str:
    return resource_path("", "v1", "namespaces", name=name)


def _pairs(values: dict[str, str]) -> list[dict[str, str]]:
    """A map as HNC's list of ``{key, value}``."""
    return [{"key": key, "value": value} for key, value in values.items()]


def _hierarchy(
    namespace: str, parent: str | None, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": HNC,
        "kind": "HierarchyConfiguration",
        "metadata": {"name": "hierarchy", "namespace": namespace},
        "spec": {**({"parent": parent} if parent else {}), **(spec or {})},
    }


def _object(
    kind: str, namespace: str, origin: str | None, verbs: tuple[str, ...] = ("get",)
) -> dict[str, Any]:
    """The team's Role, RoleBinding or Secret; HNC's copy when ``origin`` is given."""
    labels = {INHERITED_FROM: origin} if origin else {}
    body: dict[str, Any] = {
        "apiVersion": f"{RBAC}/v1" if KINDS[kind][0] else "v1",
        "kind": kind,
        "metadata": {"name": "team-admin", "namespace": namespace, "labels": labels},
    }
    if kind == "Role":
        body["rules"] = [{"apiGroups": [""], "resources": ["pods"], "verbs": list(verbs)}]
    elif kind == "RoleBinding":
        body["roleRef"] = {"apiGroup": RBAC, "kind": "Role", "name": "team-admin"}
        body["subjects"] = [{"apiGroup": RBAC, "kind": "Group", "name": "team-admins"}]
    else:
        body["data"] = {"token": base64.b64encode(",".join(verbs).encode()).decode()}
    return body


def _path(kind: str, namespace: str) -> str:
    group, plural = KINDS[kind]
    return resource_path(group, "v1", plural, namespace, "team-admin")


def _hnc_config_path() -> str:
    return resource_path("hnc.x-k8s.io", "v1alpha2", "hncconfigurations", None, "config")


def _release_anchors(scene: Scene, tree: HncTree) -> None:
    """HNC's finalizer on the anchor, which no HNC controller will remove after the test."""
    path = resource_path("hnc.x-k8s.io", "v1alpha2", "subnamespaceanchors", tree.team, tree.dev)
    if _served(scene.kube, path.rsplit("/", 1)[0]) and scene.get(path) is not None:
        scene.kube.patch(path, {"metadata": {"finalizers": None}})


def _remove_crd(kube: Kube, path: str) -> None:
    """Delete one of HNC's CRDs (unless a test did) and wait until it is gone: the next test
    installs it afresh, and a CRD still being deleted would be taken for installed."""
    _delete_if_there(kube, path)
    wait_for(lambda: kube.find(path) is None, 120, f"deletion of {path}")


def _delete_if_there(kube: Kube, path: str) -> None:
    """A clean-up's DELETE of what a test (the steps walk) may have deleted already."""
    if kube.find(path) is not None:
        kube.delete(path)


def _served(kube: Kube, path: str) -> bool:
    try:
        kube.list_objects(path)
    except ApiError:
        return False
    return True


def import_hnc(cluster: Cluster, *args: str) -> str:
    return succeeded(run_plugin("import-hnc", *args, kubeconfig=cluster.kubeconfig))


def uids_and_versions(scene: Scene, tree: HncTree) -> dict[str, tuple[str, str]]:
    """(uid, resourceVersion) of every namespace and object of the tree."""
    found = {}
    for name in (tree.team, *tree.below):
        paths = {name: resource_path("", "v1", "namespaces", name=name)}
        paths.update({f"{kind} {name}": _path(kind, name) for kind in KINDS})
        for what, path in paths.items():
            obj = scene.get(path)
            assert obj is not None, f"{what} is gone"
            found[what] = (obj["metadata"]["uid"], obj["metadata"]["resourceVersion"])
    return found


def test_import_hands_hncs_tree_and_copies_to_accurate_without_losing_one(
    hnc_api: bool, webhooks: Webhooks, controllers: Controllers, scene: Scene, cluster: Cluster
) -> None:
    tree = hnc_tree(scene)
    before = uids_and_versions(scene, tree)

    plan = import_hnc(cluster)
    assert f"would label namespace {tree.team}: set {LABEL_TYPE}=root" in plan
    assert f"would create SubNamespace {tree.team}/{tree.dev} with labels env=dev\n" in plan
    assert (
        f"HierarchicalResourceQuota {tree.team}/pods: Accurate's hierarchical quotas are not "
        "installed"
    ) in plan
    assert (
        f"  SubnamespaceAnchor {tree.team}/{tree.dev}: label {TIER}=free: HNC gives namespace "
        f"{tree.dev} {tree.team}'s {TIER}=gold, as an ancestor's managed label wins"
    ) in plan
    assert "Remove HNC's webhooks" not in plan
    assert uids_and_versions(scene, tree) == before
    config = yaml.safe_load(import_hnc(cluster, "-o", "yaml"))["config"]
    assert {"version": "v1", "kind": "Secret", "group": ""} in config["watches"]
    assert config["labelKeys"] == ["env", TIER]
    assert config["annotationKeys"] == [OWNER]
    assert "subNamespaceLabelKeys" not in config

    applied = import_hnc(cluster, "--apply")
    assert applied.startswith("imported: ")
    assert "1. Install Accurate (unless done)" in applied
    assert "2. Wait until every SubNamespace is Ready" in applied
    assert scene.labels(tree.team)[LABEL_TYPE] == "root"
    assert scene.labels(tree.dev)[LABEL_PARENT] == tree.team
    assert scene.labels(tree.tools)[LABEL_PARENT] == tree.dev
    assert (scene.sub(tree.team, tree.dev) or {})["spec"]["labels"] == {"env": "dev"}
    for kind in KINDS:
        source = scene.get(_path(kind, tree.team)) or {}
        assert source["metadata"]["annotations"][ANNOTATION_PROPAGATE] == "update"
        for name, parent in ((tree.dev, tree.team), (tree.tools, tree.dev)):
            copy_ = scene.get(_path(kind, name)) or {}
            assert copy_["metadata"]["annotations"][ANNOTATION_FROM] == parent

    settled = uids_and_versions(scene, tree)
    assert import_hnc(cluster, "--apply").startswith("nothing to do")
    assert uids_and_versions(scene, tree) == settled

    controllers.start(config)
    scene.settle(tree.team, tree.dev)
    copies = [(kind, name) for kind in KINDS for name in tree.below]
    scene.wait(
        lambda: all(_adopted(scene.get(_path(kind, name))) for kind, name in copies),
        "HNC's copies to be taken over",
    )
    assert _replaced_originals(scene, tree) == []
    now = uids_and_versions(scene, tree)
    assert {what: uid for what, (uid, _) in now.items()} == {
        what: uid for what, (uid, _) in before.items()
    }

    scene.apply(*(_sourced(kind, tree.team, ("get", "list")) for kind in ("Role", "Secret")))
    changed = [(kind, name) for kind in ("Role", "Secret") for name in tree.below]
    scene.wait(
        lambda: all(
            _current(scene.get(_path(kind, name)), scene.get(_path(kind, tree.team)))
            for kind, name in changed
        ),
        "the copies to follow their changed sources",
    )
    assert import_hnc(cluster, "--apply").startswith("nothing to do")

    # A tenant asking for another value than the root's gets the root's, as with HNC.
    asked = scene.subnamespace(tree.dev, "asked", labels={TIER: "free"})
    scene.settle(tree.dev, asked)
    assert scene.labels(asked)[TIER] == scene.labels(tree.dev)[TIER] == "gold"


def test_hncs_hrqs_are_carried_over_and_its_quotas_go_once_accurates_count(
    hnc_api: bool,
    hrq_crd: None,
    webhooks: Webhooks,
    controllers: Controllers,
    scene: Scene,
    cluster: Cluster,
) -> None:
    """HNC's HRQ team/pods becomes Accurate's; the ResourceQuota HNC made for it in each
    namespace of the tree stays until Accurate's controller has made and kube-apiserver has
    counted its own there, and then goes, in a second run."""
    tree = hnc_tree(scene)
    chain = (tree.team, *tree.below)
    scene.apply(*(_hnc_quota(name) for name in chain))
    plan = import_hnc(cluster)
    assert f"would create HierarchicalResourceQuota {tree.team}/pods (pods=20)" in plan
    assert "delete ResourceQuota" not in plan

    applied = import_hnc(cluster, "--apply")
    assert "run `kubectl accurate import-hnc --apply` again" in applied
    ours = scene.get(_hrq_path(tree.team)) or {}
    assert ours["spec"] == {"hard": {"pods": "20"}}
    assert all(scene.get(_quota_path(name, HNC_QUOTA)) for name in chain)

    config = yaml.safe_load(import_hnc(cluster, "-o", "yaml"))["config"]
    controllers.start(config)
    scene.settle(tree.team, tree.dev)
    counted = f"hrq.{tree.team}.pods"
    scene.wait(
        lambda: all(
            "used" in ((scene.get(_quota_path(name, counted)) or {}).get("status") or {})
            for name in chain
        ),
        "Accurate's ResourceQuotas to be counted in the whole tree",
    )
    again = import_hnc(cluster, "--apply")
    for name in chain:
        assert f"  delete ResourceQuota {name}/{HNC_QUOTA} (HNC's, for its HRQs" in again
        assert scene.get(_quota_path(name, HNC_QUOTA)) is None
        assert scene.get(_quota_path(name, counted)) is not None
    assert import_hnc(cluster, "--apply").startswith("nothing to do")


HNC_QUOTA = "hrq.hnc.x-k8s.io"


def _hnc_quota(namespace: str) -> dict[str, Any]:
    """The ResourceQuota HNC keeps in each namespace under its HRQs: the tightest hard of
    those above, its cleanup label, and an exception so that HNC never propagates it."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": HNC_QUOTA,
            "namespace": namespace,
            "labels": {"hnc.x-k8s.io/hrq": "true"},
            "annotations": {"propagate.hnc.x-k8s.io/none": "true"},
        },
        "spec": {"hard": {"pods": "20"}},
    }


def _quota_path(namespace: str, name: str) -> str:
    return resource_path("", "v1", "resourcequotas", namespace, name)


def _hrq_path(namespace: str) -> str:
    return resource_path(
        "quota.accurate.cybozu.com", "v1alpha1", "hierarchicalresourcequotas", namespace, "pods"
    )


def test_keys_hnc_wrote_follow_moves_and_removals_once_imported(
    hnc_api: bool, webhooks: Webhooks, controllers: Controllers, scene: Scene, cluster: Cluster
) -> None:
    tree = hnc_tree(scene)
    other = scene.root("other")
    old_label = f"{tree.team}.tree.hnc.x-k8s.io/depth"
    plan = import_hnc(cluster)
    assert (
        f"would take over namespace {tree.dev}'s labels {tree.dev}.tree.hnc.x-k8s.io/depth, env, "
        f"{TIER}, {old_label} and annotation {OWNER} from HNC's field manager"
    ) in plan
    config = yaml.safe_load(import_hnc(cluster, "-o", "yaml"))["config"]
    import_hnc(cluster, "--apply")
    owners = _owners(scene, tree.tools)
    assert "manager" not in owners.get(f"f:{old_label}", ())
    assert import_hnc(cluster, "--apply").startswith("nothing to do")
    controllers.start(config)
    scene.settle(tree.team, tree.dev)
    scene.wait(
        lambda: all(_adopted(scene.get(_path("Role", name))) for name in tree.below),
        "the controller to have passed over the whole tree",
    )

    succeeded(run_plugin("sub", "move", tree.dev, other, kubeconfig=cluster.kubeconfig))
    scene.wait(
        lambda: all(old_label not in scene.labels(name) for name in tree.below),
        f"{old_label} to go from the moved namespaces",
    )
    assert scene.labels(tree.tools)[f"{other}.tree.hnc.x-k8s.io/depth"] == "2"
    selected = scene.kubectl("get", "namespaces", "-l", old_label, "-o", "name")
    assert selected.split() == [f"namespace/{tree.team}"]

    scene.kubectl("annotate", "namespace", other, f"{OWNER}=platform")
    scene.wait(
        lambda: all(scene.annotations(name).get(OWNER) == "platform" for name in tree.below),
        "the new root's annotation to reach the moved namespaces",
    )
    scene.kubectl("annotate", "namespace", other, f"{OWNER}-")
    scene.wait(
        lambda: all(OWNER not in scene.annotations(name) for name in tree.below),
        f"{OWNER}, removed from the root, to go from its descendants",
    )


def _owners(scene: Scene, name: str) -> dict[str, list[str]]:
    """The managers owning each label of namespace ``name`` (``f:<key>``)."""
    owners: dict[str, list[str]] = {}
    for entry in (scene.ns(name) or {})["metadata"].get("managedFields") or ():
        labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        for key in labels:
            owners.setdefault(key, []).append(entry["manager"])
    return owners


def test_a_stale_discovery_cache_is_asked_again(
    hnc_api: bool, webhooks: Webhooks, scene: Scene, cluster: Cluster, tmp_path: Path
) -> None:
    """The plugin's cache says v2alpha1, which the cluster no longer serves, as after the CRD
    of a Go Accurate v1.x was replaced: the import asks discovery again, as every command does."""
    tree = hnc_tree(scene)
    cache = Path(SubNamespaceApi(connect(cluster), str(tmp_path)).cache)

    def stale() -> str:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"version": "v2alpha1"}))
        return str(tmp_path)

    plan = succeeded(run_plugin("import-hnc", kubeconfig=cluster.kubeconfig, KUBECACHEDIR=stale()))
    assert f"would create SubNamespace {tree.team}/{tree.dev} with labels env=dev\n" in plan
    import_hnc(cluster, "--apply")
    again = run_plugin("import-hnc", kubeconfig=cluster.kubeconfig, KUBECACHEDIR=stale())
    assert succeeded(again).startswith("nothing to do")
    assert json.loads(cache.read_text()) == {"version": "v2"}


def test_hncs_exceptions_and_tree_labels_carry_over(
    hnc_api: bool, webhooks: Webhooks, controllers: Controllers, scene: Scene, cluster: Cluster
) -> None:
    tree = hnc_tree(scene)
    not_tools = f"!{tree.tools}.tree.hnc.x-k8s.io/depth"
    scene.apply(
        _role(tree.team, "picky", annotations={"propagate.hnc.x-k8s.io/select": not_tools}),
        _role(tree.dev, "picky", labels={INHERITED_FROM: tree.team}),
        _role(tree.team, "private", annotations={"propagate.hnc.x-k8s.io/none": "True"}),
        _role(tree.team, "unsure", annotations={"propagate.hnc.x-k8s.io/none": "maybe"}),
    )

    plan = import_hnc(cluster)
    assert (
        f"would annotate Role {tree.team}/picky: {ANNOTATION_PROPAGATE}=update, "
        f"{ANNOTATION_PROPAGATE_SELECT}={not_tools}"
    ) in plan
    assert f"would annotate Role {tree.dev}/picky: {ANNOTATION_FROM}={tree.team}" in plan
    assert (
        f"would annotate Role {tree.team}/private: {ANNOTATION_PROPAGATE}=update, "
        f"{ANNOTATION_PROPAGATE_NONE}=true"
    ) in plan
    assert f"Role {tree.team}/unsure: HNC reads propagate.hnc.x-k8s.io/none='maybe'" in plan
    assert "  treeLabels:\n    suffix: tree.hnc.x-k8s.io\n" in plan
    assert "# treeLabels: HNC's tree labels (<ancestor>.tree.hnc.x-k8s.io/depth)" in plan
    config = yaml.safe_load(import_hnc(cluster, "-o", "yaml"))["config"]
    assert config["treeLabels"] == {"suffix": "tree.hnc.x-k8s.io"}

    import_hnc(cluster, "--apply")
    unsure = scene.get(_role_path(tree.team, "unsure")) or {}
    assert ANNOTATION_PROPAGATE not in unsure["metadata"].get("annotations", {})
    controllers.start(config)
    scene.settle(tree.team, tree.dev)
    scene.wait(
        lambda: _adopted(scene.get(_role_path(tree.dev, "picky"))), "HNC's copy to be taken over"
    )
    scene.wait(
        lambda: all(_adopted(scene.get(_path("Role", name))) for name in tree.below),
        "the controller to have passed over the whole tree",
    )
    assert scene.get(_role_path(tree.tools, "picky")) is None
    assert all(scene.get(_role_path(name, "private")) is None for name in tree.below)
    assert scene.labels(tree.tools)[f"{tree.dev}.tree.hnc.x-k8s.io/depth"] == "1"
    assert import_hnc(cluster, "--apply").startswith("nothing to do")


def _role(
    namespace: str,
    name: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata = {"name": name, "namespace": namespace, "labels": labels or {}}
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "Role",
        "metadata": {**metadata, "annotations": annotations or {}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }


def _role_path(namespace: str, name: str) -> str:
    return resource_path(RBAC, "v1", "roles", namespace, name)


def _sourced(kind: str, namespace: str, verbs: tuple[str, ...]) -> dict[str, Any]:
    """The source changed by a user: new content, still opted in."""
    body = _object(kind, namespace, None, verbs)
    body["metadata"]["annotations"] = {ANNOTATION_PROPAGATE: "update"}
    return body


def _adopted(copy_: dict[str, Any] | None) -> bool:
    """A copy Accurate has taken over: its own hash, HNC's label gone."""
    if copy_ is None:
        return False
    metadata = copy_["metadata"]
    return ANNOTATION_SOURCE_HASH in (metadata.get("annotations") or {}) and INHERITED_FROM not in (
        metadata.get("labels") or {}
    )


def _replaced_originals(scene: Scene, tree: HncTree) -> list[str]:
    """Warnings that an object which was not a copy got replaced: HNC's copies, handed over as
    copies, must not be taken for such objects."""
    found = []
    for name in tree.below:
        events = scene.kube.list_objects(resource_path("", "v1", "events", name))
        found += [e["message"] for e in events["items"] if e.get("reason") == "OriginalReplaced"]
    return found


def _current(copy_: dict[str, Any] | None, source: dict[str, Any] | None) -> bool:
    if copy_ is None or source is None:
        return False
    return all(copy_.get(key) == source.get(key) for key in ("rules", "data"))


@dataclass(frozen=True)
class HncRelease:
    """What of HNC's release the import looks for: its webhook configurations and its
    controller's Deployment, in a namespace of the test's own."""

    namespace: str
    validating: str
    mutating: str

    @property
    def flags(self) -> tuple[str, str]:
        return ("--hnc-namespace", self.namespace)


def hnc_release(scene: Scene, cluster: Cluster) -> HncRelease:
    """HNC's webhook configurations (narrowed to a request no test makes and failing open, so
    that they stand for HNC without getting in anyone's way) and its controller's Deployment
    (a pause container), labelled as the test's own so that the suite's clean-up takes them."""
    release = HncRelease(
        scene.namespace("hnc-system"),
        cluster.unique("hnc-validating-webhook-configuration"),
        cluster.unique("hnc-mutating-webhook-configuration"),
    )
    kube = connect(cluster)
    kube.create(WEBHOOKS, _hnc_webhooks("Validating", release.validating, cluster.own()))
    kube.create(MUTATING, _hnc_webhooks("Mutating", release.mutating, cluster.own()))
    labels = {"app": "hnc-controller-manager"}
    container = {"name": "manager", "image": "registry.k8s.io/pause:3.9"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "hnc-controller-manager", "labels": cluster.own(labels)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    kube.create(resource_path("apps", "v1", "deployments", release.namespace), deployment)
    return release


def test_nothing_is_written_while_hnc_still_runs(
    hnc_api: bool, webhooks: Webhooks, scene: Scene, cluster: Cluster
) -> None:
    tree = hnc_tree(scene)
    release = hnc_release(scene, cluster)
    before = uids_and_versions(scene, tree)

    error = failed(
        run_plugin("import-hnc", "--apply", *release.flags, kubeconfig=cluster.kubeconfig)
    )
    assert error.startswith(
        "error: --apply checks first that HNC's webhooks are gone (no validating or "
        "mutating webhook configuration holds a webhook named *.hnc.x-k8s.io): no: "
        f"ValidatingWebhookConfiguration {release.validating}, MutatingWebhookConfiguration "
        f"{release.mutating}; HNC's controller is stopped"
    )
    assert error.endswith("Nothing was written; run without --apply for the steps.\n")
    assert uids_and_versions(scene, tree) == before


def test_the_printed_steps_move_the_cluster_to_accurate_in_their_order(
    hnc_api: bool, webhooks: Webhooks, controllers: Controllers, scene: Scene, cluster: Cluster
) -> None:
    if not hnc_api:
        pytest.skip("HNC's CRDs were there before the test, and the steps delete them")
    tree = hnc_tree(scene)
    release = hnc_release(scene, cluster)
    before = uids_and_versions(scene, tree)

    preview = import_hnc(cluster, *release.flags)
    assert (
        "--apply checks first that:\n  HNC's webhooks are gone (no validating or mutating "
        "webhook configuration holds a webhook named *.hnc.x-k8s.io): no: "
        f"ValidatingWebhookConfiguration {release.validating}, MutatingWebhookConfiguration "
        f"{release.mutating}\n  HNC's controller is stopped (no Deployment in namespace "
        f"{release.namespace} has replicas): no: Deployment {release.namespace}/"
        "hnc-controller-manager\n  the SubNamespace CRD is installed (when SubNamespaces are "
        "to be made): yes\n"
    ) in preview
    config = yaml.safe_load(import_hnc(cluster, "-o", "yaml", *release.flags))["config"]
    steps = preview.split("without deleting a namespace:\n", 1)[1].splitlines()
    assert [step.split(" (")[0].split(":")[0] for step in steps] == [
        "  1. Remove HNC's webhooks",
        "  2. Stop HNC's controller",
        "  3. Install Accurate",
        f"  4. Run `kubectl accurate import-hnc --apply --hnc-namespace {release.namespace}`.",
        "  5. Wait until every SubNamespace is Ready",
        "  6. Let go of the finalizers HNC put on its anchors and HierarchyConfigurations",
        "  7. Delete HNC's CRDs",
        "  8. Delete the rest of HNC's release",
    ]
    assert "RBAC for every kind of watches (Role, RoleBinding, Secret)" in steps[2]

    for step in steps:
        if "Install Accurate" in step:
            controllers.start(config)  # the suite installed the SubNamespace CRD
            continue
        commands = re.findall(r"`([^`]+)`", step)
        assert commands, step
        for command in commands:
            _shell(cluster, command)

    assert {what: uid for what, (uid, _) in uids_and_versions(scene, tree).items()} == {
        what: uid for what, (uid, _) in before.items()
    }
    assert scene.ready(tree.team, tree.dev)
    assert all(_adopted(scene.get(_path(kind, name))) for kind in KINDS for name in tree.below)
    assert scene.ns(release.namespace) is None
    error = failed(run_plugin("import-hnc", kubeconfig=cluster.kubeconfig))
    assert error.startswith("error: the API server does not serve HNC's API")


def _shell(cluster: Cluster, command: str) -> None:
    """Run a printed command in bash as a user would, the plugin on PATH."""
    result = subprocess.run(
        ["bash", "-c", command],
        env=plugin_env(cluster.kubeconfig),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, f"{command}: {result.stderr}"


def _hnc_webhooks(kind: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    """One of HNC's webhook configurations as its release registers it (kind ``Validating`` or
    ``Mutating``), narrowed to a request no test makes and failing open."""
    hook = "objects" if kind == "Validating" else "namespacelabel"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": f"{kind}WebhookConfiguration",
        "metadata": {"name": name, "labels": labels},
        "webhooks": [
            {
                "name": f"{hook}.hnc.x-k8s.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "clientConfig": {"url": "https://127.0.0.1:9/validate-objects"},
                "rules": [
                    {
                        "apiGroups": ["hnc.x-k8s.io"],
                        "apiVersions": ["v1alpha2"],
                        "resources": ["hncconfigurations"],
                        "operations": ["CONNECT"],
                    }
                ],
            }
        ],
    }


def test_a_cluster_without_hnc_has_nothing_to_import(cluster: Cluster) -> None:
    kube = connect(cluster)
    if _served(kube, resource_path("hnc.x-k8s.io", "v1alpha2", "hierarchyconfigurations")):
        pytest.skip("this cluster serves HNC's API")

    error = failed(run_plugin("import-hnc", kubeconfig=cluster.kubeconfig))
    assert error == (
        "error: the API server does not serve HNC's API (hnc.x-k8s.io/v1alpha2): "
        "there is nothing to import\n"
    )
