"""The deploy manifests under controller/config, rendered with ``kubectl kustomize``.

They must be objects the API server accepts, and they must fit the code: the webhook paths the
server serves, the Service and ports the webhooks reach, the certificate the controller loads,
the permissions the controller checks for at startup (controller.selfcheck) and the example
config the controller loads.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from accurate_testbed.manifests import MANIFESTS, render
from accurate_testbed.waiting import wait_for
from controller import options, quotas, selfcheck, sudoers
from controller.health import parse_addr
from controller.quota_authority import LABEL_AUTHORITY
from controller.webhook import (
    CONVERT_PATH,
    MUTATE_SUBNAMESPACE_PATH,
    PATHS,
    VALIDATE_NAMESPACE_PATH,
    VALIDATE_QUOTA_STATUS_PATH,
    VALIDATE_SUBNAMESPACE_PATH,
)
from libaccurate import quota as quota_rules
from libaccurate.config import Config, WatchedResource, parse_config, resolve_watches
from libaccurate.constants import (
    GROUP,
    LEGACY_VERSIONS,
    STORAGE_VERSION,
    SUBNAMESPACE_CRD_NAME,
    SUBNAMESPACE_PLURAL,
)
from libaccurate.network.kube import ConnectionOptions, Kube
from scripts import render_manifests
from tests.e2e.webhooks import connect, kubectl

DIRECTORIES = sorted(path.parent for path in MANIFESTS.glob("*/kustomization.yaml"))
# The CRD and RBAC files not rendered from the chart: an example of what the controller needs
# for the kinds of the example config's watches, which the chart takes from its values
# (controller.additionalRBAC) rather than from a template.
HAND_WRITTEN_RBAC = {MANIFESTS / "rbac" / "additional_resources.yaml"}
# The Secret the Go Accurate's chart and manifests keep the serving certificate in.
GO_SECRET = "webhook-server-cert"
# The directories that install everything; the others are their parts.
CERT_MANAGER = "cert-manager.io/v1"
_ACCURATE_KEY = 'k.startsWith("accurate.cybozu.com/")'


def match_expression(key: str) -> str:
    """The namespace hook sees only namespaces whose old or new labels have a key for which
    the CEL ``key`` holds; object is null on DELETE and oldObject on CREATE."""
    labelled = f".metadata.?labels.orValue({{}}).exists(k, {key})"
    return f"(object != null && object{labelled}) || (oldObject != null && oldObject{labelled})"


# The directories that install everything (the others are their parts), with the namespace
# hook's matchConditions: accurate.cybozu.com/ keys, also */depth keys (tree labels of any
# suffix) in tree-labels, none for clusters before 1.28.
INSTALLS = {
    "default": [match_expression(_ACCURATE_KEY)],
    "tree-labels": [match_expression(f'{_ACCURATE_KEY} || k.endsWith("/depth")')],
    "without-match-conditions": [],
}
# What the controller may do beyond what selfcheck asks for at startup: reads the webhooks and
# kubectl users expect, finalizer and status updates, the access review itself, and what
# copying Roles and RoleBindings takes (see rbac/manager_role.yaml).
EXTRA_CLUSTER_VERBS = {
    ("", "namespaces"): {"get", "update"},
    (GROUP, SUBNAMESPACE_PLURAL): {"get", "update"},
    (GROUP, f"{SUBNAMESPACE_PLURAL}/status"): {"get", "update"},
    (GROUP, f"{SUBNAMESPACE_PLURAL}/finalizers"): {"update"},
    ("authorization.k8s.io", "selfsubjectaccessreviews"): {"create"},
    ("rbac.authorization.k8s.io", "roles"): {"get", "escalate", "bind"},
    ("rbac.authorization.k8s.io", "rolebindings"): {"get"},
    # To copy RoleBindings to ClusterRoles. The sudoer keeper's rights are not here: they come
    # only with controller/config/sudo.
    ("rbac.authorization.k8s.io", "clusterroles"): {"bind"},
    ("", "secrets"): {"get"},
}


class Manifests:
    """One rendering, looked up by kind and name."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [obj for obj in self.objects if obj["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [obj for obj in self.all(kind) if name in (None, obj["metadata"]["name"])]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
        return found[0]

    def webhooks(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for configuration in self.all(kind):
                for webhook in configuration["webhooks"]:
                    yield kind, webhook

    def webhook(self, path: str) -> tuple[str, dict[str, Any]]:
        (found,) = [
            (k, w) for k, w in self.webhooks() if w["clientConfig"]["service"]["path"] == path
        ]
        return found

    @property
    def container(self) -> dict[str, Any]:
        (container,) = self.one("Deployment")["spec"]["template"]["spec"]["containers"]
        return dict(container)

    def volume_at(self, path: str) -> dict[str, Any]:
        """The pod volume the container mounts at ``path``."""
        (mount,) = [m for m in self.container["volumeMounts"] if m["mountPath"] == path]
        volumes = self.one("Deployment")["spec"]["template"]["spec"]["volumes"]
        (volume,) = [v for v in volumes if v["name"] == mount["name"]]
        return dict(volume)

    @property
    def command_line(self) -> options.Options:
        """The controller's command line as the controller itself parses it."""
        return options.parse(self.container["args"])


QUOTA = Manifests(render(MANIFESTS / "quota"))


@pytest.fixture(scope="module", params=sorted(INSTALLS))
def install(request: pytest.FixtureRequest) -> Manifests:
    return Manifests(render(MANIFESTS / request.param))


def _namespaced(objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """The objects moved into ``namespace``, so that a dry run does not need (or touch) the
    real `accurate` namespace; kinds this cluster does not serve (cert-manager's) are left out."""
    moved = []
    for obj in copy.deepcopy(objects):
        if obj["apiVersion"] == CERT_MANAGER or obj["kind"] == "Namespace":
            continue
        if "namespace" in obj["metadata"]:
            obj["metadata"]["namespace"] = namespace
        moved.append(obj)
    return moved


@pytest.mark.parametrize("directory", DIRECTORIES, ids=[d.name for d in DIRECTORIES])
def test_every_directory_renders_objects_the_api_server_accepts(
    cluster: Cluster, directory: Path
) -> None:
    objects = render(directory)
    target = cluster.namespace("manifests")
    items = _namespaced(objects, target)

    assert objects
    for obj in objects:
        assert obj.get("apiVersion") and obj.get("kind") and obj["metadata"].get("name"), obj
    if not items:
        return
    manifest = yaml.safe_dump_all(items)
    result = kubectl(cluster, "apply", "--dry-run=server", "-o", "name", "-f", "-", stdin=manifest)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == len(items)


def test_the_webhooks_call_exactly_the_paths_the_server_serves(install: Manifests) -> None:
    """The install's webhooks and, with the opt-in quota directory, the quota webhook."""
    crd = install.one("CustomResourceDefinition")
    conversion = crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"]
    admission = [w["clientConfig"]["service"]["path"] for _, w in install.webhooks()]
    quota = [w["clientConfig"]["service"]["path"] for _, w in QUOTA.webhooks()]

    assert sorted([*admission, *quota, conversion]) == sorted(PATHS)
    assert conversion == CONVERT_PATH
    assert quota == [VALIDATE_QUOTA_STATUS_PATH]


def test_the_quota_webhook_sees_only_status_updates_of_the_quotas_kept_for_hrqs(
    install: Manifests,
) -> None:
    """...through a Service of its own that reaches only the replica holding the quota Lease,
    whose name the serving certificate covers, on the pod the Deployment tells its name."""
    kind, webhook = QUOTA.webhook(VALIDATE_QUOTA_STATUS_PATH)
    service = QUOTA.one("Service")
    pod = install.one("Deployment")["spec"]["template"]
    env = {e["name"]: e for e in install.container["env"]}

    assert kind == "ValidatingWebhookConfiguration"
    assert _rules(webhook) == [("", "v1", "resourcequotas/status", ["UPDATE"])]
    assert webhook["objectSelector"] == {
        "matchExpressions": [{"key": quota_rules.LABEL_HRQ_NAMESPACE, "operator": "Exists"}]
    }
    assert webhook["failurePolicy"] == "Fail"
    reference = webhook["clientConfig"]["service"]
    metadata = service["metadata"]
    assert (reference["name"], reference["namespace"]) == (metadata["name"], metadata["namespace"])
    selector = dict(service["spec"]["selector"])
    assert selector.pop(LABEL_AUTHORITY) == "true"
    assert selector.items() <= pod["metadata"]["labels"].items()
    host = f"{metadata['name']}.{metadata['namespace']}.svc"
    assert host in install.one("Certificate")["spec"]["dnsNames"]
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_every_webhook_reaches_the_controller_through_its_service(install: Manifests) -> None:
    service = install.one("Service")
    (port,) = service["spec"]["ports"]
    deployment = install.one("Deployment")
    pod = deployment["spec"]["template"]
    named = {p["name"]: p["containerPort"] for p in install.container["ports"]}
    crd = install.one("CustomResourceDefinition")
    references = [w["clientConfig"]["service"] for _, w in install.webhooks()]
    references.append(crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"])

    for reference in references:
        assert reference["name"] == service["metadata"]["name"]
        assert reference["namespace"] == service["metadata"]["namespace"]
        assert reference.get("port", 443) == port["port"]
    assert named[port["targetPort"]] == parse_addr(install.command_line.webhook_addr)[1]
    selector = service["spec"]["selector"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert selector.items() <= deployment["spec"]["selector"]["matchLabels"].items()


def test_the_webhook_rules(install: Manifests) -> None:
    namespaces_kind, namespaces = install.webhook(VALIDATE_NAMESPACE_PATH)
    mutate_kind, mutate = install.webhook(MUTATE_SUBNAMESPACE_PATH)
    validate_kind, validate = install.webhook(VALIDATE_SUBNAMESPACE_PATH)

    assert (namespaces_kind, mutate_kind, validate_kind) == (
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    )
    assert _rules(namespaces) == [("", "v1", "namespaces", ["CREATE", "UPDATE", "DELETE"])]
    subnamespaces = (GROUP, STORAGE_VERSION, SUBNAMESPACE_PLURAL)
    assert _rules(mutate) == [(*subnamespaces, ["CREATE"])]
    assert _rules(validate) == [(*subnamespaces, ["CREATE", "UPDATE", "DELETE"])]
    for _, webhook in install.webhooks():
        assert webhook["failurePolicy"] == "Fail"
        assert webhook["sideEffects"] == "None"
        assert webhook["admissionReviewVersions"] == ["v1"]
        assert 1 <= webhook["timeoutSeconds"] <= 10


def _rules(webhook: dict[str, Any]) -> list[tuple[str, str, str, list[str]]]:
    return [
        (group, version, resource, rule["operations"])
        for rule in webhook["rules"]
        for group in rule["apiGroups"]
        for version in rule["apiVersions"]
        for resource in rule["resources"]
    ]


@pytest.mark.parametrize("name, conditions", sorted(INSTALLS.items()))
def test_match_conditions_limit_the_namespace_hook_to_accurate_namespaces(
    name: str, conditions: list[str]
) -> None:
    manifests = Manifests(render(MANIFESTS / name))
    _, namespaces = manifests.webhook(VALIDATE_NAMESPACE_PATH)
    others = [w for _, w in manifests.webhooks() if w is not namespaces]

    expressions = [
        re.sub(r"\s+", " ", condition["expression"])
        for condition in namespaces.get("matchConditions", [])
    ]
    assert expressions == conditions
    assert all("matchConditions" not in webhook for webhook in others)
    assert _without_conditions(manifests.objects) == _without_conditions(
        render(MANIFESTS / "default")
    )


def _without_conditions(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stripped = copy.deepcopy(objects)
    for obj in stripped:
        for webhook in obj.get("webhooks", []):
            webhook.pop("matchConditions", None)
    return stripped


def test_the_crd_serves_v2_and_keeps_the_legacy_versions_for_conversion(
    install: Manifests,
) -> None:
    crd = install.one("CustomResourceDefinition", SUBNAMESPACE_CRD_NAME)
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    v2 = versions[STORAGE_VERSION]
    spec = v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    status = v2["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]

    assert sorted(versions) == sorted([STORAGE_VERSION, *LEGACY_VERSIONS])
    assert (v2["served"], v2["storage"], v2["subresources"]) == (True, True, {"status": {}})
    assert all(not versions[v]["served"] and not versions[v]["storage"] for v in LEGACY_VERSIONS)
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"
    assert crd["spec"]["conversion"]["webhook"]["conversionReviewVersions"] == ["v1"]
    for key in ("labels", "annotations"):
        assert spec[key] == {
            **spec[key],
            "type": "object",
            "additionalProperties": {"type": "string"},
        }
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert status["observedGeneration"]["type"] == "integer"
    v1_status = versions["v1"]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert v1_status["enum"] == ["ok", "conflict"]


def test_cert_manager_issues_the_certificate_the_controller_loads(install: Manifests) -> None:
    certificate = install.one("Certificate")
    issuer = install.one("Issuer")
    service = install.one("Service")
    cert_volume = install.volume_at(install.command_line.cert_dir)
    name = f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    injected = [
        obj
        for obj in install.objects
        if "cert-manager.io/inject-ca-from" in obj["metadata"].get("annotations", {})
    ]

    assert issuer["spec"] == {"selfSigned": {}}
    assert certificate["spec"]["issuerRef"] == {
        "kind": "Issuer",
        "name": issuer["metadata"]["name"],
    }
    host = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    assert host in certificate["spec"]["dnsNames"]
    assert cert_volume["secret"]["secretName"] == certificate["spec"]["secretName"] == GO_SECRET
    assert sorted(obj["kind"] for obj in injected) == [
        "CustomResourceDefinition",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    for obj in injected:
        assert obj["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == name


def test_the_crd_and_rbac_are_the_charts_templates_rendered() -> None:
    """One source for both (issue 30): scripts/render_manifests.py writes these files from the
    chart, and every CRD and RBAC file is one of them or named as written by hand."""
    rendered = render_manifests.render()
    found = {
        path
        for directory in ("crd", "rbac", "sudo", "quota")
        for path in (MANIFESTS / directory).glob("*.yaml")
        if path.name not in ("kustomization.yaml", "webhook.yaml", "service.yaml")
    }

    assert found == set(rendered) | HAND_WRITTEN_RBAC
    for path, text in rendered.items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path} is stale: run .venv/bin/python scripts/render_manifests.py"
        )


def test_the_deployment(install: Manifests) -> None:
    deployment = install.one("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = install.container
    security = container["securityContext"]
    env = {e["name"]: e for e in container["env"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    health_port = parse_addr(install.command_line.health_probe_addr)[1]

    assert deployment["spec"]["replicas"] == 2
    assert deployment["metadata"]["namespace"] == install.one("Namespace")["metadata"]["name"]
    assert container["image"].startswith("ghcr.io/accurate-py/accurate-py:")
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"]["path"] == path
        assert ports[container[probe]["httpGet"]["port"]] == health_port == 8081
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert all(mount["readOnly"] for mount in container["volumeMounts"])


def _example_config(cluster: Cluster, install: Manifests) -> tuple[Config, list[WatchedResource]]:
    """The config the Deployment mounts where --config-file points, loaded as the controller
    loads it (watches resolved against the cluster's discovery)."""
    config_file = Path(install.command_line.config_file)
    volume = install.volume_at(str(config_file.parent))
    configmap = install.one("ConfigMap", volume["configMap"]["name"])
    source = f"ConfigMap {configmap['metadata']['name']}"
    config = parse_config(configmap["data"][config_file.name], source)
    return config, list(resolve_watches(config, connect(cluster).server_resources(), source))


def test_the_example_config_is_valid_and_mounted_where_the_controller_reads_it(
    cluster: Cluster, install: Manifests
) -> None:
    config, watched = _example_config(cluster, install)

    assert {w.gvk.kind for w in watched} == {"Role", "RoleBinding", "Secret"}
    assert config.naming_policies


def test_rbac_grants_what_the_controller_needs_and_no_more(
    cluster: Cluster, install: Manifests
) -> None:
    _, watched = _example_config(cluster, install)
    namespace = install.one("Namespace")["metadata"]["name"]
    account = install.one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    cluster_rules = _bound_rules(install, account, "ClusterRoleBinding", "ClusterRole")
    namespace_rules = _bound_rules(install, account, "RoleBinding", "Role")
    needed = selfcheck.required(watched, lease_namespace=namespace)
    # The webhooks read namespaces too.
    needed.append(selfcheck.Permission("", "namespaces", ("get", "list")))

    for permission in needed:
        rules = namespace_rules if permission.namespace else cluster_rules
        for verb in permission.verbs:
            assert (permission.group, permission.resource, verb) in rules, permission
    allowed: dict[tuple[str, str], set[str]] = {}
    for permission in needed:
        if not permission.namespace:
            allowed.setdefault((permission.group, permission.resource), set()).update(
                permission.verbs
            )
    for key, verbs in EXTRA_CLUSTER_VERBS.items():
        allowed.setdefault(key, set()).update(verbs)
    granted_beyond = {(g, r, v) for g, r, v in cluster_rules if v not in allowed.get((g, r), set())}
    assert granted_beyond == set()
    leases = {p.verbs for p in needed if p.namespace}
    assert namespace_rules == {("coordination.k8s.io", "leases", v) for vs in leases for v in vs}


def _bound_rules(
    install: Manifests, account: str, binding_kind: str, role_kind: str
) -> set[tuple[str, str, str]]:
    """(group, resource, verb) granted to the ServiceAccount through bindings of a kind."""
    namespace = install.one("Namespace")["metadata"]["name"]
    granted: set[tuple[str, str, str]] = set()
    for binding in install.all(binding_kind):
        subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        if subject not in binding["subjects"]:
            continue
        assert binding["roleRef"]["kind"] == role_kind
        role = install.one(role_kind, binding["roleRef"]["name"])
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted.update((group, resource, verb) for verb in rule["verbs"])
    return granted


def test_subnamespace_roles_are_aggregated_into_the_built_in_roles(install: Manifests) -> None:
    roles = {
        name: install.one("ClusterRole", f"accurate-subnamespace-{name}-role")
        for name in ("editor", "viewer")
    }
    full = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

    assert roles["editor"]["metadata"]["labels"] == {
        "rbac.authorization.k8s.io/aggregate-to-admin": "true",
        "rbac.authorization.k8s.io/aggregate-to-edit": "true",
    }
    assert roles["viewer"]["metadata"]["labels"] == {
        "rbac.authorization.k8s.io/aggregate-to-view": "true"
    }
    assert _verbs(roles["editor"], SUBNAMESPACE_PLURAL) == full
    assert _verbs(roles["viewer"], SUBNAMESPACE_PLURAL) == {"get", "list", "watch"}
    for role in roles.values():
        assert _verbs(role, f"{SUBNAMESPACE_PLURAL}/status") == {"get"}


def _verbs(role: dict[str, Any], resource: str) -> set[str]:
    return {
        verb
        for rule in role["rules"]
        if GROUP in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }


# The CRD too: kubectl auth can-i resolves the resource through discovery.
RBAC_KINDS = (
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
)


def _install_rbac(cluster: Cluster, install: Manifests) -> None:
    """Apply the manifests' RBAC for real; the in-memory cluster is reset after the test. Never
    on a real cluster: the objects keep their own names, and would overwrite an installed
    Accurate's."""
    assert not cluster.is_real, "the manifests' RBAC is only ever installed in memory"
    objects = [obj for obj in install.objects if obj["kind"] in RBAC_KINDS]
    result = kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump_all(objects))
    assert result.returncode == 0, result.stderr


def _as_controller(
    apiserver: ApiServer, cluster: Cluster, install: Manifests, tmp_path: Path
) -> Kube:
    """The manifests' RBAC installed, and a client as the controller's ServiceAccount."""
    namespace = install.one("Namespace")["metadata"]["name"]
    account = install.one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    user = f"system:serviceaccount:{namespace}:{account}"
    _install_rbac(cluster, install)
    apiserver.add_user(user, ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"])
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "controller", user=user)
    return Kube.connect(ConnectionOptions(kubeconfig=str(kubeconfig)))


def test_the_controllers_account_passes_its_startup_check(
    apiserver: ApiServer, cluster: Cluster, tmp_path: Path
) -> None:
    install = Manifests(render(MANIFESTS / "default"))
    _, watched = _example_config(cluster, install)
    namespace = install.one("Namespace")["metadata"]["name"]
    as_controller = _as_controller(apiserver, cluster, install, tmp_path)

    assert (
        selfcheck.check(as_controller, selfcheck.required(watched, lease_namespace=namespace)) == []
    )
    with pytest.raises(selfcheck.MissingPermissions, match="create namespaces/finalize"):
        selfcheck.check(
            as_controller, [selfcheck.Permission("", "namespaces/finalize", ("create",))]
        )


def test_only_the_sudo_directory_gives_the_controller_the_sudoer_keepers_rights(
    apiserver: ApiServer, cluster: Cluster, tmp_path: Path
) -> None:
    """They amount to cluster-admin, so the base leaves them out (docs/tenant-access.md)."""
    base = Manifests(render(MANIFESTS / "default"))
    sudo = Manifests([base.one("Namespace"), *render(MANIFESTS / "sudo")])
    account = base.one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    keeper = {(p.group, p.resource, v) for p in sudoers.PERMISSIONS for v in p.verbs}
    as_controller = _as_controller(apiserver, cluster, base, tmp_path)

    assert _bound_rules(sudo, account, "ClusterRoleBinding", "ClusterRole") == keeper
    with pytest.raises(selfcheck.MissingPermissions) as missing:
        selfcheck.check(as_controller, sudoers.PERMISSIONS)
    assert str(missing.value).endswith(
        "list, create, update, delete, escalate clusterroles.rbac.authorization.k8s.io; "
        "list, create, update, delete clusterrolebindings.rbac.authorization.k8s.io"
    )
    _install_rbac(cluster, sudo)
    selfcheck.check(as_controller, sudoers.PERMISSIONS)


def test_namespace_editors_may_create_subnamespaces_and_viewers_read_them(
    apiserver: ApiServer, cluster: Cluster
) -> None:
    _install_rbac(cluster, Manifests(render(MANIFESTS / "default")))
    team = cluster.namespace("team")
    for user, role in (("alice", "edit"), ("bob", "view")):
        apiserver.add_user(user)
        binding = ("rolebinding", f"{user}-{role}", f"--clusterrole={role}", f"--user={user}")
        assert kubectl(cluster, "create", *binding, "-n", team).returncode == 0

    def can(user: str, verb: str) -> bool:
        question = (verb, f"subnamespaces.{GROUP}", "-n", team, "--as", user)
        return kubectl(cluster, "auth", "can-i", *question).stdout.strip() == "yes"

    wait_for(lambda: can("alice", "create"), 10, "aggregation of the editor role into edit")
    wait_for(lambda: can("bob", "list"), 10, "aggregation of the viewer role into view")
    assert can("alice", "delete")
    assert not can("bob", "create")
    assert not can("bob", "delete")


def test_only_the_quota_directory_gives_the_controller_the_quota_keepers_rights(
    apiserver: ApiServer, cluster: Cluster, tmp_path: Path
) -> None:
    """Hierarchical quotas are opt-in: the base asks for nothing about them."""
    base = Manifests(render(MANIFESTS / "default"))
    with_quota = Manifests([base.one("Namespace"), *QUOTA.objects])
    account = base.one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    keeper = {(p.group, p.resource, v) for p in quotas.PERMISSIONS for v in p.verbs}
    as_controller = _as_controller(apiserver, cluster, base, tmp_path)

    assert keeper <= _bound_rules(with_quota, account, "ClusterRoleBinding", "ClusterRole")
    with pytest.raises(selfcheck.MissingPermissions):
        selfcheck.check(as_controller, quotas.PERMISSIONS)
    _install_rbac(cluster, with_quota)
    selfcheck.check(as_controller, quotas.PERMISSIONS)


def test_tenants_read_hrqs_and_may_change_neither_them_nor_the_quotas_kept_for_them(
    apiserver: ApiServer, cluster: Cluster
) -> None:
    """``view``, ``edit`` and ``admin`` read HRQs; none of them writes an HRQ or a
    ResourceQuota (kube's bootstrap policy grants only reads of resourcequotas);
    ``accurate-hrq-admin`` is for whoever sets quotas."""
    base = Manifests(render(MANIFESTS / "default"))
    _install_rbac(cluster, Manifests([*base.objects, *QUOTA.objects]))
    team = cluster.namespace("team")
    grants = (
        ("alice", "admin"),
        ("bob", "edit"),
        ("carol", "view"),
        ("dave", "accurate-hrq-admin"),
    )
    for user, role in grants:
        apiserver.add_user(user)
        binding = ("rolebinding", f"{user}-{role}", f"--clusterrole={role}", f"--user={user}")
        assert kubectl(cluster, "create", *binding, "-n", team).returncode == 0

    def can(user: str, verb: str, resource: str = quota_rules.CRD_NAME) -> bool:
        question = (verb, resource, "-n", team, "--as", user)
        return kubectl(cluster, "auth", "can-i", *question).stdout.strip() == "yes"

    for user in ("alice", "bob", "carol"):
        wait_for(functools.partial(can, user, "list"), 10, f"aggregation for {user}")
        for verb in ("create", "update", "patch", "delete"):
            assert not can(user, verb), (user, verb)
            assert not can(user, verb, "resourcequotas"), (user, verb)
        assert not can(user, "update", "resourcequotas/status")
    assert can("dave", "create") and can("dave", "update") and can("dave", "delete")
