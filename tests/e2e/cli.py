"""Running the plugin the way users do, and building the namespace trees its tests need.

``kubectl accurate ...`` goes through kubectl's own plugin lookup: the virtualenv's scripts
directory comes first on PATH, so kubectl finds the ``kubectl-accurate`` console script there.
Every name is unique and every namespace is cleaned up, so the tests also run against a real
cluster (ACCURATE_TEST_KUBECONFIG). The controller does not run in these tests: a sub-namespace
is made by hand, as the controller would have made it.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from accurate_testbed.cluster import Cluster
from accurate_testbed.manifests import MANIFESTS
from libaccurate import subnamespaces
from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_PROPAGATE,
    CREATED_BY_VALUE,
    FIELD_MANAGER,
    LABEL_CREATED_BY,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
    PROPAGATE_UPDATE,
    TYPE_ROOT,
    TYPE_TEMPLATE,
)
from libaccurate.network.kube import ApiError, Kube, resource_path
from tests.e2e.webhooks import connect, namespace

SCRIPTS = Path(sys.executable).parent


def plugin_env(kubeconfig: Path | None, **extra: str) -> dict[str, str]:
    """The environment of a user's shell: the plugin on PATH, no colour preferences or
    terminal width set (output goes to a pipe)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR", "COLUMNS")}
    env["PATH"] = f"{SCRIPTS}{os.pathsep}{env.get('PATH', '')}"
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return {**env, **extra}


def run_plugin(
    *args: str, kubeconfig: Path | None, direct: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    """``kubectl accurate ARGS`` (or ``kubectl-accurate ARGS`` when ``direct``)."""
    command = ["kubectl-accurate"] if direct else ["kubectl", "accurate"]
    return subprocess.run(
        [*command, *args],
        env=plugin_env(kubeconfig, **env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def succeeded(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    assert result.stderr == ""
    return result.stdout


def failed(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The error text of a command that failed with ``code`` and printed nothing else."""
    assert result.returncode == code, f"exit {result.returncode}: {result.stdout}"
    assert result.stdout == ""
    return result.stderr


class World:
    """Namespaces, SubNamespaces and propagated objects for one test, read back through the API."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.kube: Kube = connect(cluster)

    def run(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return run_plugin(*args, kubeconfig=self.cluster.kubeconfig, **kwargs)

    def namespace(self, prefix: str, labels: Mapping[str, str] | None = None) -> str:
        return namespace(self.cluster, prefix, dict(labels or {}))

    def root(self, prefix: str = "root") -> str:
        return self.namespace(prefix, {LABEL_TYPE: TYPE_ROOT})

    def template(self, prefix: str = "tmpl", template: str | None = None) -> str:
        labels = {LABEL_TYPE: TYPE_TEMPLATE, **({LABEL_TEMPLATE: template} if template else {})}
        return self.namespace(prefix, labels)

    def sub(
        self,
        parent: str,
        prefix: str = "sub",
        spec: Mapping[str, Any] | None = None,
        inherited: Mapping[str, str] | None = None,
    ) -> str:
        """A sub-namespace and its SubNamespace, as the controller leaves them: its labels
        (``inherited`` ones too) applied by the controller's field manager."""
        name = self.namespace(prefix)
        labels = {LABEL_PARENT: parent, LABEL_CREATED_BY: CREATED_BY_VALUE, **(inherited or {})}
        metadata = {"name": name, "labels": labels}
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        self.kube.apply(resource_path("", "v1", "namespaces", name=name), body, FIELD_MANAGER)
        self.create_subnamespace(parent, name, spec)
        return name

    def create_subnamespace(
        self, parent: str, name: str, spec: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        body = subnamespaces.build(parent, name)
        body["spec"] = dict(spec or {})
        return self.kube.create(subnamespaces.path(parent), body)

    def role(self, namespace: str, name: str, mode: str = "", source: str = "") -> dict[str, Any]:
        """A Role, a propagation source in ``mode``, or a copy when ``source`` is given."""
        annotations = {
            **({ANNOTATION_PROPAGATE: mode} if mode else {}),
            **({ANNOTATION_FROM: source} if source else {}),
        }
        body = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "annotations": annotations},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        }
        path = resource_path("rbac.authorization.k8s.io", "v1", "roles", namespace)
        return self.kube.create(path, body)

    def get_namespace(self, name: str) -> dict[str, Any]:
        return self.kube.get(resource_path("", "v1", "namespaces", name=name))

    def labels(self, name: str) -> dict[str, str]:
        """The namespace's labels but those the server and the test suite put on every one."""
        labels = self.get_namespace(name)["metadata"].get("labels") or {}
        hidden = {"kubernetes.io/metadata.name", *self.cluster.labels}
        return {k: v for k, v in labels.items() if k not in hidden}

    def subnamespace(self, parent: str, name: str) -> dict[str, Any] | None:
        return self.kube.find(subnamespaces.path(parent, name))

    def versions(self, *namespaces: str) -> dict[str, Any]:
        """The resourceVersion of each namespace and of every SubNamespace in them: equal
        before and after means nothing was written."""
        found: dict[str, Any] = {}
        for name in namespaces:
            found[name] = self.get_namespace(name)["metadata"]["resourceVersion"]
            for sub in self.kube.list_objects(subnamespaces.path(name)).get("items") or []:
                found[f"{name}/{sub['metadata']['name']}"] = sub["metadata"]["resourceVersion"]
        return found


TENANT_GRANT = "tenant-admin"


def tenant_grant(root: str, user: str) -> dict[str, Any]:
    """The RoleBinding that makes ``user`` a tenant: ``admin`` in ``root``, annotated to be
    copied into every namespace below it."""
    rbac = "rbac.authorization.k8s.io"
    return {
        "apiVersion": f"{rbac}/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": TENANT_GRANT,
            "namespace": root,
            "annotations": {ANNOTATION_PROPAGATE: PROPAGATE_UPDATE},
        },
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"apiGroup": rbac, "kind": "User", "name": user}],
    }


def install_subnamespace_roles(cluster: Cluster, kube: Kube) -> None:
    """The SubNamespace roles Accurate ships, aggregated into ``admin``, ``edit`` and ``view``,
    unless the cluster has them already; removed after the test if installed here."""
    text = (MANIFESTS / "rbac" / "subnamespace_roles.yaml").read_text()
    install_cluster_roles(cluster, kube, list(yaml.safe_load_all(text)))


def install_cluster_roles(cluster: Cluster, kube: Kube, roles: list[dict[str, Any]]) -> None:
    """The ClusterRoles ``roles``, each unless the cluster has it already; those installed
    here are removed after the test."""
    path = resource_path("rbac.authorization.k8s.io", "v1", "clusterroles")
    for role in roles:
        name = role["metadata"]["name"]
        try:
            kube.get(f"{path}/{name}")
        except ApiError as error:
            if not error.not_found:
                raise
            kube.create(path, role)
            cluster.on_cleanup(functools.partial(kube.delete, f"{path}/{name}"))


def field(output: str, label: str) -> str:
    match = re.search(rf"^{label}:\s+(.*)$", output, re.MULTILINE)
    assert match, f"no {label} in:\n{output}"
    return match.group(1)


def resource_rows(output: str) -> list[list[str]]:
    lines = output.split("Resources:\n", 1)[1].splitlines()
    assert lines[0].split() == ["KIND", "NAME", "FROM", "MODE"]
    return [line.split() for line in lines[1:] if line.startswith("  ")]
