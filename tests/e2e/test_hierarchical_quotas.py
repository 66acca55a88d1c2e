"""Hierarchical resource quotas end to end (issue 28): the controller keeps the ResourceQuotas and
statuses, its webhook refuses what would take a tree over its HRQ, and the real kubectl shows it
to a tenant (a RoleBinding to ``admin`` in their root, copied down) and to an administrator.

The HRQ CRD is installed before the controller starts (it looks for it at start-up), and the
quota webhook is registered from controller/config/quota as a real install would have it.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme

from accurate_testbed.certificates import write_serving_pair
from accurate_testbed.cluster import RUN_LABEL, Cluster
from accurate_testbed.kubectl import kubectl
from accurate_testbed.manifests import MANIFESTS, render
from accurate_testbed.processes import Process, free_port
from accurate_testbed.waiting import wait_for
from libaccurate import quota
from libaccurate.constants import LABEL_PARENT, LABEL_TYPE
from libaccurate.network.kube import resource_path
from tests.e2e.cli import (
    install_cluster_roles,
    install_subnamespace_roles,
    run_plugin,
    tenant_grant,
)
from tests.e2e.controller import Controllers, Scene
from tests.e2e.webhooks import REGISTRATION_TIMEOUT, connect, register_webhooks

RBAC = "rbac.authorization.k8s.io"
CONFIG = {"watches": [{"group": RBAC, "version": "v1", "kind": "RoleBinding"}]}
CRDS = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
WEBHOOK = "hrq.quota.accurate.cybozu.com"


@pytest.fixture
def hrq_crd(cluster: Cluster) -> None:
    """The HRQ CRD from controller/config/quota, unless the cluster has it; served."""
    kube = connect(cluster)
    if kube.find(f"{CRDS}/{quota.CRD_NAME}") is None:
        (crd,) = [o for o in render(MANIFESTS / "quota") if o["kind"] == "CustomResourceDefinition"]
        crd["metadata"].setdefault("labels", {})[RUN_LABEL] = cluster.run
        kube.create(CRDS, crd)
    listing = resource_path(quota.GROUP, quota.VERSION, quota.PLURAL)
    wait_for(lambda: kube.find(listing) is not None, REGISTRATION_TIMEOUT, "the HRQ CRD")


@dataclass
class Team:
    """A controller with hierarchical quotas on, its webhooks registered, and a tenant who
    holds ``admin`` in ``root`` (and, by propagation, below it)."""

    scene: Scene
    controllers: Controllers
    flags: tuple[str, ...]
    controller: Process
    user: str
    root: str

    def restart(self) -> None:
        """Kill the controller (no clean shutdown) and start it again, same address."""
        self.controller.kill()
        self.controller = self.controllers.start(CONFIG, *self.flags)

    def as_tenant(self, *args: str, stdin: Any = None) -> subprocess.CompletedProcess[str]:
        return kubectl(self.scene.cluster.kubeconfig, *args, "--as", self.user, stdin=stdin)

    def hrq(self, namespace: str, name: str, scope: Any = None, **hard: str) -> None:
        """As the administrator: an HRQ with these limits (``requests_cpu`` for requests.cpu)."""
        spec: dict[str, Any] = {"hard": {k.replace("_", "."): v for k, v in hard.items()}}
        if scope is not None:
            spec["scopeSelector"] = scope
        self.scene.apply(
            {
                "apiVersion": quota.API_VERSION,
                "kind": quota.KIND,
                "metadata": {"name": name, "namespace": namespace},
                "spec": spec,
            }
        )

    def status(self, namespace: str, name: str) -> dict[str, Any]:
        path = resource_path(quota.GROUP, quota.VERSION, quota.PLURAL, namespace, name)
        return dict((self.scene.get(path) or {}).get("status") or {})

    def wait_used(self, namespace: str, name: str, **used: str) -> None:
        wanted = {k.replace("_", "."): v for k, v in used.items()}
        self.scene.wait(
            lambda: self.status(namespace, name).get("used") == wanted,
            f"HRQ {namespace}/{name} to say it uses {wanted}",
        )

    def counted(self, hrq: tuple[str, str], *namespaces: str) -> None:
        """Wait until kube-apiserver counts each of ``namespaces`` for the HRQ: a ResourceQuota
        the controller keeps there (the HRQ's own, or that of an HRQ above that serves it)
        counts the same objects and has a status for every resource the HRQ limits."""
        path = resource_path(quota.GROUP, quota.VERSION, quota.PLURAL, hrq[0], hrq[1])
        spec = (self.scene.get(path) or {}).get("spec") or {}
        resources, scope = set(spec.get("hard") or {}), quota.scope_key(spec.get("scopeSelector"))

        def counts(quota_object: dict[str, Any]) -> bool:
            status = quota_object.get("status") or {}
            return quota.counted_quota(quota_object).scope == scope and resources <= (
                set(status.get("hard") or {}) & set(status.get("used") or {})
            )

        for namespace in namespaces:
            listing = resource_path("", "v1", "resourcequotas", namespace)
            self.scene.wait(
                lambda listing=listing: any(
                    counts(q)
                    for q in self.scene.kube.list_objects(
                        listing, labelSelector=quota.LABEL_HRQ_NAMESPACE
                    )["items"]
                ),
                f"namespace {namespace} to be counted for {hrq[0]}/{hrq[1]}",
            )

    def tree(self, name: str, *prefixes: str, scope: Any = None, **hard: str) -> list[str]:
        """An HRQ ``name`` in the root and sub-namespaces of the root, all counted for it; the
        sub-namespaces' names."""
        self.hrq(self.root, name, scope, **hard)
        subs = [self.sub(self.root, prefix) for prefix in prefixes]
        self.counted((self.root, name), self.root, *subs)
        return subs

    def sub(self, parent: str, prefix: str) -> str:
        name = self.scene.subnamespace(parent, prefix)
        self.scene.settle(parent, name)
        self.scene.wait(lambda: self._granted(name), f"the tenant's rights in {name}")
        return name

    def _granted(self, namespace: str) -> bool:
        asked = ("auth", "can-i", "create", "pods", "-n", namespace, "--as", self.user)
        return kubectl(self.scene.cluster.kubeconfig, *asked).stdout.strip() == "yes"

    def _reads_hrqs(self, namespace: str) -> bool:
        asked = ("auth", "can-i", "list", quota.CRD_NAME, "-n", namespace, "--as", self.user)
        return kubectl(self.scene.cluster.kubeconfig, *asked).stdout.strip() == "yes"

    def busy_root(self) -> str:
        """A root of its own, under an HRQ of 5 pods that counts the one running there: a
        namespace to move into a full subtree."""
        other = self.scene.root("other")
        self.hrq(other, "own", pods="5")
        self.counted((other, "own"), other)
        self.scene.kubectl("run", self.scene.name("busy"), "--image=nginx", "-n", other)
        self.wait_used(other, "own", pods="1")
        return other

    def kept(self, namespace: str) -> set[str]:
        """The names of the ResourceQuotas the controller keeps in ``namespace``."""
        listing = resource_path("", "v1", "resourcequotas", namespace)
        items = self.scene.kube.list_objects(listing, labelSelector=quota.LABEL_HRQ_NAMESPACE)
        return {item["metadata"]["name"] for item in items["items"]}

    def pod(self, namespace: str, prefix: str = "web", cpu: str | None = None) -> Any:
        """The tenant creates a pod; kubectl's result."""
        container: dict[str, Any] = {"name": "web", "image": "nginx"}
        if cpu is not None:
            container["resources"] = {"requests": {"cpu": cpu}}
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.scene.name(prefix), "namespace": namespace},
            "spec": {"containers": [container]},
        }
        return self.as_tenant("create", "-f", "-", stdin=manifest)


@pytest.fixture
def team(
    controllers: Controllers,
    shared_controller: Callable[..., Process],
    scene: Scene,
    hrq_crd: None,
    webhook_ca: trustme.CA,
    module_serving: tuple[str, ...],
) -> Team:
    """The controller is the module's shared one (started by its first test, after the CRD);
    the tenant and their root are the test's own."""
    flags = module_serving
    running = shared_controller(CONFIG, *flags)
    url = f"https://{flags[1]}"
    register_webhooks(scene.cluster, url, webhook_ca)
    register_webhooks(scene.cluster, url, webhook_ca, "quota")
    install_subnamespace_roles(scene.cluster, scene.kube)
    tenant_roles = [
        o
        for o in render(MANIFESTS / "quota")
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] != "accurate-hrq-keeper"
    ]
    install_cluster_roles(scene.cluster, scene.kube, tenant_roles)
    user = scene.name("alice")
    root = scene.root("team")
    scene.apply(tenant_grant(root, user))
    made = Team(scene, controllers, flags, running, user, root)
    scene.wait(lambda: made._granted(root), "the tenant's rights in the root")
    scene.wait(lambda: made._reads_hrqs(root), "the tenant's right to read HRQs")
    return made


def refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 1, result.stdout
    assert f'admission webhook "{WEBHOOK}" denied the request: exceeded hierarchical quota' in (
        result.stderr
    ), result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def created(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr


def test_a_pod_is_refused_in_the_third_sub_namespace_once_the_roots_hrq_is_spent(
    team: Team,
) -> None:
    root = team.root
    first, second, third = team.tree("compute", "a", "b", "c", pods="2")

    created(team.pod(first))
    created(team.pod(second))
    refused(
        team.pod(third),
        f"{root}/compute",
        "requested: pods=1, used: pods=2, limited: pods=2",
    )
    team.wait_used(root, "compute", pods="2")
    listed = team.as_tenant("get", "hrq", "-n", root)
    assert listed.returncode == 0, listed.stderr
    assert "pods: 2/2" in listed.stdout
    counting = quota.quota_name((root, "compute"))
    for attempt in (
        ("delete", "resourcequota", counting, "-n", third),
        (
            "patch",
            "hrq",
            "compute",
            "-n",
            root,
            "--type=merge",
            "-p",
            '{"spec":{"hard":{"pods":"9"}}}',
        ),
    ):
        forbidden = team.as_tenant(*attempt)
        assert forbidden.returncode == 1
        assert "Error from server (Forbidden)" in forbidden.stderr, forbidden.stderr


def test_usage_is_released_when_a_namespace_is_moved_out_or_its_pods_deleted(
    team: Team,
) -> None:
    root = team.root
    moving, staying = team.tree("compute", "moving", "staying", pods="2")
    created(team.pod(moving))
    created(team.pod(staying, "one"))
    refused(team.pod(staying, "two"), "used: pods=2")

    other = team.scene.root("elsewhere")
    team.scene.kubectl("label", "namespace", moving, f"{LABEL_PARENT}={other}", "--overwrite")
    team.wait_used(root, "compute", pods="1")
    created(team.pod(staying, "two"))
    team.scene.kubectl("delete", "pod", "-n", staying, team.scene.name("two"), "--wait=false")
    team.wait_used(root, "compute", pods="1")


def test_concurrent_creates_in_sibling_namespaces_against_the_last_unit(team: Team) -> None:
    """Eight creates at once, two in each of four siblings: exactly one gets the last unit."""
    root = team.root
    siblings = team.tree("compute", *(f"s{i}" for i in range(4)), pods="1")
    results: list[subprocess.CompletedProcess[str]] = []
    lock = threading.Lock()

    def create(namespace: str, prefix: str) -> None:
        result = team.pod(namespace, prefix)
        with lock:
            results.append(result)

    threads = [
        threading.Thread(target=create, args=(namespace, f"race{i}"))
        for i in range(2)
        for namespace in siblings
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.returncode for r in results) == [0] + [1] * 7, [r.stderr for r in results]
    team.wait_used(root, "compute", pods="1")


def test_sub_create_stops_at_the_sub_namespace_cap_with_the_hrqs_message(team: Team) -> None:
    root = team.root
    (first,) = team.tree("tree", "a", **{"count/subnamespaces.accurate.cybozu.com": "2"})
    grandchild = team.scene.name("aa")
    done = run_plugin(
        "sub",
        "create",
        grandchild,
        first,
        "--as",
        team.user,
        kubeconfig=team.scene.cluster.kubeconfig,
    )
    assert done.returncode == 0, done.stderr
    team.scene.settle(first, grandchild)
    third = run_plugin(
        "sub",
        "create",
        team.scene.name("b"),
        root,
        "--as",
        team.user,
        kubeconfig=team.scene.cluster.kubeconfig,
    )
    assert third.returncode == 1
    assert f"exceeded hierarchical quota: {root}/tree" in third.stderr, third.stderr
    assert "used: count/subnamespaces.accurate.cybozu.com=2" in third.stderr


def test_decimal_quantities_and_nested_hrqs_two_deep(team: Team) -> None:
    root = team.root
    middle = team.sub(root, "org")
    leaf = team.sub(middle, "app")
    team.hrq(root, "cpu", requests_cpu="1.5")
    team.hrq(middle, "cpu", requests_cpu="1")
    team.counted((root, "cpu"), root, middle, leaf)
    team.counted((middle, "cpu"), middle, leaf)

    created(team.pod(leaf, "a", cpu="500m"))
    created(team.pod(middle, "b", cpu="0.5"))
    refused(team.pod(leaf, "c", cpu="100m"), f"{middle}/cpu", "limited: requests.cpu=1")
    created(team.pod(root, "d", cpu="250m"))
    refused(team.pod(root, "e", cpu="0.3"), f"{root}/cpu", "limited: requests.cpu=1500m")
    team.wait_used(root, "cpu", requests_cpu="1250m")
    team.wait_used(middle, "cpu", requests_cpu="1")
    middle_status = team.status(middle, "cpu")
    limited = {c["type"]: c for c in middle_status.get("conditions") or []}
    assert limited["LimitedAbove"]["status"] == "False"
    without = team.pod(leaf, "f")
    assert without.returncode == 1
    assert "must specify requests.cpu" in without.stderr, without.stderr
    assert f"hrq.{middle}.cpu" in without.stderr or f"hrq.{root}.cpu" in without.stderr


def test_one_quota_counts_for_nested_hrqs_and_a_move_from_under_one_keeps_the_other_true(
    team: Team,
) -> None:
    """Two HRQs on one chain that limit the same resources: each namespace below both keeps one
    ResourceQuota, the nearer HRQ's, which counts for both. A namespace moved out from under
    the nearer one but still under the other is counted for the other all along: its pod still
    takes the root's last unit."""
    root = team.root
    middle = team.sub(root, "org")
    leaf, side = team.sub(middle, "app"), team.sub(root, "side")
    team.hrq(root, "compute", pods="3")
    team.hrq(middle, "team", pods="5")
    team.counted((root, "compute"), root, middle, leaf, side)
    team.counted((middle, "team"), middle, leaf)
    served = quota.quota_name((middle, "team"))
    team.scene.wait(lambda: team.kept(leaf) == {served}, f"{leaf} to keep only {served}")

    created(team.pod(leaf, "one"))
    team.wait_used(root, "compute", pods="1")
    team.wait_used(middle, "team", pods="1")

    team.scene.kubectl("label", "namespace", leaf, f"{LABEL_PARENT}={side}", "--overwrite")
    own = quota.quota_name((root, "compute"))
    team.scene.wait(lambda: team.kept(leaf) == {own}, f"{leaf} to keep only {own}")
    team.wait_used(middle, "team", pods="0")
    team.wait_used(root, "compute", pods="1")
    created(team.pod(side, "two"))
    created(team.pod(middle, "three"))
    refused(team.pod(side, "four"), f"{root}/compute", "used: pods=3, limited: pods=3")


def test_a_move_into_a_full_subtree_is_refused_with_nothing_written(team: Team) -> None:
    scene = team.scene
    (full,) = team.tree("compute", "full", pods="2")
    created(team.pod(full, "one"))
    created(team.pod(full, "two"))
    other = team.busy_root()
    before = (scene.ns(other) or {})["metadata"]["resourceVersion"]

    moved = kubectl(
        scene.cluster.kubeconfig,
        "label",
        "namespace",
        other,
        f"{LABEL_PARENT}={full}",
        f"{LABEL_TYPE}-",
    )
    assert moved.returncode == 1
    assert 'admission webhook "vnamespace.accurate.cybozu.com" denied the request' in (moved.stderr)
    assert f"namespace {other} cannot move under {full}: exceeded hierarchical quota: " in (
        moved.stderr
    )
    assert "requested: pods=1, used: pods=2, limited: pods=2" in moved.stderr
    assert (scene.ns(other) or {})["metadata"]["resourceVersion"] == before


def test_usage_is_released_when_a_namespace_is_deleted(team: Team) -> None:
    root, scene = team.root, team.scene
    (leaving,) = team.tree("compute", "leaving", pods="3")
    created(team.pod(leaving, "one"))
    created(team.pod(root, "two"))
    team.wait_used(root, "compute", pods="2")
    scene.kubectl("delete", "subnamespace", leaving, "-n", root, "--wait=false")
    scene.wait_gone(leaving)
    team.wait_used(root, "compute", pods="1")


def test_a_namespace_holding_an_hrq_is_deleted_with_it(team: Team) -> None:
    """The namespace controller deletes the HRQ, the quotas kept for it and for the root's HRQ,
    and the pod, each through the webhooks; nothing is refused and the root's usage is given
    back."""
    root, scene = team.root, team.scene
    (org,) = team.tree("compute", "org", pods="3")
    team.hrq(org, "local", pods="1")
    team.counted((org, "local"), org)
    created(team.pod(org, "one"))
    created(team.pod(root, "two"))
    team.wait_used(root, "compute", pods="2")
    team.wait_used(org, "local", pods="1")

    scene.kubectl("delete", "subnamespace", org, "-n", root, "--wait=false")
    scene.wait_gone(org)
    team.wait_used(root, "compute", pods="1")


def test_a_scoped_hrq_counts_only_what_its_scopes_select(team: Team) -> None:
    root = team.root
    best_effort = {"matchExpressions": [{"scopeName": "BestEffort", "operator": "Exists"}]}
    (child,) = team.tree("best-effort", "child", scope=best_effort, pods="1")
    created(team.pod(child, "free"))
    refused(team.pod(root, "more"), f"{root}/best-effort", "limited: pods=1")
    created(team.pod(root, "sized", cpu="100m"))
    team.wait_used(root, "best-effort", pods="1")


def test_a_restarted_controller_keeps_the_sums_right(team: Team) -> None:
    root = team.root
    first, second = team.tree("compute", "a", "b", pods="3")
    created(team.pod(first, "one"))
    created(team.pod(second, "two"))
    team.wait_used(root, "compute", pods="2")
    team.restart()
    third = team.sub(root, "c")
    team.counted((root, "compute"), third)
    team.wait_used(root, "compute", pods="2")
    created(team.pod(third, "three"))
    refused(team.pod(first, "four"), "used: pods=3, limited: pods=3")
    team.wait_used(root, "compute", pods="3")


def test_an_hrq_lowered_below_usage_refuses_new_use_and_reports_the_excess(team: Team) -> None:
    root, scene = team.root, team.scene
    (child,) = team.tree("compute", "child", pods="3")
    created(team.pod(child, "one"))
    created(team.pod(root, "two"))
    team.hrq(root, "compute", pods="1")

    def exceeded() -> dict[str, Any] | None:
        conditions = team.status(root, "compute").get("conditions") or []
        found = next((c for c in conditions if c["type"] == "Exceeded"), None)
        return found if found and found["status"] == "True" else None

    condition = scene.wait(exceeded, "the HRQ to say it is over its limit")
    assert "pods used 2 of 1" in condition["message"]
    refused(team.pod(child, "three"), "used: pods=2, limited: pods=1")
    events = scene.kubectl("get", "events", "-n", root, "-o", "json")
    assert any(
        e.get("reason") == "QuotaExceeded" and e["involvedObject"].get("name") == "compute"
        for e in json.loads(events)["items"]
    )
    pods = team.as_tenant("get", "pods", "-n", child, "-o", "name")
    assert pods.stdout.strip() == f"pod/{scene.name('one')}"


def test_a_resource_taken_out_of_an_hrq_leaves_its_status(team: Team) -> None:
    """An administrator who stops limiting a resource sees it gone from the HRQ's numbers,
    tenant and administrator alike (the controller writes the status as a merge patch, which
    keeps whatever it does not name)."""
    root = team.root
    team.tree("compute", pods="3", services="2")
    team.scene.wait(
        lambda: set(team.status(root, "compute").get("used") or {}) == {"pods", "services"},
        "the HRQ to show pods and services",
    )
    team.hrq(root, "compute", pods="3")
    team.scene.wait(
        lambda: (
            team.status(root, "compute").get("hard") == {"pods": "3"}
            and set(team.status(root, "compute").get("used") or {}) == {"pods"}
        ),
        "services to leave the HRQ's status",
    )
    shown = team.as_tenant("get", "hrq", "compute", "-n", root, "-o", "json")
    assert json.loads(shown.stdout)["status"]["summary"] == "pods: 0/3"


def _review(url: str, ca: trustme.CA, namespace: str) -> dict[str, Any]:
    """POST a status update of a quota kept for an HRQ, as kube-apiserver's quota admission
    sends it, straight to one replica's webhook; the review's response."""
    labels = {quota.LABEL_HRQ_NAMESPACE: namespace}
    annotations = {quota.ANNOTATION_HRQ: f"{namespace}/compute"}
    metadata = {"name": "hrq.x.compute", "namespace": namespace, "labels": labels}
    old = {"metadata": {**metadata, "annotations": annotations}, "status": {"used": {"pods": "0"}}}
    new = {**old, "status": {"used": {"pods": "1"}}}
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "probe",
            "kind": {"group": "", "version": "v1", "kind": "ResourceQuota"},
            "operation": "UPDATE",
            "userInfo": {"username": "system:apiserver"},
            "object": new,
            "oldObject": old,
        },
    }
    context = ssl.create_default_context()
    ca.configure_trust(context)
    request = urllib.request.Request(
        url + "/validate-v1-resourcequota-status",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return dict(json.load(answer)["response"])


def test_of_two_replicas_exactly_the_quota_lease_holder_decides(
    controllers: Controllers,
    scene: Scene,
    hrq_crd: None,
    webhook_ca: trustme.CA,
    tmp_path: Path,
) -> None:
    lease = scene.namespace("lease")
    cert_dir = tmp_path / "serving-certs"
    write_serving_pair(webhook_ca, cert_dir)
    ports = [free_port(), free_port()]
    replicas = [
        controllers.start(
            CONFIG,
            "--webhook-addr",
            f"127.0.0.1:{port}",
            "--cert-dir",
            str(cert_dir),
            lease_namespace=lease,
        )
        for port in ports
    ]
    namespace = scene.namespace("probe")

    def deciding() -> list[bool]:
        answers = [_review(f"https://127.0.0.1:{p}", webhook_ca, namespace) for p in ports]
        for answer in answers:
            if not answer["allowed"]:
                assert answer["status"]["code"] == 500
                assert "does not decide hierarchical quotas now" in answer["status"]["message"]
        return [answer["allowed"] for answer in answers]

    scene.wait(lambda: sorted(deciding()) == [False, True], "one replica to hold the quota Lease")
    holder = deciding().index(True)
    replicas[holder].kill()
    other = 1 - holder
    scene.wait(
        lambda: _review(f"https://127.0.0.1:{ports[other]}", webhook_ca, namespace)["allowed"],
        "the other replica to take the quota Lease over",
    )


def test_sub_graft_into_a_full_subtree_is_refused_before_anything_is_written(team: Team) -> None:
    """The administrator's ``kubectl accurate sub graft`` meets the namespace webhook's quota
    check in its dry run, and writes nothing."""
    scene = team.scene
    (full,) = team.tree("compute", "full", pods="1")
    created(team.pod(full, "one"))
    other = team.busy_root()
    before = (scene.ns(other) or {})["metadata"]["resourceVersion"]

    grafted = run_plugin("sub", "graft", other, full, kubeconfig=scene.cluster.kubeconfig)

    assert grafted.returncode != 0, grafted.stdout
    assert f"namespace {other} cannot move under {full}" in grafted.stderr, grafted.stderr
    assert "requested: pods=1, used: pods=1, limited: pods=1" in grafted.stderr
    assert (scene.ns(other) or {})["metadata"]["resourceVersion"] == before


def test_pods_spammed_into_a_sub_namespace_being_made_are_all_charged(team: Team) -> None:
    """The tenant makes a sub-namespace under a root whose HRQ is spent while four kubectl
    loops, started just before, try to create pods there: their rights there come only with
    the copied RoleBinding, which waits until the namespace's ResourceQuota counts, so no pod
    gets in uncharged (none at all: the tree has no room), and the SubNamespace becomes Ready.
    Without the hold about half the runs let a pod in."""
    root = team.root
    team.tree("compute", pods="2")
    created(team.pod(root, "one"))
    created(team.pod(root, "two"))
    sub = team.scene.name("burst")
    results: list[subprocess.CompletedProcess[str]] = []
    lock = threading.Lock()
    done = threading.Event()

    def spam(prefix: str) -> None:
        for attempt in range(200):
            if done.is_set():
                return
            result = team.pod(sub, f"{prefix}-{attempt}")
            with lock:
                results.append(result)

    def full() -> bool:
        ready = team.scene.condition(root, sub, "Ready") or {}
        with lock:
            return ready.get("status") == "True" and any(
                f'admission webhook "{WEBHOOK}" denied' in r.stderr for r in results
            )

    threads = [threading.Thread(target=spam, args=(f"p{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    try:
        made = run_plugin(
            "sub", "create", sub, root, "--as", team.user, kubeconfig=team.scene.cluster.kubeconfig
        )
        assert made.returncode == 0, made.stderr
        team.scene.wait(full, "the sub-namespace Ready and its pods refused by the HRQ")
    finally:
        done.set()
        for thread in threads:
            thread.join()

    passed = [r for r in results if r.returncode == 0]
    assert passed == [], [r.stdout for r in passed]
    for result in results:
        if result.returncode != 0:
            # Before the RoleBinding: no rights at all; after it: the HRQ's refusal. Never
            # kube-apiserver's "status unknown for quota", and never a pod that got in uncharged.
            assert "Error from server (Forbidden)" in result.stderr, result.stderr
            assert "status unknown for quota" not in result.stderr, result.stderr
    assert team.scene.kubectl("get", "pods", "-n", sub, "-o", "name").split() == []
    team.scene.wait(
        lambda: (
            team.status(root, "compute").get("used") == {"pods": "2"}
            and all(
                c["status"] == "True"
                for c in team.status(root, "compute").get("conditions") or ()
                if c["type"] == quota.CONDITION_COUNTED
            )
        ),
        "the HRQ to count the sub-namespace too",
    )
    assert team.status(root, "compute")["summary"] == "pods: 2/2"
