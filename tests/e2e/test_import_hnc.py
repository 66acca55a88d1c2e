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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from accurate_testbed.cluster import Cluster
from accurate_testbed.manifests import CRDS
from accurate_testbed.waiting import wait_for
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
from tests.e2e.cli import failed, run_plugin, succeeded
from tests.e2e.controller import Controllers, Scene
from tests.e2e.webhooks import Webhooks, connect

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


@pytest.fixture
def hnc_api(cluster: Cluster) -> None:
    """HNC's CRDs, installed unless the cluster has them, and served."""
    kube = connect(cluster)
    for crd in yaml.safe_load_all(HNC_CRDS.read_text()):
        path = f"{CRDS}/{crd['metadata']['name']}"
        if kube.find(path) is None:
            kube.create(CRDS, cluster.owned(crd))
            cluster.on_cleanup(functools.partial(_remove_crd, kube, path))
    listing = resource_path("hnc.x-k8s.io", "v1alpha2", "hierarchicalresourcequotas")
    wait_for(lambda: _served(kube, listing), 30, "HNC's CRDs to be served")


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
    """The tree, its copies and HNC's config, as HNC would have left them."""
    tree = HncTree(scene.name("team"), scene.name("dev"), scene.name("tools"))
    chain = (tree.team, tree.dev, tree.tools)
    namespaces = []
    for depth, name in enumerate(chain):
        labels = {
            f"{above}.tree.hnc.x-k8s.io/depth": str(depth - i)
            for i, above in enumerate(chain[: depth + 1])
        }
        annotations = {"hnc.x-k8s.io/subnamespace-of": tree.team} if name == tree.dev else {}
        if name != tree.team:
            labels["env"] = "dev"
        metadata = {"name": name, "labels": scene.cluster.own(labels), "annotations": annotations}
        namespaces.append({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
    scene.apply(*namespaces)
    scene.cluster.on_cleanup(lambda: _release_anchors(scene, tree))
    scene.apply(
        _hierarchy(tree.team, None),
        _hierarchy(tree.dev, tree.team),
        _hierarchy(tree.tools, tree.dev),
        {
            "apiVersion": HNC,
            "kind": "SubnamespaceAnchor",
            "metadata": {"name": tree.dev, "namespace": tree.team, "finalizers": ["hnc.x-k8s.io"]},
            "spec": {"labels": [{"key": "env", "value": "dev"}]},
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
        scene.cluster.on_cleanup(lambda: scene.kube.delete(_hnc_config_path()))
    for name in chain:
        origin = None if name == tree.team else tree.team
        scene.apply(*(_object(kind, name, origin) for kind in KINDS))
    return tree


def _hierarchy(namespace: str, parent: str | None) -> dict[str, Any]:
    return {
        "apiVersion": HNC,
        "kind": "HierarchyConfiguration",
        "metadata": {"name": "hierarchy", "namespace": namespace},
        "spec": {"parent": parent} if parent else {},
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
    if scene.get(path) is not None:
        scene.kube.patch(path, {"metadata": {"finalizers": None}})


def _remove_crd(kube: Kube, path: str) -> None:
    """Delete one of HNC's CRDs and wait until it is gone: the next test installs it afresh, and
    a CRD still being deleted would be taken for installed."""
    kube.delete(path)
    wait_for(lambda: kube.find(path) is None, 120, f"deletion of {path}")


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
    hnc_api: None, webhooks: Webhooks, controllers: Controllers, scene: Scene, cluster: Cluster
) -> None:
    tree = hnc_tree(scene)
    before = uids_and_versions(scene, tree)

    plan = import_hnc(cluster)
    assert f"would label namespace {tree.team}: set {LABEL_TYPE}=root" in plan
    assert f"would create SubNamespace {tree.team}/{tree.dev} with labels env=dev" in plan
    assert f"HierarchicalResourceQuota {tree.team}/pods: Accurate has no quota" in plan
    assert "Remove HNC's webhooks" not in plan
    assert uids_and_versions(scene, tree) == before
    config = yaml.safe_load(import_hnc(cluster, "-o", "yaml"))["config"]
    assert {"version": "v1", "kind": "Secret", "group": ""} in config["watches"]
    assert config["subNamespaceLabelKeys"] == ["env"]

    applied = import_hnc(cluster, "--apply")
    assert applied.startswith("imported: ")
    assert "Start Accurate's controller" in applied
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


def test_hncs_exceptions_and_tree_labels_carry_over(
    hnc_api: None, webhooks: Webhooks, controllers: Controllers, scene: Scene, cluster: Cluster
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


def test_nothing_is_written_while_hnc_still_runs(
    hnc_api: None, webhooks: Webhooks, scene: Scene, cluster: Cluster
) -> None:
    tree = hnc_tree(scene)
    name = cluster.unique("hnc-validating-webhook-configuration")
    kube = connect(cluster)
    # Labelled as the test's own, so the suite's clean-up takes it away with the rest.
    kube.create(WEBHOOKS, _hnc_webhook_configuration(name, cluster.own()))
    before = uids_and_versions(scene, tree)

    error = failed(run_plugin("import-hnc", "--apply", kubeconfig=cluster.kubeconfig))
    assert error.startswith(f"error: HNC still runs (ValidatingWebhookConfiguration {name})")
    assert "Nothing was written" in error
    assert uids_and_versions(scene, tree) == before
    plan = import_hnc(cluster)
    assert (
        f"Remove HNC's webhooks first (kubectl delete validatingwebhookconfiguration {name})"
        in plan
    )


def _hnc_webhook_configuration(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """HNC's object webhook as its release registers it, narrowed to a request no test makes
    and failing open, so that it stands for HNC without getting in anyone's way."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": labels},
        "webhooks": [
            {
                "name": "objects.hnc.x-k8s.io",
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
