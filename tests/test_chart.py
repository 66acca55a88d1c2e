"""The Helm chart charts/accurate, rendered and linted by the real Helm engine (helm-python-sdk).

It takes the Go Accurate chart's values and renders the kustomize base's objects. The CRD and
RBAC files of controller/config are the chart's templates rendered (scripts/render_manifests.py,
checked by tests/test_manifests.py); the comparison here keeps the rest from drifting apart
(docs/install.md says so). An upgrade from each layout of the Go chart keeps its objects.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from accurate_testbed.manifests import MANIFESTS, render
from accurate_testbed.waiting import CONTROLLER_TIMEOUT, wait_for
from controller import options, selfcheck
from libaccurate.config import Config, parse_config, resolve_watches
from libaccurate.network.kube import ConnectionOptions, Kube
from scripts import render_manifests
from scripts.render_manifests import HELM_LABELS
from tests.e2e.webhooks import connect, kubectl
from tests.test_manifests import match_expression

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "accurate"
DATA = Path(__file__).parent / "data" / "chart"
KUSTOMIZE_VALUES = render_manifests.KUSTOMIZE_VALUES
GO_E2E_VALUES = DATA / "go-e2e-values.yaml"
CERT_MANAGER_CRDS = DATA / "cert-manager-crds.yaml"
GO_LAYOUTS = DATA / "go-chart-layouts.yaml"
CONFIG_FILE = "config.yaml"
CRD_READY = 30.0
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def _values(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return loaded


def render_chart(
    values: dict[str, Any] | None = None,
    release: str = "accurate",
    namespace: str = "accurate",
    upgrade: bool = False,
) -> list[dict[str, Any]]:
    """The objects `helm template` (or, with ``upgrade``, `helm upgrade`) makes of the chart,
    ordered by template file."""
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render(
            values=values,
            name=release,
            namespace=namespace,
            is_install=not upgrade,
            is_upgrade=upgrade,
        )
    return [
        obj
        for name, text in sorted(rendered.items())
        if name.endswith(".yaml")
        for obj in yaml.safe_load_all(text)
        if obj
    ]


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [obj for obj in objects if obj["kind"] == kind]
    return found


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _config(objects: list[dict[str, Any]]) -> Config:
    """The configuration file the chart writes, loaded as the controller loads it."""
    configmap = _one(objects, "ConfigMap")
    source = f"ConfigMap {configmap['metadata']['name']}"
    return parse_config(configmap["data"][CONFIG_FILE], source)


def _comparable(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Objects by kind and name, without what only says who manages them or when Pods roll, and
    with the configuration file as the controller reads it rather than as text."""
    found = {}
    for original in objects:
        obj = copy.deepcopy(original)
        metadata = obj["metadata"]
        for label in HELM_LABELS:
            metadata.get("labels", {}).pop(label, None)
        if metadata.get("labels") == {}:
            del metadata["labels"]
        if obj["kind"] == "Deployment":
            pod = obj["spec"]["template"]["metadata"]
            pod.get("annotations", {}).pop("checksum/config", None)
            if pod.get("annotations") == {}:
                del pod["annotations"]
        if obj["kind"] == "ConfigMap":
            obj["data"][CONFIG_FILE] = _config([original])
        found[obj["kind"], metadata["name"]] = obj
    return found


@pytest.mark.parametrize(
    "directories, extra",
    [
        (("default",), {}),
        (("without-match-conditions",), {"webhook": {"matchConditions": False}}),
        # Sudo on: the base and the directory an operator adds for it.
        (("default", "sudo"), {"tenantAccess": {"sudo": True}}),
        # Hierarchical quotas on: the base and controller/config/quota.
        (("default", "quota"), {"quota": {"enabled": True}}),
    ],
    ids=["default", "without-match-conditions", "sudo", "quota"],
)
def test_the_chart_renders_the_kustomize_base_object_by_object(
    directories: tuple[str, ...], extra: dict[str, Any]
) -> None:
    values = {**_values(KUSTOMIZE_VALUES), **extra}
    kustomized = [
        obj
        for directory in directories
        for obj in render(MANIFESTS / directory)
        if obj["kind"] != "Namespace"
    ]

    charted = _comparable(render_chart(values))
    expected = _comparable(kustomized)

    assert sorted(charted) == sorted(expected)
    for key, obj in expected.items():
        assert charted[key] == obj, key


SUFFIX = "tree.hnc.x-k8s.io"
ACCURATE_KEY = 'k.startsWith("accurate.cybozu.com/")'


def _namespace_condition(objects: list[dict[str, Any]]) -> str:
    """The expression of the namespace webhook's one matchCondition."""
    configuration = _one(objects, "ValidatingWebhookConfiguration")
    (condition,) = configuration["webhooks"][0]["matchConditions"]
    return str(condition["expression"])


def test_with_tree_labels_the_namespace_webhook_also_sees_keys_of_their_suffix() -> None:
    """A tree label set by hand on a namespace outside every tree must reach the webhook; the
    chart knows the suffix, so it asks for exactly that one (the kustomize directory
    tree-labels, which cannot, asks for any */depth key: tests/test_manifests.py)."""
    values = {"controller": {"config": {"treeLabels": {"suffix": SUFFIX}}}}
    tree_key = f'{ACCURATE_KEY} || k.endsWith(".{SUFFIX}/depth")'

    assert _namespace_condition(render_chart()) == match_expression(ACCURATE_KEY)
    assert _namespace_condition(render_chart(values)) == match_expression(tree_key)
    off = {**values, "webhook": {"matchConditions": False}}
    configuration = _one(render_chart(off), "ValidatingWebhookConfiguration")
    assert "matchConditions" not in configuration["webhooks"][0]


def test_a_suffix_that_could_break_out_of_the_cel_string_is_refused() -> None:
    bad = {"controller": {"config": {"treeLabels": {"suffix": 'x") || true || ("'}}}}
    with pytest.raises(helm.HelmValuesError, match=r"treeLabels/suffix"):
        render_chart(bad)


def _lint_findings(values: dict[str, Any] | None) -> list[dict[str, Any]]:
    report = helm.lint(CHART, values, strict=True, namespace="accurate")
    # Severity 1 is information ("icon is recommended"); 2 and up are warnings and errors.
    return [message for message in report["messages"] if message["severity"] >= 2]


@pytest.mark.parametrize("values_file", [None, GO_E2E_VALUES, KUSTOMIZE_VALUES])
def test_helm_lint_passes(values_file: Path | None) -> None:
    assert _lint_findings(_values(values_file) if values_file else None) == []


def test_helm_lint_names_a_misspelt_configuration_key() -> None:
    findings = _lint_findings({"controller": {"config": {"labelKey": ["team"]}}})

    assert findings
    assert all("'labelKey' not allowed" in finding["error"] for finding in findings)


def test_rendering_refuses_a_key_the_controllers_configuration_does_not_know() -> None:
    with pytest.raises(helm.HelmValuesError, match=r"/controller/config.*'labelKey' not allowed"):
        render_chart({"controller": {"config": {"labelKey": ["team"]}}})


def test_rendering_refuses_a_misspelt_tenant_access_switch() -> None:
    """A typo must not leave sudo off (or on) without a word."""
    with pytest.raises(helm.HelmValuesError, match=r"/tenantAccess.*'sudoo' not allowed"):
        render_chart({"tenantAccess": {"sudoo": True}})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def test_the_values_schema_allows_exactly_the_controllers_configuration_keys() -> None:
    schema = yaml.safe_load((CHART / "values.schema.json").read_text(encoding="utf-8"))
    allowed = schema["properties"]["controller"]["properties"]["config"]["properties"]

    assert set(allowed) == {_camel(field.name) for field in dataclasses.fields(Config)}


def test_every_configuration_key_reaches_the_controller() -> None:
    everything = {
        "labelKeys": ["team"],
        "annotationKeys": ["example.com/owner"],
        "subNamespaceLabelKeys": ["app"],
        "subNamespaceAnnotationKeys": ["example.com/contact"],
        "watches": [{"version": "v1", "kind": "Secret"}],
        "propagateLabelKeyExcludes": ["*kubernetes.io/*"],
        "propagateAnnotationKeyExcludes": ["*kubernetes.io/*"],
        "namingPolicies": [{"root": "^app-(?P<team>[^-]+)$", "match": "^app-${team}-.+"}],
        "treeLabels": {"suffix": "tree.accurate.cybozu.com"},
    }

    config = _config(render_chart({"controller": {"config": everything}}))

    assert all(getattr(config, field.name) for field in dataclasses.fields(Config))
    assert config == parse_config(yaml.safe_dump(everything), "the values")


def test_the_go_e2e_values_reach_the_controller() -> None:
    values = _values(GO_E2E_VALUES)
    objects = render_chart(values)
    container = _container(objects)
    cluster_wide = {
        (obj["kind"], obj["metadata"]["name"]): obj
        for obj in objects
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding")
    }

    with helm.Chart.load(CHART) as chart:
        merged = chart.merge_values(values)["controller"]["config"]

    assert merged["labelKeys"] == ["team"]
    assert _config(objects) == parse_config(yaml.safe_dump(merged), "the merged values")
    assert container["image"] == "accurate:dev"
    assert container["imagePullPolicy"] == "Never"
    assert container["args"][-1] == "--zap-log-level=5"
    assert (
        cluster_wide["ClusterRole", "accurate-additional-resources"]["rules"]
        == (values["controller"]["additionalRBAC"]["rules"])
    )
    admin = cluster_wide["ClusterRoleBinding", "accurate-manager-admin"]
    assert admin["roleRef"]["name"] == "admin"


@pytest.mark.parametrize("values_file", [None, GO_E2E_VALUES], ids=["defaults", "go-e2e"])
def test_the_controller_takes_every_argument_the_chart_renders(values_file: Path | None) -> None:
    """The Go chart's arguments once crashed the controller; each rendering must parse, and the
    Go e2e suite's ``--zap-log-level=5`` means debug."""
    values = _values(values_file) if values_file else {}

    parsed = options.parse(_container(render_chart(values))["args"])

    assert parsed.allow_cascading_deletion is False
    assert parsed.log_level == ("debug" if values_file else "info")


def test_the_default_image_is_ours_at_the_charts_app_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    version = metadata.version("accurate-py")
    kustomized = [obj for obj in render(MANIFESTS / "default") if obj["kind"] == "Deployment"]

    image = _container(render_chart())["image"]

    assert chart["version"] == chart["appVersion"] == version
    assert image == f"ghcr.io/accurate-py/accurate-py:{version}"
    assert image == _container(kustomized)["image"]


@pytest.mark.parametrize("allow", [False, True])
def test_the_controller_gets_the_cascading_deletion_choice_and_the_extra_arguments(
    allow: bool,
) -> None:
    values = {
        "webhook": {"allowCascadingDeletion": allow},
        "controller": {"extraArgs": ["--log-level=debug"]},
    }

    parsed = options.parse(_container(render_chart(values))["args"])

    assert parsed.allow_cascading_deletion is allow
    assert parsed.log_level == "debug"


def test_the_deployment_takes_the_go_charts_pod_values() -> None:
    values = {
        "controller": {
            "replicas": 3,
            "terminationGracePeriodSeconds": 45,
            "priorityClassName": "system-cluster-critical",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        },
        "image": {"tag": "9.9.9", "pullPolicy": "Always"},
    }

    deployment = _one(render_chart(values), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]

    assert deployment["spec"]["replicas"] == 3
    assert pod["terminationGracePeriodSeconds"] == 45
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert container["image"] == "ghcr.io/accurate-py/accurate-py:9.9.9"
    assert container["imagePullPolicy"] == "Always"


def test_a_new_configuration_rolls_the_pods() -> None:
    def checksum(values: dict[str, Any]) -> str:
        template = _one(render_chart(values), "Deployment")["spec"]["template"]
        return str(template["metadata"]["annotations"]["checksum/config"])

    team = {"controller": {"config": {"labelKeys": ["team"]}}}
    assert checksum(team) == checksum(team)
    assert checksum(team) != checksum({"controller": {"config": {"labelKeys": ["owner"]}}})


@pytest.mark.parametrize(
    "values, installed, kept",
    [
        ({}, True, True),
        ({"crds": {"keep": False}}, True, False),
        ({"crds": {"enabled": False}}, False, False),
        # The Go chart's deprecated switch still installs it.
        ({"crds": {"enabled": False}, "installCRDs": True}, True, True),
    ],
)
def test_crds_enabled_and_keep(values: dict[str, Any], installed: bool, kept: bool) -> None:
    crds = [obj for obj in render_chart(values) if obj["kind"] == "CustomResourceDefinition"]

    assert len(crds) == installed
    for crd in crds:
        policy = crd["metadata"]["annotations"].get("helm.sh/resource-policy")
        assert policy == ("keep" if kept else None)


def test_names_follow_the_go_charts_rule() -> None:
    """Upgrading a Go chart release must find its objects under the same names."""
    for release, prefix in (("accurate", "accurate"), ("accurate-prod", "accurate-prod")):
        names = {obj["metadata"]["name"] for obj in render_chart(release=release)}
        assert f"{prefix}-controller-manager" in names
    names = {obj["metadata"]["name"] for obj in render_chart(release="tenants")}
    assert "tenants-accurate-controller-manager" in names
    assert "tenants-accurate-manager-admin" in names


def _go_layouts() -> list[dict[str, Any]]:
    layouts: list[dict[str, Any]] = yaml.safe_load(GO_LAYOUTS.read_text(encoding="utf-8"))
    return layouts


@pytest.mark.parametrize("release", ["accurate", "accurate-prod", "tenants"])
@pytest.mark.parametrize(
    "layout", _go_layouts(), ids=[layout["versions"] for layout in _go_layouts()]
)
def test_an_upgrade_from_each_go_chart_layout_keeps_its_objects_and_its_secret(
    layout: dict[str, Any], release: str
) -> None:
    """`helm upgrade` over a release of the Go chart must update the objects it has, not make
    new ones next to them, and keep the serving certificate in the Secret the Go chart had: a
    new name would have cert-manager issue a new Secret and leave the old one behind (issue
    30). tests/data/chart/go-chart-layouts.yaml says what each Go chart release renders."""
    fullname = release if "accurate" in release else f"{release}-accurate"
    objects = render_chart(release=release, upgrade=True)
    volumes = _one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    go = {(kind, name.replace("<fullname>", fullname)) for kind, name in layout["objects"]}

    assert go <= {(obj["kind"], obj["metadata"]["name"]) for obj in objects}
    assert _one(objects, "Certificate")["spec"]["secretName"] == layout["secret"]
    assert [v["secret"]["secretName"] for v in volumes if "secret" in v] == [layout["secret"]]


def test_a_values_file_that_asks_for_the_bundled_cert_manager_is_refused() -> None:
    refusal = r"cert-manager\.enabled: .*Install cert-manager"
    with pytest.raises(helm.HelmRenderError, match=refusal):
        render_chart({"cert-manager": {"enabled": True}})


def _install_cert_manager_kinds(cluster: Cluster) -> None:
    """Stand-ins for cert-manager's CRDs where cert-manager is not installed, with the test's
    labels: removed after it on a real cluster. Stand-ins an earlier test left are still being
    deleted, and are waited out rather than used."""
    wait_for(
        lambda: _cert_manager_state(cluster) != "leaving",
        CONTROLLER_TIMEOUT,
        "an earlier test's cert-manager stand-in CRDs to go",
    )
    if _cert_manager_state(cluster) == "installed":
        return
    stand_ins = [cluster.owned(crd) for crd in yaml.safe_load_all(CERT_MANAGER_CRDS.read_text())]
    result = kubectl(cluster, "create", "-f", "-", stdin=yaml.safe_dump_all(stand_ins))
    assert result.returncode == 0, result.stderr
    wait_for(
        lambda: kubectl(cluster, "get", "certificates.cert-manager.io", "-A").returncode == 0,
        CRD_READY,
        "the cert-manager stand-in CRDs to be served",
    )


def _cert_manager_state(cluster: Cluster) -> str:
    """Whether cert-manager's kinds are "installed", "absent", or "leaving" (being deleted)."""
    names = ("issuers.cert-manager.io", "certificates.cert-manager.io")
    found = kubectl(cluster, "get", "crd", *names, "--ignore-not-found", "-o", "json")
    assert found.returncode == 0, found.stderr
    items = json.loads(found.stdout)["items"] if found.stdout.strip() else []
    if any(item["metadata"].get("deletionTimestamp") for item in items):
        return "leaving"
    return "installed" if items else "absent"


@pytest.mark.parametrize("values_file", [None, GO_E2E_VALUES], ids=["defaults", "go-e2e"])
def test_the_api_server_accepts_every_rendered_object(
    cluster: Cluster, values_file: Path | None
) -> None:
    _install_cert_manager_kinds(cluster)
    namespace = cluster.namespace("chart")
    objects = render_chart(
        _values(values_file) if values_file else None,
        release=cluster.unique("accurate"),
        namespace=namespace,
    )

    result = kubectl(
        cluster,
        "apply",
        "--dry-run=server",
        "-o",
        "name",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(objects),
    )

    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == len(objects)


# The Go chart's default additionalRBAC rule, as operators copied it into their values files.
GO_DEFAULT_RULE = {
    "apiGroups": [""],
    "resources": ["resourcequotas"],
    "verbs": ["get", "list", "watch", "create", "patch", "delete"],
}


@pytest.mark.parametrize(
    "values, kinds, warnings",
    [
        (None, {"Role", "RoleBinding", "Secret", "ResourceQuota"}, []),
        (
            _values(GO_E2E_VALUES),
            {"Role", "RoleBinding", "Secret", "ResourceQuota", "ServiceAccount"},
            [],
        ),
        (
            {"controller": {"additionalRBAC": {"rules": [GO_DEFAULT_RULE]}}},
            {"Role", "RoleBinding", "Secret", "ResourceQuota"},
            [
                "the controller's account may not update resourcequotas: "
                "propagation of ResourceQuota fails where it needs them"
            ],
        ),
    ],
    ids=["defaults", "go-e2e", "go-default-rule"],
)
def test_the_controllers_account_passes_its_startup_check(
    apiserver: ApiServer,
    cluster: Cluster,
    tmp_path: Path,
    values: dict[str, Any] | None,
    kinds: set[str],
    warnings: list[str],
) -> None:
    """The Go chart grants the watched kinds through `admin` and additionalRBAC.rules; that
    must be enough for accurate-controller to start. The Go chart's default rule lacks
    `update` (the Go controller updates copies too): the controller starts and says so."""
    namespace = cluster.namespace("chart")
    objects = render_chart(values, release="accurate", namespace=namespace)
    rbac = [obj for obj in objects if obj["kind"] in RBAC_KINDS]
    applied = kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump_all(rbac))
    assert applied.returncode == 0, applied.stderr
    account = _one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    user = f"system:serviceaccount:{namespace}:{account}"
    apiserver.add_user(user, ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"])
    as_controller = Kube.connect(
        ConnectionOptions(kubeconfig=str(apiserver.write_kubeconfig(tmp_path / "c", user=user)))
    )
    config = _config(objects)
    watched = list(resolve_watches(config, connect(cluster).server_resources(), "chart"))

    assert {w.gvk.kind for w in watched} == kinds
    needed = selfcheck.required(watched, lease_namespace=namespace)
    assert selfcheck.check(as_controller, needed) == warnings


def test_notes_warn_about_a_go_accurate_image_left_in_the_values() -> None:
    with helm.Chart.load(CHART) as chart:
        notes = chart.render(
            values={"image": {"repository": "ghcr.io/cybozu-go/accurate", "tag": "1.4.0"}},
            name="accurate",
            namespace="accurate",
        )["accurate/templates/NOTES.txt"]
        plain = chart.render(name="accurate", namespace="accurate")["accurate/templates/NOTES.txt"]

    assert re.search(r"WARNING: image.repository is ghcr.io/cybozu-go/accurate", notes)
    assert "image.tag is 1.4.0" in notes
    assert "WARNING" not in plain and "NOTE:" not in plain


def test_the_packaged_chart_renders_what_the_directory_does(tmp_path: Path) -> None:
    """What the release workflow publishes (helm package) is the chart the tests check."""
    archive = Path(helm.package(CHART, destination=tmp_path))
    with helm.Chart.load(archive) as packaged, helm.Chart.load(CHART) as directory:
        from_archive = packaged.render(name="accurate", namespace="accurate")
        from_directory = directory.render(name="accurate", namespace="accurate")

    assert archive.name == f"accurate-{metadata.version('accurate-py')}.tgz"
    assert from_archive == from_directory
