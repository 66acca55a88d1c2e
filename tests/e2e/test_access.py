"""Tenant access end to end (docs/tenant-access.md): grants made with ``kubectl accurate access``,
propagated by the controller process, and used through kubectl and ``kubectl accurate sudo``,
each person with their own kubeconfig so that the API server's RBAC, impersonation and
escalation rule judge them as they would judge the real person."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.kubectl import kubectl as run_kubectl
from accurate_testbed.manifests import MANIFESTS, render
from accurate_testbed.objects import controller_stand_in
from controller.sudoers import TURN_ON
from libaccurate.access import TURN_SUDO_ON, sudo_group, sudoer_name
from libaccurate.constants import ANNOTATION_FROM, LABEL_PARENT
from libaccurate.network.kube import resource_path
from tests.e2e import test_controller_propagation as propagation
from tests.e2e.cli import failed, run_plugin, succeeded
from tests.e2e.controller import Controllers, Scene

RBAC = "rbac.authorization.k8s.io"
CONFIG: dict[str, Any] = {
    "watches": [
        {"group": RBAC, "version": "v1", "kind": "Role"},
        {"group": RBAC, "version": "v1", "kind": "RoleBinding"},
    ]
}
TENANT_ROLES = MANIFESTS / "rbac" / "tenant_access.yaml"
CONVERGE = 30.0


def rolebinding(scene: Scene, namespace: str, name: str) -> dict[str, Any] | None:
    return scene.get(resource_path(RBAC, "v1", "rolebindings", namespace, name))


def cluster_object(scene: Scene, plural: str, name: str) -> dict[str, Any] | None:
    return scene.get(resource_path(RBAC, "v1", plural, name=name))


@pytest.fixture
def tree(controllers: Controllers, scene: Scene) -> tuple[str, str, str]:
    """A controller propagating RoleBindings, the shipped tenant ClusterRoles, and
    root <- child <- grandchild."""
    (manage,) = [
        d
        for d in yaml.safe_load_all(TENANT_ROLES.read_text())
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "accurate:manage"
    ]
    if cluster_object(scene, "clusterroles", "accurate:manage") is None:
        scene.apply(scene.cluster.owned(manage))
        scene.cluster.on_cleanup(lambda: scene.kubectl("delete", "clusterrole", "accurate:manage"))
    controllers.start(CONFIG)
    return propagation.tree(scene)


def admin(scene: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    return run_plugin(*args, kubeconfig=scene.cluster.kubeconfig)


class Person:
    """Someone with their own kubeconfig (a bearer token of the in-memory server)."""

    def __init__(self, apiserver: ApiServer, scene: Scene, folder: Path, prefix: str) -> None:
        self.name = scene.name(prefix)
        apiserver.add_user(self.name)
        self.kubeconfig = apiserver.write_kubeconfig(folder / self.name, user=self.name)

    def plugin(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_plugin(*args, kubeconfig=self.kubeconfig)

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_kubectl(self.kubeconfig, *args)


@pytest.fixture
def people(apiserver: ApiServer, scene: Scene, tmp_path: Path) -> Any:
    return lambda prefix: Person(apiserver, scene, tmp_path, prefix)


def granted(scene: Scene, root: str, level: str, person: Person, namespace: str) -> None:
    """An administrator grants ``level`` in ``root``'s tree to ``person``, and the grant's
    copy has reached ``namespace`` (the person may read it there)."""
    succeeded(admin(scene, "access", "grant", root, level, person.name))
    scene.wait(
        lambda: person.kubectl("get", "namespace", namespace).returncode == 0,
        f"{person.name}'s {level} grant to reach {namespace}",
        CONVERGE,
    )


def _forget_sudo_role(scene: Scene, root: str) -> None:
    """On a real cluster, the ClusterRole a sudo grant made goes with the test."""
    scene.cluster.on_cleanup(
        lambda: scene.kubectl("delete", "clusterrole", sudo_group(root), "--ignore-not-found")
    )


def test_a_sudo_grant_lets_its_holder_act_as_admin_through_sudo_and_not_without(
    tree: tuple[str, str, str], scene: Scene, people: Any
) -> None:
    root, _, grandchild = tree
    alice, bob = people("alice"), people("bob")
    _forget_sudo_role(scene, root)

    assert succeeded(admin(scene, "access", "grant", root, "sudo", alice.name)) == (
        f"granted sudo in {root} and below to {alice.name}\n"
    )

    # No standing rights: as herself, Alice may not read the Secrets.
    refused = alice.kubectl("get", "secrets", "-n", grandchild)
    assert f'User "{alice.name}" cannot list resource "secrets"' in refused.stderr
    ran = scene.wait(
        lambda: (
            (
                r := alice.plugin("sudo", "-n", grandchild, "--", "get", "secrets", "-o", "name")
            ).returncode
            == 0
            and r
        ),
        "alice's sudo to reach the grandchild",
        CONVERGE,
    )
    group = sudo_group(root)
    assert ran.stderr == (
        f'sudo: as user "{alice.name}" with group "{group}" ({grandchild} is in tree {root})\n'
    )
    created = alice.plugin("sudo", "-n", grandchild, "--", "create", "secret", "generic", "s1")
    assert created.returncode == 0, created.stderr
    assert created.stdout == "secret/s1 created\n"
    # Her sudo group is hers to take, and nobody else's identity with it.
    as_bob = alice.kubectl(
        "get", "secrets", "-n", grandchild, f"--as={bob.name}", f"--as-group={group}"
    )
    assert (
        f'users "{bob.name}" is forbidden: User "{alice.name}" cannot impersonate' in as_bob.stderr
    )

    not_sudoer = bob.plugin("sudo", "-n", grandchild, "--", "get", "secrets")
    assert failed(not_sudoer) == (
        f"error: you ({bob.name}) are not a sudoer of the tree {grandchild} is in\n"
    )

    # A sudoer may make another, through sudo (as herself she may not even read the root). She
    # may not read the controller's Deployment nor ask RBAC about others, and her own sudo is
    # the keeper's work, so no warning is made up.
    as_admin = alice.plugin(
        "sudo", "-n", root, "--", "accurate", "access", "grant", root, "sudo", bob.name
    )
    assert as_admin.returncode == 0, as_admin.stderr
    assert as_admin.stdout == f"granted sudo in {root} and below to {bob.name}\n"
    assert as_admin.stderr == (
        f'sudo: as user "{alice.name}" with group "{group}" ({root} is in tree {root})\n'
    )


def test_revoking_sudo_takes_it_away_in_the_whole_tree(
    tree: tuple[str, str, str], scene: Scene, people: Any
) -> None:
    alice, bob = people("alice"), people("bob")
    root = tree[0]
    _forget_sudo_role(scene, root)
    succeeded(admin(scene, "access", "grant", root, "sudo", alice.name, bob.name))

    def sudo_works(person: Person, namespace: str) -> bool:
        return person.plugin("sudo", "-n", namespace, "--", "get", "secrets").returncode == 0

    for namespace in tree:
        scene.wait(lambda ns=namespace: sudo_works(alice, ns), f"sudo in {namespace}", CONVERGE)

    assert succeeded(admin(scene, "access", "revoke", root, "sudo", alice.name)) == (
        f"revoked sudo in {root} and below from {alice.name}\n"
    )
    scene.wait(
        lambda: cluster_object(scene, "clusterroles", sudoer_name(alice.name)) is None,
        "alice's sudoer ClusterRole to go",
        CONVERGE,
    )
    # The API server's RBAC follows its own watch of roles and bindings: a moment later.
    for namespace in tree:
        scene.wait(lambda ns=namespace: not sudo_works(alice, ns), f"no sudo in {namespace}")
        assert sudo_works(bob, namespace)

    succeeded(admin(scene, "access", "revoke", root, "sudo", bob.name))
    scene.wait(
        lambda: all(rolebinding(scene, ns, "accurate-access-sudo-group") is None for ns in tree),
        "the sudo group's admin binding to leave the whole tree",
        CONVERGE,
    )
    assert cluster_object(scene, "clusterroles", sudo_group(root)) is None
    scene.wait(
        lambda: cluster_object(scene, "clusterrolebindings", sudoer_name(bob.name)) is None,
        "bob's sudoer ClusterRoleBinding to go",
        CONVERGE,
    )


def test_a_manager_cannot_grant_more_than_manage(
    tree: tuple[str, str, str], scene: Scene, people: Any
) -> None:
    root, child, _ = tree
    carol, dave = people("carol"), people("dave")
    succeeded(admin(scene, "access", "grant", root, "manage", carol.name))
    scene.wait(
        lambda: (
            carol.kubectl("auth", "can-i", "create", "subnamespaces", "-n", child).stdout == "yes\n"
        ),
        "carol's manage grant to reach the child",
        CONVERGE,
    )
    assert carol.kubectl("auth", "can-i", "get", "secrets", "-n", child).stdout == "no\n"

    for level in ("admin", "edit", "view"):
        refused = failed(carol.plugin("access", "grant", root, level, carol.name))
        assert refused.startswith(
            f"error: refused: granting {level} in {root} would give more than you hold. "
            "The API server says: "
        ), refused
        assert "attempting to grant RBAC permissions not currently held" in refused
        assert rolebinding(scene, root, f"accurate-access-{level}") is None
    sudo = failed(carol.plugin("access", "grant", root, "sudo", carol.name))
    assert "would give more than you hold" in sudo
    assert rolebinding(scene, root, "accurate-access-sudo") is None
    assert cluster_object(scene, "clusterroles", sudo_group(root)) is None

    # What a manager holds, a manager may pass on.
    succeeded(carol.plugin("access", "grant", root, "manage", dave.name))
    binding = rolebinding(scene, root, "accurate-access-manage")
    assert binding is not None
    assert {s["name"] for s in binding["subjects"]} == {carol.name, dave.name}


def test_a_manager_audits_the_tree_but_cannot_ask_about_sudo(
    tree: tuple[str, str, str], scene: Scene, people: Any
) -> None:
    """access check asks RBAC in each namespace (LocalSubjectAccessReview), which a manager
    may; whether someone may sudo is a cluster-wide question, for cluster administrators."""
    root, _, grandchild = tree
    carol, erin = people("carol"), people("erin")
    succeeded(admin(scene, "access", "grant", root, "manage", carol.name))
    succeeded(admin(scene, "access", "grant", root, "view", erin.name))
    scene.wait(
        lambda: carol.kubectl("get", "namespace", grandchild).returncode == 0,
        "carol's manage grant to reach the grandchild",
        CONVERGE,
    )

    def answers() -> dict[tuple[str, str], Any]:
        found = succeeded(carol.plugin("access", "check", root, erin.name, "-o", "json"))
        return {(a["namespace"], a["capability"]): a for a in yaml.safe_load(found)}

    by_key = scene.wait(
        lambda: (found := answers())[root, "read pods"]["allowed"] and found,
        "erin's view grant to show in the check",
        CONVERGE,
    )
    assert {ns for ns, _ in by_key} == {*tree, "*"}
    assert by_key[root, "read pods"]["allowed"] is True
    assert "accurate-access-view" in by_key[root, "read pods"]["why"]
    assert by_key[root, "read secrets"]["allowed"] is False
    assert by_key["*", "sudo"] == {
        "namespace": "*",
        "capability": "sudo",
        "allowed": None,
        "why": "only cluster administrators may ask (SubjectAccessReview)",
    }
    table = succeeded(carol.plugin("access", "check", root, erin.name))
    assert "unknown" in table.splitlines()[-1]


def test_grants_are_previewed_listed_and_checked(tree: tuple[str, str, str], scene: Scene) -> None:
    """Through the admin's kubeconfig only, so that it runs on a real cluster too."""
    root, child, grandchild = tree
    erin = scene.name("erin")

    preview = succeeded(
        admin(scene, "access", "grant", root, "view", erin, "group:auditors", "--dry-run")
    )
    assert preview == (
        f"would create RoleBinding {root}/accurate-access-view (group:auditors, {erin})\n"
        "dry run: nothing was written\n"
    )
    assert rolebinding(scene, root, "accurate-access-view") is None

    succeeded(admin(scene, "access", "grant", root, "view", erin, "group:auditors"))
    again = succeeded(admin(scene, "access", "grant", root, "view", erin))
    assert again == f"nothing to do: view in {root} already includes {erin}\n"
    gone = succeeded(admin(scene, "access", "revoke", root, "edit", erin))
    assert gone == f"nothing to do: edit in {root} names none of {erin}\n"
    scene.wait(
        lambda: rolebinding(scene, grandchild, "accurate-access-view") is not None,
        "the grant's copy in the grandchild",
        CONVERGE,
    )
    copy = rolebinding(scene, child, "accurate-access-view")
    assert copy is not None
    assert copy["metadata"]["annotations"][ANNOTATION_FROM] == root

    listed = succeeded(admin(scene, "access", "list", root, "-o", "json"))
    rows = yaml.safe_load(listed)
    assert {(r["namespace"], r["subject"], r["from"]) for r in rows} == {
        (root, erin, "grant"),
        (root, "group:auditors", "grant"),
        (child, erin, f"copy of {root}/accurate-access-view"),
        (child, "group:auditors", f"copy of {root}/accurate-access-view"),
        (grandchild, erin, f"copy of {child}/accurate-access-view"),
        (grandchild, "group:auditors", f"copy of {child}/accurate-access-view"),
    }
    assert {r["level"] for r in rows} == {"view"}

    answers = yaml.safe_load(succeeded(admin(scene, "access", "check", root, erin, "-o", "json")))
    by_key = {(a["namespace"], a["capability"]): a for a in answers}
    read = by_key[grandchild, "read pods"]
    assert read["allowed"] is True
    assert "accurate-access-view" in read["why"]
    assert by_key[grandchild, "read secrets"]["allowed"] is False
    assert by_key["*", "sudo"]["allowed"] is False

    revoked = succeeded(admin(scene, "access", "revoke", root, "view", erin, "--dry-run"))
    assert revoked.splitlines()[0] == (
        f"would replace RoleBinding {root}/accurate-access-view (group:auditors)"
    )


def test_bad_grants_are_refused_with_what_is_wrong(
    tree: tuple[str, str, str], scene: Scene
) -> None:
    root, child, _ = tree
    assert failed(admin(scene, "access", "grant", child, "view", "erin")) == (
        f"error: {child} is not a root namespace: access is granted in the root of a tree "
        "(see 'kubectl accurate list')\n"
    )
    assert failed(admin(scene, "access", "grant", root, "sudo", "group:ops")).startswith(
        "error: sudo is granted to users, not groups (ops): "
    )
    assert "'owner' is not one of" in failed(
        admin(scene, "access", "grant", root, "owner", "erin"), code=2
    )
    missing = scene.name("missing")
    assert (
        failed(admin(scene, "access", "list", missing)) == f"error: namespace {missing} not found\n"
    )
    assert rolebinding(scene, root, "accurate-access-sudo") is None
    assert rolebinding(scene, child, "accurate-access-view") is None


def test_a_reader_who_is_no_sudoer_is_told_whom_to_ask(
    tree: tuple[str, str, str], scene: Scene, people: Any
) -> None:
    """Someone who may read the tree finds its root as themselves, and is refused there."""
    root, child, _ = tree
    frank = people("frank")
    granted(scene, root, "view", frank, child)
    refused = failed(frank.plugin("sudo", "-n", child, "--", "get", "pods"))
    assert refused == (
        f"error: you ({frank.name}) are not a sudoer of {root}, the root of {child}'s tree; "
        f"a cluster administrator can grant it with 'kubectl accurate access grant {root} sudo "
        f"{frank.name}', a sudoer with 'kubectl accurate sudo -n {root} -- accurate access "
        f"grant {root} sudo {frank.name}'\n"
    )
    both = failed(frank.plugin("--as", "x", "sudo", "-n", child, "--", "get", "pods"))
    assert both == "error: sudo sets --as and --as-group itself; run it without them\n"


@pytest.mark.fault_injection
def test_without_selfsubjectreview_sudo_takes_the_kubeconfigs_user(
    tree: tuple[str, str, str], scene: Scene, people: Any, apiserver: ApiServer
) -> None:
    """Servers before Kubernetes 1.28 cannot say who you are: the kubeconfig's user entry
    (named after the person here, as kubeconfigs usually are) stands in."""
    root, child, _ = tree
    grace = people("grace")
    _forget_sudo_role(scene, root)
    succeeded(admin(scene, "access", "grant", root, "sudo", grace.name))
    scene.wait(
        lambda: grace.plugin("sudo", "-n", child, "--", "get", "pods").returncode == 0,
        "grace's sudo to work",
        CONVERGE,
    )
    apiserver.fail(404, path=".*/selfsubjectreviews", times=1)
    ran = grace.plugin("sudo", "-n", child, "--", "auth", "whoami", "-o", "jsonpath={.status}")
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.startswith(f'sudo: as user "{grace.name}" with group "{sudo_group(root)}"')
    assert f'"username":"{grace.name}"' in ran.stdout
    assert sudo_group(root) in ran.stdout


def _as_installed(manifests: str, user: str) -> list[dict[str, Any]]:
    """The cluster-wide RBAC of a kustomize directory, bound to ``user`` instead of the
    controller's ServiceAccount."""
    objects = [o for o in render(MANIFESTS / manifests) if o["kind"].startswith("Cluster")]
    for binding in objects:
        if binding["kind"] == "ClusterRoleBinding":
            binding["subjects"] = [{"kind": "User", "name": user, "apiGroup": RBAC}]
    return objects


def test_without_the_keepers_rights_sudo_waits_and_the_log_says_once_what_to_install(
    controllers: Controllers, scene: Scene, people: Any, apiserver: ApiServer, tmp_path: Path
) -> None:
    """Sudo off (the base install): grants propagate but give nothing until the operator adds
    controller/config/sudo; the controller tells them so once, and goes on with its work."""
    robot = scene.name("controller")
    apiserver.add_user(robot)
    scene.apply(*_as_installed("default", robot))
    as_robot = apiserver.write_kubeconfig(tmp_path / robot, user=robot)
    running = controllers.start(CONFIG, "--kubeconfig", str(as_robot))
    root, _, grandchild = propagation.tree(scene)
    alice, bob, carol = people("alice"), people("bob"), people("carol")

    def told() -> list[dict[str, Any]]:
        return [r for r in running.records() if r["msg"] == TURN_ON]

    def copy_names(*names: str) -> bool:
        copy = rolebinding(scene, grandchild, "accurate-access-sudo")
        return copy is not None and {s["name"] for s in copy["subjects"]} == set(names)

    succeeded(admin(scene, "access", "grant", root, "sudo", alice.name))
    scene.wait(lambda: copy_names(alice.name), "the sudo grant's copy in the grandchild")
    (record,) = scene.wait(told, "the controller to say what sudo needs", CONVERGE)
    assert record["level"] == "error"
    assert record["roots"] == [root]
    assert "escalate clusterroles.rbac.authorization.k8s.io" in record["lacking"]
    # Named in the grant, but no rights to impersonate the sudo group: she is told so, and
    # what an administrator must do, rather than that she is no sudoer.
    refused = failed(alice.plugin("sudo", "-n", grandchild, "--", "get", "secrets"))
    assert refused.startswith(
        f"error: you ({alice.name}) are granted sudo in the tree of {root} (the sudo grant in "
        f"{grandchild} names you), but you may not impersonate its group {sudo_group(root)} yet"
    ), refused
    assert "sudo is off in this cluster" in refused
    assert TURN_SUDO_ON in refused
    assert "has not caught up" in refused

    # Later passes try again without saying it again. Granting more, the administrator is
    # warned: Alice, granted before, still may not impersonate the sudo group.
    more = admin(scene, "access", "grant", root, "sudo", bob.name, carol.name)
    assert more.returncode == 0, more.stderr
    assert more.stdout == f"granted sudo in {root} and below to {bob.name}, {carol.name}\n"
    assert more.stderr == (
        "warning: sudo looks off in this cluster, or the controller has not caught up: "
        f"{alice.name}, named in {root}'s sudo grant before, may still not impersonate group "
        f"{sudo_group(root)}. This grant gives nobody anything until the controller's sudo "
        "keeper has made their cluster-wide rights; if that does not happen, a cluster "
        f"administrator must turn sudo on ({TURN_SUDO_ON}).\n"
    )
    scene.wait(
        lambda: copy_names(alice.name, bob.name, carol.name), "the changed grant's copy", CONVERGE
    )
    assert len(told()) == 1
    # Carol may also read the tree, so the plugin finds its root as herself: the same answer.
    granted(scene, root, "view", carol, grandchild)
    assert failed(carol.plugin("sudo", "-n", grandchild, "--", "get", "pods")).startswith(
        f"error: you ({carol.name}) are granted sudo in the tree of {root} (the sudo grant in "
        f"{grandchild} names you), but you may not impersonate"
    )
    assert cluster_object(scene, "clusterroles", sudoer_name(alice.name)) is None

    scene.apply(*_as_installed("sudo", robot))
    scene.wait(
        lambda: alice.plugin("sudo", "-n", grandchild, "--", "get", "secrets").returncode == 0,
        "alice's sudo once the keeper may work",
        CONVERGE,
    )
    assert cluster_object(scene, "clusterrolebindings", sudoer_name(bob.name)) is not None


def test_a_manager_is_told_that_moves_need_a_cluster_administrator(
    tree: tuple[str, str, str], scene: Scene, people: Any
) -> None:
    """accurate:manage cannot change namespaces (their labels carry Pod Security levels), so
    moving or cutting a sub-namespace is refused before anything is written, saying why."""
    root, child, grandchild = tree
    carol = people("carol")
    granted(scene, root, "manage", carol, grandchild)
    for args in (("move", grandchild, root), ("cut", grandchild)):
        refused = failed(carol.plugin("sub", *args))
        assert refused.startswith(
            f"error: only a cluster administrator may change the labels of namespace {grandchild}"
        ), refused
        assert "Pod Security levels" in refused
        assert "see docs/tenant-access.md" in refused
        assert f'User "{carol.name}" cannot patch resource "namespaces"' in refused
    assert scene.labels(grandchild)[LABEL_PARENT] == child
    assert scene.sub(child, grandchild) is not None
    assert scene.sub(root, grandchild) is None


def test_granting_sudo_warns_when_the_controllers_account_lacks_the_keepers_rights(
    tree: tuple[str, str, str], scene: Scene, people: Any
) -> None:
    """The administrator granting sudo is told when the controller's ServiceAccount (named
    by its Deployment in --accurate-namespace) may not keep the sudoers' RBAC; the grant is
    still written."""
    root = tree[0]
    alice, bob = people("alice"), people("bob")
    _forget_sudo_role(scene, root)
    home = scene.namespace("accurate")
    account = "accurate-controller-manager"
    manager = {"name": "manager", "image": "accurate:test"}
    scene.apply(controller_stand_in(home, {"serviceAccountName": account, "containers": [manager]}))

    def grant(person: Person) -> subprocess.CompletedProcess[str]:
        return admin(
            scene, "access", "grant", root, "sudo", person.name, "--accurate-namespace", home
        )

    warned = grant(alice)
    assert warned.returncode == 0, warned.stderr
    assert warned.stdout == f"granted sudo in {root} and below to {alice.name}\n"
    assert warned.stderr == (
        f"warning: sudo looks off in this cluster: the controller's ServiceAccount "
        f"{home}/{account} may not list, create, update, delete, escalate, bind "
        "clusterroles.rbac.authorization.k8s.io; list, create, update, delete "
        "clusterrolebindings.rbac.authorization.k8s.io. Until a cluster administrator turns "
        f"sudo on ({TURN_SUDO_ON}), this grant gives nobody anything.\n"
    )
    assert rolebinding(scene, root, "accurate-access-sudo") is not None

    keeper = [scene.cluster.owned(o) for o in _as_installed("sudo", account)]
    name = scene.name("sudoer-keeper")
    for obj in keeper:
        obj["metadata"] = {**obj["metadata"], "name": name}
        if obj["kind"] == "ClusterRoleBinding":
            obj["roleRef"] = {**obj["roleRef"], "name": name}
            obj["subjects"] = [{"kind": "ServiceAccount", "name": account, "namespace": home}]
    scene.apply(*keeper)
    scene.cluster.on_cleanup(
        lambda: scene.kubectl("delete", "clusterrole,clusterrolebinding", name)
    )
    assert succeeded(grant(bob)) == f"granted sudo in {root} and below to {bob.name}\n"
