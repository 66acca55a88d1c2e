"""Starting ``accurate-controller`` (ACCEPTANCE I.4): what it checks before doing anything, and
how it says what is wrong: one line on stderr, exit status 1 (2 for a bad command line)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from accurate_testbed.processes import PROGRAM, environment
from libaccurate import __version__
from libaccurate.network.kube import resource_path
from tests.e2e.controller import Controllers, Scene


def refused(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The one-line complaint of a controller that would not start."""
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


def test_version() -> None:
    result = subprocess.run(
        [str(PROGRAM), "--version"], capture_output=True, text=True, env=environment(), check=True
    )
    assert result.stdout.strip() == f"accurate-controller {__version__}"


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ("labelKeys: [accurate.cybozu.com/type]\n", "labelKeys"),
        ("annotationKeys: ['a[']\n", "annotationKeys"),
        ("watchez: []\n", "watchez"),
        (
            "watches: [{group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole}]\n",
            "ClusterRole",
        ),
        ("watches: [{version: v1, kind: Gizmo}]\n", "Gizmo"),
        ("namingPolicies: [{root: '(', match: x}]\n", "namingPolicies[0]"),
    ],
)
def test_a_bad_config_stops_it(controllers: Controllers, config: str, named: str) -> None:
    message = refused(controllers.run(config, "--no-leader-election"))
    assert named in message
    assert "config-" in message  # the file is named


def test_a_missing_config_file_is_named(controllers: Controllers, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    result = controllers.run("", "--no-leader-election", "--config-file", str(missing))
    assert str(missing) in refused(result)


def test_leader_election_needs_its_namespace(controllers: Controllers) -> None:
    message = refused(controllers.run(""))
    assert "POD_NAMESPACE" in message
    assert "--no-leader-election" in message


@pytest.mark.parametrize(
    "flags",
    [
        ("--feature-gates", "NoSuchGate=true"),
        ("--feature-gates", "DisablePropagateGenerated=maybe"),
        ("--resync-period", "soon"),
        ("--workers", "0"),
        ("--apiserver-qps-throttle", "-1"),
        ("--metrics-addr", "localhost"),
        ("--log-format", "xml"),
        ("--zap-log-level", "verbose"),
        ("--no-such-flag", "1"),
    ],
)
def test_bad_flags_are_usage_errors(controllers: Controllers, flags: tuple[str, str]) -> None:
    message = refused(controllers.run("", "--no-leader-election", *flags), code=2)
    assert flags[0] in message


def test_without_the_crd_it_says_to_install_it(cluster: Cluster, tmp_path: Path) -> None:
    if cluster.is_real:
        pytest.skip("the CRD may be installed on a real cluster")
    message = refused(Controllers(cluster, tmp_path).run("", "--no-leader-election"))
    assert "subnamespaces.accurate.cybozu.com" in message


def test_an_unreachable_api_server_is_named(controllers: Controllers, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "elsewhere"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: x, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: x, context: {cluster: x, user: x}}]\nusers: [{name: x, user: {}}]\n"
    )
    result = controllers.run("", "--no-leader-election", "--kubeconfig", str(kubeconfig))
    assert "127.0.0.1:9" in refused(result)


def _robot(apiserver: ApiServer, scene: Scene, folder: Path, rules: list[dict[str, Any]]) -> Path:
    """A kubeconfig for a new user that holds ``rules`` cluster-wide and nothing else."""
    user = scene.name("robot")
    apiserver.add_user(user)
    rbac = "rbac.authorization.k8s.io"
    scene.kube.create(
        resource_path(rbac, "v1", "clusterroles"),
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": user},
            "rules": rules,
        },
    )
    scene.kube.create(
        resource_path(rbac, "v1", "clusterrolebindings"),
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": user},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": user},
            "subjects": [{"kind": "User", "name": user, "apiGroup": rbac}],
        },
    )
    return apiserver.write_kubeconfig(folder / user, user=user)


ROLES_ONLY = "watches: [{group: rbac.authorization.k8s.io, version: v1, kind: Role}]\n"


@pytest.mark.fault_injection
def test_missing_permissions_are_each_named(
    controllers: Controllers, apiserver: ApiServer, scene: Scene, tmp_path: Path
) -> None:
    rules = [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch", "create"]},
        {"apiGroups": ["accurate.cybozu.com"], "resources": ["subnamespaces"], "verbs": ["*"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["list"]},
    ]
    kubeconfig = _robot(apiserver, scene, tmp_path, rules)
    lease = scene.namespace("lease")
    result = controllers.run(
        ROLES_ONLY, "--kubeconfig", str(kubeconfig), env={"POD_NAMESPACE": lease}
    )
    message = refused(result)
    assert "patch, delete namespaces" in message
    assert "patch subnamespaces.accurate.cybozu.com/status" in message
    assert "watch roles.rbac.authorization.k8s.io" in message
    assert "create, patch events" in message


@pytest.mark.fault_injection
def test_a_missing_write_on_a_watched_kind_is_a_warning(
    controllers: Controllers, apiserver: ApiServer, scene: Scene, tmp_path: Path
) -> None:
    """As with the Go chart's default rule for ResourceQuotas (no update): the controller
    starts, as the Go controller would, and names what will not work."""
    writes = ["get", "list", "watch", "create", "patch", "delete"]
    rules = [
        {
            "apiGroups": ["", "accurate.cybozu.com", "events.k8s.io"],
            "resources": ["*"],
            "verbs": ["*"],
        },
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["*"],
            "verbs": ["get", "list"],
        },
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": writes},
    ]
    kubeconfig = _robot(apiserver, scene, tmp_path, rules)

    running = controllers.start(ROLES_ONLY, "--kubeconfig", str(kubeconfig))

    assert (
        "the controller's account may not update roles.rbac.authorization.k8s.io: "
        "propagation of Role fails where it needs them"
    ) in running.output()


def test_a_key_a_tenant_can_override_is_named_once_at_start_up(controllers: Controllers) -> None:
    """Issue 27 point 1: a key matching both labelKeys and subNamespaceLabelKeys takes the
    tenant's SubNamespace value; the controller starts, and its log says so once."""
    config = (
        "labelKeys: [team, 'pod-security.kubernetes.io/*']\n"
        "subNamespaceLabelKeys: ['*/enforce', app]\n"
        "annotationKeys: [owner]\n"
        "subNamespaceAnnotationKeys: [note]\n"
    )
    running = controllers.start(config)
    # The config's own words: both patterns, and the key both select.
    said = [line for line in running.output().splitlines() if "overlap" in line]
    assert len(said) == 1, said
    assert "labelKeys 'pod-security.kubernetes.io/*'" in said[0]
    assert "subNamespaceLabelKeys '*/enforce'" in said[0]
    assert "'pod-security.kubernetes.io/enforce'" in said[0]
    assert "the value in a tenant's SubNamespace wins over the inherited one" in said[0]
    assert '"level":"warning"' in said[0].replace(" ", "").lower() or "WARNING" in said[0]
    assert "annotationKeys" not in said[0]
