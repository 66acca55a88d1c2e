"""The ClusterRoles and ClusterRoleBindings every cluster starts with, as far as the product and
its tests rely on them.

Taken from kube-apiserver's bootstrap policy (its testdata cluster-roles.yaml): the user-facing
roles cluster-admin, admin, edit and view (the last three aggregated from the
``system:aggregate-to-*`` roles, so operators' ``aggregate-to-admin`` roles reach namespace
admins), the discovery, basic-user and public-info roles that let every authenticated user
discover the API and review its own access, and the aggregation controller's own role.
"""

from __future__ import annotations

from typing import Any

from accurate_testbed.apiserver.rbac import AUTHENTICATED, MASTERS, UNAUTHENTICATED
from accurate_testbed.apiserver.resources import RBAC

Obj = dict[str, Any]

AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
AGGREGATION_CONTROLLER = "system:serviceaccount:kube-system:clusterrole-aggregation-controller"
_ALL = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_READ = ["get", "list", "watch"]


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _urls(urls: list[str], verbs: list[str]) -> Obj:
    return {"nonResourceURLs": urls, "verbs": verbs}


def _metadata(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults", **(labels or {})},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    }


def _role(name: str, rules: list[Obj], labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": _metadata(name, labels),
        "rules": rules,
    }


def _aggregated(name: str, labels: dict[str, str] | None = None) -> Obj:
    """A role whose rules the aggregation controller gathers from ``aggregate-to-NAME`` roles."""
    role = _role(name, [], labels)
    role["aggregationRule"] = {
        "clusterRoleSelectors": [{"matchLabels": {f"{AGGREGATE_TO}{name}": "true"}}]
    }
    return role


def _binding(name: str, subjects: list[Obj]) -> Obj:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _metadata(name),
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    }


def _group(name: str) -> Obj:
    return {"apiGroup": RBAC, "kind": "Group", "name": name}


_AGGREGATE_TO_ADMIN = [
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    _rule([RBAC], ["rolebindings", "roles"], _ALL),
]
_AGGREGATE_TO_EDIT = [
    _rule(
        [""],
        [
            "pods/attach",
            "pods/exec",
            "pods/portforward",
            "pods/proxy",
            "secrets",
            "services/proxy",
        ],
        _READ,
    ),
    _rule([""], ["serviceaccounts"], ["impersonate"]),
    _rule([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], _WRITE),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule(
        [""],
        [
            "configmaps",
            "events",
            "persistentvolumeclaims",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "secrets",
            "serviceaccounts",
            "services",
            "services/proxy",
        ],
        _WRITE,
    ),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule(
        ["apps"],
        [
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "replicasets",
            "replicasets/scale",
            "statefulsets",
            "statefulsets/scale",
        ],
        _WRITE,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], _WRITE),
    _rule(["batch"], ["cronjobs", "jobs"], _WRITE),
    _rule(
        ["extensions"],
        [
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "ingresses",
            "networkpolicies",
            "replicasets",
            "replicasets/scale",
            "replicationcontrollers/scale",
        ],
        _WRITE,
    ),
    _rule(["policy"], ["poddisruptionbudgets"], _WRITE),
    _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], _WRITE),
    _rule(["coordination.k8s.io"], ["leases"], _ALL),
]
_AGGREGATE_TO_VIEW = [
    _rule(
        [""],
        [
            "configmaps",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
        ],
        _READ,
    ),
    _rule(
        [""],
        [
            "bindings",
            "events",
            "limitranges",
            "namespaces/status",
            "pods/log",
            "pods/status",
            "replicationcontrollers/status",
            "resourcequotas",
            "resourcequotas/status",
        ],
        _READ,
    ),
    _rule([""], ["namespaces"], _READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], _READ),
    _rule(
        ["apps"],
        [
            "controllerrevisions",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
        _READ,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], _READ),
    _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], _READ),
    _rule(
        ["extensions"],
        [
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "ingresses",
            "ingresses/status",
            "networkpolicies",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "replicationcontrollers/scale",
        ],
        _READ,
    ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], _READ),
    _rule(["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"], _READ),
]
_PUBLIC_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
_DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi"]
_DISCOVERY_URLS += ["/openapi/*", "/readyz", "/version", "/version/"]


def cluster_roles() -> list[Obj]:
    """Fresh copies, aggregated roles without their rules yet. Each role comes after those it
    aggregates, so that the aggregation controller, running meanwhile, never sees one whose
    sources are missing."""
    return [
        _role("cluster-admin", [_rule(["*"], ["*"], ["*"]), _urls(["*"], ["*"])]),
        _role("system:aggregate-to-view", _AGGREGATE_TO_VIEW, {f"{AGGREGATE_TO}view": "true"}),
        _role("system:aggregate-to-edit", _AGGREGATE_TO_EDIT, {f"{AGGREGATE_TO}edit": "true"}),
        _role("system:aggregate-to-admin", _AGGREGATE_TO_ADMIN, {f"{AGGREGATE_TO}admin": "true"}),
        _aggregated("view", {f"{AGGREGATE_TO}edit": "true"}),
        _aggregated("edit", {f"{AGGREGATE_TO}admin": "true"}),
        _aggregated("admin"),
        _role(
            "system:basic-user",
            [
                _rule(
                    ["authorization.k8s.io"],
                    ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    ["create"],
                ),
                _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
            ],
        ),
        _role("system:discovery", [_urls(_DISCOVERY_URLS, ["get"])]),
        _role("system:public-info-viewer", [_urls(_PUBLIC_URLS, ["get"])]),
        _role(
            "system:controller:clusterrole-aggregation-controller",
            [
                _rule(
                    [RBAC],
                    ["clusterroles"],
                    ["escalate", "get", "list", "patch", "update", "watch"],
                )
            ],
        ),
    ]


def cluster_role_bindings() -> list[Obj]:
    controller = {
        "kind": "ServiceAccount",
        "name": "clusterrole-aggregation-controller",
        "namespace": "kube-system",
    }
    return [
        _binding("cluster-admin", [_group(MASTERS)]),
        _binding("system:basic-user", [_group(AUTHENTICATED)]),
        _binding("system:discovery", [_group(AUTHENTICATED)]),
        _binding("system:public-info-viewer", [_group(AUTHENTICATED), _group(UNAUTHENTICATED)]),
        _binding("system:controller:clusterrole-aggregation-controller", [controller]),
    ]
