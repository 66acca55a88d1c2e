"""Contract: RBAC as users meet it through kubectl (``--as``, ``--as-group``, a limited user's
kubeconfig) and as the controller's self-check meets it (SelfSubjectAccessReview).

Users are impersonated from the admin kubeconfig, which works the same on a real cluster; only
the tests that need a user with their own credentials use the in-memory server's ``add_user``.
Grants are awaited with deadlines, since a real API server applies RBAC changes asynchronously.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from accurate_testbed.tests.helpers import error_of
from accurate_testbed.tests.test_kubectl import kubectl
from accurate_testbed.waiting import CONTROLLER_TIMEOUT, wait_for
from libaccurate.network.kube import ApiError, ConnectionOptions, Kube

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")

REVIEWS = "/apis/authorization.k8s.io/v1"


def as_user(
    kubeconfig: Path, user: str, *args: str, groups: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """kubectl impersonating ``user`` (and ``groups``); failures are the test's to judge."""
    flags = ["--as", user, *(f"--as-group={group}" for group in groups)]
    return kubectl(kubeconfig, *args, *flags, check=False)


def allowed(kubeconfig: Path, user: str, *args: str, groups: tuple[str, ...] = ()) -> bool:
    return as_user(kubeconfig, user, *args, groups=groups).returncode == 0


def apply(cluster: Cluster, kubeconfig: Path, *objects: dict[str, Any]) -> None:
    """Create objects as the admin; cluster-scoped ones carry the test's labels, which has them
    deleted after the test (or, should the run be killed, by the next run)."""
    labelled = [obj if "namespace" in obj["metadata"] else cluster.owned(obj) for obj in objects]
    kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(labelled))


def cluster_role(name: str, rules: list[dict[str, Any]], **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels},
        "rules": rules,
    }


def binding(
    name: str, role_kind: str, role: str, subjects: list[dict[str, str]], namespace: str = ""
) -> dict[str, Any]:
    """A RoleBinding in ``namespace``, or a ClusterRoleBinding without one."""
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    }


def user(name: str) -> dict[str, str]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}


def rule(resources: list[str], verbs: list[str], **extra: list[str]) -> dict[str, Any]:
    return {"apiGroups": extra.pop("groups", [""]), "resources": resources, "verbs": verbs, **extra}


def forbidden_line(what: str, user_name: str, verb: str, resource: str, scope: str) -> str:
    return (
        f'Error from server (Forbidden): {what} is forbidden: User "{user_name}" cannot {verb} '
        f'resource "{resource}" in API group "" {scope}'
    )


def test_a_user_without_grants_is_refused_with_the_real_messages(
    cluster: Cluster, kubeconfig: Path
) -> None:
    alice, ns = cluster.unique("alice"), cluster.namespace()
    listed = as_user(kubeconfig, alice, "get", "namespaces")
    assert listed.returncode == 1
    assert listed.stderr.strip() == forbidden_line(
        "namespaces", alice, "list", "namespaces", "at the cluster scope"
    )
    got = as_user(kubeconfig, alice, "get", "secret", "x", "-n", ns)
    assert got.stderr.strip() == forbidden_line(
        'secrets "x"', alice, "get", "secrets", f'in the namespace "{ns}"'
    )
    created = as_user(kubeconfig, alice, "create", "configmap", "c", "-n", ns)
    assert created.stderr.strip() == (
        f'error: failed to create configmap: configmaps is forbidden: User "{alice}" cannot '
        f'create resource "configmaps" in API group "" in the namespace "{ns}"'
    )
    path = as_user(kubeconfig, alice, "get", "--raw", "/metrics")
    assert path.stderr.strip() == (
        f'Error from server (Forbidden): forbidden: User "{alice}" cannot get path "/metrics"'
    )
    assert "configmaps" in as_user(kubeconfig, alice, "api-resources").stdout  # discovery


def test_forbidden_status_names_the_object(cluster: Cluster, kubeconfig: Path) -> None:
    alice, ns = cluster.unique("alice"), cluster.namespace()
    with k8s_config.new_client_from_config(config_file=str(kubeconfig)) as api_client:
        api_client.set_default_header("Impersonate-User", alice)
        core: Any = k8s_client.CoreV1Api(api_client)
        with pytest.raises(k8s_client.ApiException) as read:
            core.read_namespaced_secret("x", ns)
        with pytest.raises(k8s_client.ApiException) as watched:
            core.list_namespaced_config_map(ns, watch=True, _preload_content=False)
    status = error_of(read.value)
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["details"] == {"name": "x", "kind": "secrets"}
    assert error_of(watched.value)["message"] == (
        f'configmaps is forbidden: User "{alice}" cannot watch resource "configmaps" in API '
        f'group "" in the namespace "{ns}"'
    )


def test_a_role_binding_grants_exactly_its_role(cluster: Cluster, kubeconfig: Path) -> None:
    alice, ns, other = cluster.unique("alice"), cluster.namespace(), cluster.namespace()
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "reader", "namespace": ns},
        "rules": [
            rule(["configmaps"], ["get", "list"]),
            rule(["secrets"], ["get"], resourceNames=["s1"]),
        ],
    }
    apply(cluster, kubeconfig, role, binding("reader", "Role", "reader", [user(alice)], ns))
    wait_for(lambda: allowed(kubeconfig, alice, "get", "cm", "-n", ns), what="the grant")
    assert not allowed(kubeconfig, alice, "get", "cm", "-n", other)
    assert not allowed(kubeconfig, alice, "create", "cm", "c", "-n", ns)
    named = as_user(kubeconfig, alice, "get", "secret", "s1", "-n", ns)
    assert named.stderr.strip() == 'Error from server (NotFound): secrets "s1" not found'
    assert "Forbidden" in as_user(kubeconfig, alice, "get", "secret", "s2", "-n", ns).stderr
    assert "Forbidden" in as_user(kubeconfig, alice, "get", "secrets", "-n", ns).stderr


def test_groups_and_service_accounts_are_subjects(cluster: Cluster, kubeconfig: Path) -> None:
    alice, team, ns = cluster.unique("alice"), cluster.unique("team"), cluster.namespace()
    robot = f"system:serviceaccount:{ns}:robot"
    subjects = [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team},
        {"kind": "ServiceAccount", "name": "robot"},  # the binding's namespace is implied
    ]
    apply(cluster, kubeconfig, binding("viewers", "ClusterRole", "view", subjects, ns))
    wait_for(
        lambda: allowed(kubeconfig, alice, "get", "cm", "-n", ns, groups=(team,)),
        what="the group grant",
    )
    assert not allowed(kubeconfig, alice, "get", "cm", "-n", ns)
    assert allowed(kubeconfig, robot, "get", "cm", "-n", ns)
    assert not allowed(kubeconfig, robot, "create", "cm", "c", "-n", ns)


def test_a_binding_to_a_missing_role_says_so(cluster: Cluster, kubeconfig: Path) -> None:
    alice, ns, missing = cluster.unique("alice"), cluster.namespace(), cluster.unique("missing")
    apply(cluster, kubeconfig, binding("broken", "ClusterRole", missing, [user(alice)], ns))

    def refusal() -> str:
        return as_user(kubeconfig, alice, "get", "cm", "-n", ns).stderr.strip()

    expected = (
        forbidden_line("configmaps", alice, "list", "configmaps", f'in the namespace "{ns}"')
        + f': RBAC: clusterrole.rbac.authorization.k8s.io "{missing}" not found'
    )
    assert wait_for(lambda: refusal() == expected, what=expected)


def test_kubectl_auth_can_i(cluster: Cluster, kubeconfig: Path) -> None:
    alice, ns = cluster.unique("alice"), cluster.namespace()
    before = as_user(kubeconfig, alice, "auth", "can-i", "list", "configmaps", "-n", ns)
    assert (before.returncode, before.stdout) == (1, "no\n")
    apply(cluster, kubeconfig, binding("editors", "ClusterRole", "edit", [user(alice)], ns))
    wait_for(
        lambda: (
            as_user(kubeconfig, alice, "auth", "can-i", "list", "cm", "-n", ns).stdout == "yes\n"
        ),
        what="can-i yes",
    )
    assert as_user(kubeconfig, alice, "auth", "can-i", "create", "secrets", "-n", ns).stdout == (
        "yes\n"
    )
    assert as_user(kubeconfig, alice, "auth", "can-i", "list", "namespaces").stdout == "no\n"
    assert kubectl(kubeconfig, "auth", "can-i", "*", "*").stdout == "yes\n"
    rows = as_user(kubeconfig, alice, "auth", "can-i", "--list", "-n", ns).stdout.splitlines()
    assert rows[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    row = next(row.split() for row in rows if row.split()[0] == "configmaps")
    assert row[:3] == ["configmaps", "[]", "[]"]
    assert {"create", "delete", "get", "list", "patch", "update", "watch"} <= {
        verb.strip("[]") for verb in row[3:]
    }


def test_a_namespaced_grant_on_namespaces_reaches_only_that_namespace(
    cluster: Cluster, kubeconfig: Path
) -> None:
    """kube-apiserver's RequestInfoFactory files a request for one namespace object under that
    namespace, so a RoleBinding there (to ``view``, which may get and list namespaces) allows
    getting it; a list of namespaces is at the cluster scope, where the binding does not reach."""
    alice, ns, other = cluster.unique("alice"), cluster.namespace(), cluster.namespace()
    apply(cluster, kubeconfig, binding("viewers", "ClusterRole", "view", [user(alice)], ns))
    wait_for(lambda: allowed(kubeconfig, alice, "get", "namespace", ns), what="the grant")
    assert as_user(kubeconfig, alice, "get", "namespace", other).stderr.strip() == (
        forbidden_line(
            f'namespaces "{other}"', alice, "get", "namespaces", f'in the namespace "{other}"'
        )
    )
    assert as_user(kubeconfig, alice, "get", "namespaces").stderr.strip() == forbidden_line(
        "namespaces", alice, "list", "namespaces", "at the cluster scope"
    )
    selected = as_user(
        kubeconfig, alice, "get", "namespaces", f"--field-selector=metadata.name={ns}"
    )
    assert "at the cluster scope" in selected.stderr


def crd(plural: str) -> dict[str, Any]:
    """A namespaced kind of group rbac-test.example.com that only the admin may use at first."""
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.rbac-test.example.com"},
        "spec": {
            "group": "rbac-test.example.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
        },
    }


def test_aggregate_to_admin_roles_reach_namespace_admins(
    cluster: Cluster, kubeconfig: Path
) -> None:
    alice, ns = cluster.unique("alice"), cluster.namespace()
    plural = cluster.unique("widgets").replace("-", "")
    apply(cluster, kubeconfig, crd(plural))
    kubectl(
        kubeconfig, "wait", "--for=condition=Established", f"crd/{plural}.rbac-test.example.com"
    )
    extra = cluster_role(
        cluster.unique("widget-admin"),
        [rule([plural], ["get", "list"], groups=["rbac-test.example.com"])],
        **{"rbac.authorization.k8s.io/aggregate-to-admin": "true"},
    )
    apply(cluster, kubeconfig, binding("admins", "ClusterRole", "admin", [user(alice)], ns))
    wait_for(lambda: allowed(kubeconfig, alice, "get", "cm", "-n", ns), what="the admin grant")
    refused = as_user(kubeconfig, alice, "get", plural, "-n", ns)
    assert f'cannot list resource "{plural}" in API group "rbac-test.example.com"' in refused.stderr
    apply(cluster, kubeconfig, extra)
    wait_for(
        lambda: allowed(kubeconfig, alice, "get", plural, "-n", ns),
        CONTROLLER_TIMEOUT,
        "the aggregation controller to add the rule",
    )
    admin = yaml.safe_load(kubectl(kubeconfig, "get", "clusterrole", "admin", "-o", "yaml").stdout)
    assert extra["rules"][0] in admin["rules"]
    assert as_user(kubeconfig, alice, "auth", "can-i", "delete", plural, "-n", ns).stdout == "no\n"
    kubectl(kubeconfig, "delete", "clusterrole", extra["metadata"]["name"])
    wait_for(
        lambda: not allowed(kubeconfig, alice, "get", plural, "-n", ns),
        CONTROLLER_TIMEOUT,
        "the aggregation controller to drop the rule",
    )


def test_users_cannot_grant_what_they_do_not_hold(cluster: Cluster, kubeconfig: Path) -> None:
    alice, ns = cluster.unique("alice"), cluster.namespace()
    apply(cluster, kubeconfig, binding("admins", "ClusterRole", "admin", [user(alice)], ns))
    wait_for(
        lambda: allowed(kubeconfig, alice, "auth", "can-i", "create", "rolebindings", "-n", ns),
        what="the admin grant",
    )
    held = as_user(
        kubeconfig,
        alice,
        "create",
        "rolebinding",
        "viewers",
        "--clusterrole=view",
        "-n",
        ns,
        "--user=bob",
    )
    assert held.returncode == 0, held.stderr
    refused = as_user(
        kubeconfig,
        alice,
        "create",
        "rolebinding",
        "root",
        "--clusterrole=cluster-admin",
        f"--user={alice}",
        "-n",
        ns,
    )
    assert refused.stderr.strip() == (
        'error: failed to create rolebinding: rolebindings.rbac.authorization.k8s.io "root" is '
        f'forbidden: user "{alice}" (groups=["system:authenticated"]) is attempting to grant '
        "RBAC permissions not currently held:\n"
        '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n'
        '{NonResourceURLs:["*"], Verbs:["*"]}'
    )
    role = as_user(
        kubeconfig,
        alice,
        "create",
        "role",
        "deleter",
        "--verb=delete,get",
        "--resource=namespaces",
        "-n",
        ns,
    )
    assert role.stderr.strip().endswith(
        "is attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["namespaces"], Verbs:["delete"]}'
    )
    deleter = cluster.unique("ns-deleter")
    binder = cluster.unique("binder")
    apply(
        cluster,
        kubeconfig,
        cluster_role(deleter, [rule(["namespaces"], ["delete"])]),
        cluster_role(
            binder,
            [
                rule(
                    ["clusterroles"],
                    ["bind"],
                    groups=["rbac.authorization.k8s.io"],
                    resourceNames=[deleter],
                )
            ],
        ),
    )
    bind = ("create", "rolebinding", "deleters", f"--clusterrole={deleter}", "--user=bob", "-n", ns)
    assert "attempting to grant" in as_user(kubeconfig, alice, *bind).stderr
    apply(cluster, kubeconfig, binding("binders", "ClusterRole", binder, [user(alice)], ns))
    wait_for(lambda: allowed(kubeconfig, alice, *bind), what="bind to allow the binding")


def test_an_apply_that_creates_needs_create(cluster: Cluster, kubeconfig: Path) -> None:
    alice, ns = cluster.unique("alice"), cluster.namespace()
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "patcher", "namespace": ns},
        "rules": [rule(["configmaps"], ["get", "patch"])],
    }
    apply(cluster, kubeconfig, role, binding("patcher", "Role", "patcher", [user(alice)], ns))
    wait_for(lambda: allowed(kubeconfig, alice, "auth", "can-i", "patch", "cm", "-n", ns))
    manifest = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cfg, namespace: {ns}}}\n"
    flags = ("--server-side", "--force-conflicts", "-f", "-", "--as", alice)
    refused = kubectl(kubeconfig, "apply", *flags, stdin=manifest, check=False)
    assert refused.stderr.startswith(
        'Error from server (Forbidden): configmaps "cfg" is forbidden:'
    )
    assert kubectl(kubeconfig, "get", "cm", "-n", ns, "-o", "name").stdout == ""
    kubectl(kubeconfig, "create", "configmap", "cfg", "-n", ns)
    applied = kubectl(kubeconfig, "apply", *flags, stdin=manifest)
    assert applied.stdout == "configmap/cfg serverside-applied\n"


def test_self_subject_access_review_like_the_controller(cluster: Cluster, kubeconfig: Path) -> None:
    alice = cluster.unique("alice")
    kube = Kube.connect(ConnectionOptions(kubeconfig=str(kubeconfig), impersonate=alice))

    def review(verb: str, resource: str = "configmaps") -> dict[str, Any]:
        attributes = {"verb": verb, "resource": resource, "group": ""}
        body = {"spec": {"resourceAttributes": attributes}}
        return dict(kube.create(f"{REVIEWS}/selfsubjectaccessreviews", body)["status"])

    verbs = ("get", "list", "watch", "create", "update", "patch", "delete")
    assert [review(verb) for verb in verbs] == [{"allowed": False}] * len(verbs)
    role, name = cluster.unique("cm-operator"), cluster.unique("alice-cm")
    apply(
        cluster,
        kubeconfig,
        cluster_role(role, [rule(["configmaps"], list(verbs))]),
        binding(name, "ClusterRole", role, [user(alice)]),
    )
    reason = (
        f'RBAC: allowed by ClusterRoleBinding "{name}" of ClusterRole "{role}" to User "{alice}"'
    )
    wait_for(lambda: review("get")["allowed"], what="the grant")
    assert [review(verb) for verb in verbs] == [{"allowed": True, "reason": reason}] * len(verbs)
    assert review("get", "secrets") == {"allowed": False}
    discovery = {"spec": {"nonResourceAttributes": {"verb": "get", "path": "/apis"}}}
    status = kube.create(f"{REVIEWS}/selfsubjectaccessreviews", discovery)["status"]
    assert status["allowed"] is True
    assert status["reason"].startswith("RBAC: allowed by ClusterRoleBinding ")
    with pytest.raises(ApiError) as caught:
        kube.create(f"{REVIEWS}/selfsubjectaccessreviews", {"spec": {}})
    assert caught.value.message == (
        'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
        "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be "
        "specified"
    )


def test_subject_access_reviews_ask_about_others(cluster: Cluster, kubeconfig: Path) -> None:
    alice, team, ns = cluster.unique("alice"), cluster.unique("team"), cluster.namespace()
    group = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team}
    apply(cluster, kubeconfig, binding("team-view", "ClusterRole", "view", [group], ns))
    admin = Kube.connect(ConnectionOptions(kubeconfig=str(kubeconfig)))
    attributes = {"verb": "list", "resource": "configmaps", "namespace": ns}

    def review(**subject: Any) -> dict[str, Any]:
        body = {"spec": {"resourceAttributes": attributes, **subject}}
        return dict(admin.create(f"{REVIEWS}/subjectaccessreviews", body)["status"])

    expected = (
        f'RBAC: allowed by RoleBinding "team-view/{ns}" of ClusterRole "view" to Group "{team}"'
    )
    wait_for(lambda: review(user=alice, groups=[team]).get("reason") == expected, what=expected)
    assert review(user=alice) == {"allowed": False}  # no groups are added to the one asked about
    local = {
        "spec": {"resourceAttributes": {**attributes, "namespace": "elsewhere"}, "user": alice}
    }
    with pytest.raises(ApiError) as caught:
        admin.create(f"{REVIEWS}/namespaces/{ns}/localsubjectaccessreviews", local)
    assert (caught.value.code, caught.value.message) == (
        400,
        f"spec.resourceAttributes.namespace must match namespace: {ns}",
    )


def test_impersonation_needs_its_own_permission(
    cluster: Cluster, apiserver: ApiServer, tmp_path: Path
) -> None:
    apiserver.add_user("alice")
    alice = apiserver.write_kubeconfig(tmp_path / "alice", "alice")

    def list_namespaces(*flags: str) -> str:
        """The outcome, by ``get --raw``: kubectl's discovery, which would impersonate too,
        reports its own failures depending on its cache."""
        result = kubectl(alice, "get", "--raw", "/api/v1/namespaces", *flags, check=False)
        return result.stderr.strip()

    assert list_namespaces("--as", "bob") == (
        'Error from server (Forbidden): users "bob" is forbidden: User "alice" cannot impersonate '
        'resource "users" in API group "" at the cluster scope'
    )
    apply(
        cluster,
        cluster.kubeconfig,
        cluster_role("bob-impersonator", [rule(["users"], ["impersonate"], resourceNames=["bob"])]),
        binding("alice-as-bob", "ClusterRole", "bob-impersonator", [user("alice")]),
    )
    assert list_namespaces("--as", "bob") == forbidden_line(
        "namespaces", "bob", "list", "namespaces", "at the cluster scope"
    )
    assert 'users "carol" is forbidden: User "alice"' in list_namespaces("--as", "carol")
    assert list_namespaces("--as", "bob", "--as-group", "admins") == (
        'Error from server (Forbidden): groups "admins" is forbidden: User "alice" cannot '
        'impersonate resource "groups" in API group "" at the cluster scope'
    )


def test_a_limited_users_own_kubeconfig(
    cluster: Cluster, apiserver: ApiServer, tmp_path: Path
) -> None:
    ns = cluster.namespace()
    apiserver.add_user("alice", ["devs"])
    alice = apiserver.write_kubeconfig(tmp_path / "alice", "alice")
    assert kubectl(alice, "auth", "can-i", "list", "cm", "-n", ns, check=False).stdout == "no\n"
    group = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}
    apply(cluster, cluster.kubeconfig, binding("devs", "ClusterRole", "edit", [group], ns))
    kubectl(alice, "create", "configmap", "mine", "-n", ns)
    assert kubectl(alice, "get", "cm", "mine", "-n", ns, "-o", "name").stdout == (
        "configmap/mine\n"
    )
    document = yaml.safe_load(alice.read_text())
    document["users"][0]["user"]["token"] = "not-a-token"
    (tmp_path / "stranger").write_text(yaml.safe_dump(document))
    stranger = kubectl(tmp_path / "stranger", "get", "cm", "-n", ns, check=False)
    assert stranger.stderr.strip() == "error: You must be logged in to the server (Unauthorized)"


def test_whoami_names_the_caller_as_authenticated_or_impersonated(
    cluster: Cluster, kubeconfig: Path, apiserver: ApiServer, tmp_path: Path
) -> None:
    """SelfSubjectReview (authentication.k8s.io/v1), through ``kubectl auth whoami``: the user
    and groups the server took the request for, system:authenticated included."""
    apiserver.add_user("alice", ["devs"])
    alice = apiserver.write_kubeconfig(tmp_path / "alice", "alice")
    review = json.loads(kubectl(alice, "auth", "whoami", "-o", "json").stdout)
    assert review["apiVersion"] == "authentication.k8s.io/v1"
    assert review["kind"] == "SelfSubjectReview"
    assert review["status"] == {
        "userInfo": {"username": "alice", "groups": ["devs", "system:authenticated"]}
    }
    impersonated = as_user(kubeconfig, "bob", "auth", "whoami", groups=("ops",))
    assert impersonated.stdout.split() == [
        "ATTRIBUTE", "VALUE", "Username", "bob", "Groups", "[ops", "system:authenticated]"
    ]  # fmt: skip


def test_a_percent_escaped_name_addresses_the_same_object(cluster: Cluster) -> None:
    """RBAC names often hold colons; clients may escape them (Go decodes the path first)."""
    kube = Kube.connect(ConnectionOptions(kubeconfig=str(cluster.kubeconfig)))
    escaped = kube.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Abasic-user")
    plain = kube.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/system:basic-user")
    assert escaped["metadata"]["name"] == plain["metadata"]["name"] == "system:basic-user"
