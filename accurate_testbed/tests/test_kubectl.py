"""Contract: the real kubectl works against the cluster as a user would drive it."""

from __future__ import annotations

import base64
import json
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from accurate_testbed.cluster import Cluster
from accurate_testbed.kubectl import kubectl as run_kubectl
from accurate_testbed.objects import namespace_manifest
from accurate_testbed.tests.helpers import error_of, held_config_map, release, request
from accurate_testbed.waiting import CONTROLLER_TIMEOUT, wait_for

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


def kubectl(
    kubeconfig: Path, *args: str, stdin: Any = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = run_kubectl(kubeconfig, *args, stdin=stdin)
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result


def get_json(kubeconfig: Path, *args: str) -> Any:
    return json.loads(kubectl(kubeconfig, "get", *args, "-o", "json").stdout)


def test_create_get_label_annotate_namespace(cluster: Cluster, kubeconfig: Path) -> None:
    name = cluster.unique("kubectl")
    manifest = namespace_manifest(name, cluster.labels)
    created = kubectl(kubeconfig, "create", "-f", "-", stdin=manifest)
    assert created.stdout == f"namespace/{name} created\n"
    kubectl(kubeconfig, "label", "ns", name, "team=a", "drop=me")
    kubectl(kubeconfig, "annotate", "ns", name, "note=hello")
    kubectl(kubeconfig, "label", "ns", name, "drop-")
    labels = get_json(kubeconfig, "ns", name)["metadata"]["labels"]
    assert labels == cluster.own({"team": "a", "kubernetes.io/metadata.name": name})
    assert get_json(kubeconfig, "ns", name)["metadata"]["annotations"] == {"note": "hello"}
    kubectl(kubeconfig, "annotate", "ns", name, "note-")
    assert (
        "annotations" not in get_json(kubeconfig, "ns", name)["metadata"]
        or not (get_json(kubeconfig, "ns", name)["metadata"]["annotations"])
    )
    table = kubectl(kubeconfig, "get", "ns", name).stdout.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "AGE"]
    assert table[1].split()[:2] == [name, "Active"]


def test_kubectl_reports_not_found_and_already_exists(cluster: Cluster, kubeconfig: Path) -> None:
    name = cluster.unique("kubectl")
    missing = kubectl(kubeconfig, "get", "ns", name, check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == f'Error from server (NotFound): namespaces "{name}" not found'
    cluster.namespace()
    existing = cluster.namespace()
    again = kubectl(kubeconfig, "create", "ns", existing, check=False)
    assert again.stderr.strip() == (
        f'Error from server (AlreadyExists): namespaces "{existing}" already exists'
    )


CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.kubectl.example.com
spec:
  group: kubectl.example.com
  scope: Namespaced
  names: {{kind: Gadget, plural: {plural}, singular: gadget}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    additionalPrinterColumns:
    - {{name: Color, type: string, jsonPath: .spec.color}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {{type: string}}
"""


def test_apply_crd_then_custom_object(cluster: Cluster, kubeconfig: Path) -> None:
    plural = cluster.unique("gadgets").replace("-", "")
    crd_name = f"{plural}.kubectl.example.com"
    crd = cluster.owned(yaml.safe_load(CRD.format(plural=plural)))
    kubectl(kubeconfig, "apply", "-f", "-", stdin=crd)
    kubectl(kubeconfig, "wait", "--for=condition=Established", f"crd/{crd_name}", "--timeout=20s")
    ns = cluster.namespace()
    gadget = (
        f"apiVersion: kubectl.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n"
        f"  namespace: {ns}\nspec:\n  color: red\n"
    )
    created = kubectl(kubeconfig, "apply", "-f", "-", stdin=gadget)
    assert created.stdout.strip() == "gadget.kubectl.example.com/g created"
    kubectl(kubeconfig, "apply", "-f", "-", stdin=gadget.replace("red", "blue"))
    rows = kubectl(kubeconfig, "get", plural, "-n", ns).stdout.split()
    assert rows == ["NAME", "COLOR", "g", "blue"]
    unknown = kubectl(
        kubeconfig, "apply", "-f", "-", stdin=gadget + "  shape: round\n", check=False
    )
    assert unknown.returncode == 1
    assert 'unknown field "spec.shape"' in unknown.stderr


CONFIGMAP = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: {ns}\ndata:\n{data}"
)


def test_server_side_apply_drops_own_fields_and_keeps_others(
    cluster: Cluster, kubeconfig: Path
) -> None:
    ns = cluster.namespace()
    first = CONFIGMAP.format(ns=ns, data="  a: '1'\n  b: '2'\n")
    kubectl(kubeconfig, "apply", "--server-side", "--field-manager=one", "-f", "-", stdin=first)
    other = CONFIGMAP.format(ns=ns, data="  c: '3'\n")
    kubectl(kubeconfig, "apply", "--server-side", "--field-manager=two", "-f", "-", stdin=other)
    second = CONFIGMAP.format(ns=ns, data="  a: '1'\n")
    kubectl(kubeconfig, "apply", "--server-side", "--field-manager=one", "-f", "-", stdin=second)
    assert get_json(kubeconfig, "cm", "c", "-n", ns)["data"] == {"a": "1", "c": "3"}
    clash = CONFIGMAP.format(ns=ns, data="  a: '9'\n")
    conflict = kubectl(
        kubeconfig,
        "apply",
        "--server-side",
        "--field-manager=two",
        "-f",
        "-",
        stdin=clash,
        check=False,
    )
    assert conflict.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "one": .data.a' in conflict.stderr


def test_get_watch_sees_an_update(cluster: Cluster, kubeconfig: Path) -> None:
    ns = cluster.namespace()
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "watched"}, "data": {"a": "1"}})
    process = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(kubeconfig), "get", "cm", "-n", ns, "-w"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    output = process.stdout
    assert output is not None

    def read_lines() -> None:
        for line in output:
            lines.put(line)

    threading.Thread(target=read_lines, daemon=True).start()
    try:
        assert lines.get(timeout=20).split() == ["NAME", "DATA", "AGE"]
        assert lines.get(timeout=20).split()[:2] == ["watched", "1"]
        core.patch_namespaced_config_map("watched", ns, {"data": {"b": "2"}})
        assert lines.get(timeout=20).split()[:2] == ["watched", "2"]
    finally:
        process.kill()
        process.wait()


def test_wait_for_a_condition(cluster: Cluster, kubeconfig: Path) -> None:
    ns = cluster.namespace()
    done = kubectl(
        kubeconfig, "wait", "--for=jsonpath={.status.phase}=Active", f"ns/{ns}", "--timeout=20s"
    )
    assert done.stdout.strip() == f"namespace/{ns} condition met"


def test_delete_namespace_waits_until_it_and_its_contents_are_gone(
    cluster: Cluster, kubeconfig: Path
) -> None:
    ns = cluster.namespace()
    kubectl(kubeconfig, "create", "configmap", "c", "-n", ns, "--from-literal=a=b")
    kubectl(kubeconfig, "create", "secret", "generic", "s", "-n", ns, "--from-literal=a=b")
    deleted = kubectl(kubeconfig, "delete", "ns", ns, "--timeout=30s")
    assert deleted.stdout.strip() == f'namespace "{ns}" deleted'
    assert kubectl(kubeconfig, "get", "ns", ns, check=False).returncode == 1


def test_create_in_terminating_namespace_fails(cluster: Cluster, kubeconfig: Path) -> None:
    ns = cluster.namespace()
    held_config_map(cluster, ns, "held")
    kubectl(kubeconfig, "delete", "ns", ns, "--wait=false")
    refused = kubectl(kubeconfig, "create", "configmap", "late", "-n", ns, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f'error: failed to create configmap: configmaps "late" is forbidden: unable to create '
        f"new content in namespace {ns} because it is being terminated"
    )
    release(cluster, ns, "held")

    def gone() -> bool:
        return kubectl(kubeconfig, "get", "ns", ns, check=False).returncode == 1

    wait_for(gone, CONTROLLER_TIMEOUT, "the namespace to go")


def test_replace_with_stale_version_is_conflict(cluster: Cluster, kubeconfig: Path) -> None:
    ns = cluster.namespace()
    kubectl(kubeconfig, "create", "configmap", "c", "-n", ns, "--from-literal=a=b")
    stale = get_json(kubeconfig, "cm", "c", "-n", ns)
    kubectl(kubeconfig, "label", "cm", "c", "-n", ns, "x=y")
    stale["data"] = {"a": "changed"}
    replaced = kubectl(kubeconfig, "replace", "-f", "-", stdin=json.dumps(stale), check=False)
    assert replaced.returncode == 1
    assert (
        'Operation cannot be fulfilled on configmaps "c": the object has been modified'
        in replaced.stderr
    )


def test_create_role_and_binding(cluster: Cluster, kubeconfig: Path) -> None:
    ns = cluster.namespace()
    kubectl(
        kubeconfig,
        "create",
        "role",
        "reader",
        "-n",
        ns,
        "--verb=get,list",
        "--resource=configmaps",
        "--resource-name=one",
    )
    kubectl(
        kubeconfig,
        "create",
        "rolebinding",
        "readers",
        "-n",
        ns,
        "--role=reader",
        "--user=alice",
        "--serviceaccount=default:robot",
    )
    rules = get_json(kubeconfig, "role", "reader", "-n", ns)["rules"]
    assert rules == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["one"],
            "verbs": ["get", "list"],
        }
    ]
    binding = get_json(kubeconfig, "rolebinding", "readers", "-n", ns)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "reader",
    }
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
        {"kind": "ServiceAccount", "name": "robot", "namespace": "default"},
    ]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret_manifest(name: str, string_data: dict[str, str]) -> str:
    """A Secret written the way most people write one: plain text in ``stringData`` only."""
    lines = [f"  {key}: {value}" for key, value in string_data.items()]
    return "\n".join(
        ["apiVersion: v1", "kind: Secret", "metadata:", f"  name: {name}", "stringData:", *lines]
    )


@pytest.mark.parametrize("server_side", [False, True], ids=["apply", "server-side apply"])
def test_applied_string_data_is_stored_as_data_and_never_itself(
    cluster: Cluster, kubeconfig: Path, server_side: bool
) -> None:
    ns = cluster.namespace()
    manifest = secret_manifest("db", {"user": "admin", "password": "s3cret"})
    flags = ["--server-side"] if server_side else []

    kubectl(kubeconfig, "apply", "-n", ns, *flags, "-f", "-", stdin=manifest)

    stored = get_json(kubeconfig, "secret", "db", "-n", ns)
    assert stored["data"] == {"user": b64("admin"), "password": b64("s3cret")}
    assert "stringData" not in stored
    assert stored["type"] == "Opaque"
    changed = secret_manifest("db", {"user": "admin", "password": "n3w"})
    kubectl(kubeconfig, "apply", "-n", ns, *flags, "-f", "-", stdin=changed)
    again = get_json(kubeconfig, "secret", "db", "-n", ns)
    assert again["data"] == {"user": b64("admin"), "password": b64("n3w")}
    assert "stringData" not in again


@pytest.mark.parametrize(
    ("patch_type", "patch"),
    [
        ("strategic", {"stringData": {"password": "n3w"}}),
        ("merge", {"stringData": {"password": "n3w"}}),
        ("json", [{"op": "add", "path": "/stringData", "value": {"password": "n3w"}}]),
    ],
)
def test_patched_string_data_overwrites_that_key_of_data(
    cluster: Cluster, kubeconfig: Path, patch_type: str, patch: Any
) -> None:
    ns = cluster.namespace()
    kubectl(
        kubeconfig, "create", "secret", "generic", "db", "-n", ns,
        "--from-literal=user=admin", "--from-literal=password=s3cret",
    )  # fmt: skip

    kubectl(
        kubeconfig, "patch", "secret", "db", "-n", ns, "--type", patch_type, "-p", json.dumps(patch)
    )

    stored = get_json(kubeconfig, "secret", "db", "-n", ns)
    assert stored["data"] == {"user": b64("admin"), "password": b64("n3w")}
    assert "stringData" not in stored


def test_replaced_string_data_is_folded_over_the_data_sent_with_it(
    cluster: Cluster, kubeconfig: Path
) -> None:
    ns = cluster.namespace()
    kubectl(kubeconfig, "create", "secret", "generic", "db", "-n", ns, "--from-literal=a=1")
    current = get_json(kubeconfig, "secret", "db", "-n", ns)
    replacement = {**current, "data": {"a": b64("2"), "b": b64("2")}, "stringData": {"b": "3"}}

    kubectl(kubeconfig, "replace", "-f", "-", stdin=json.dumps(replacement))

    stored = get_json(kubeconfig, "secret", "db", "-n", ns)
    assert stored["data"] == {"a": b64("2"), "b": b64("3")}
    assert "stringData" not in stored


def test_string_data_that_is_not_text_is_a_bad_request(cluster: Cluster) -> None:
    ns = cluster.namespace()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}}

    with pytest.raises(k8s_client.ApiException) as refused:
        path = f"/api/v1/namespaces/{ns}/secrets"
        request(cluster.api_client, "POST", path, {**secret, "stringData": {"port": 5432}})

    assert refused.value.status == 400
    assert "Secret.stringData" in error_of(refused.value)["message"]
