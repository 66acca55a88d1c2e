"""Contract: ResourceQuota as kube-apiserver and kube-controller-manager enforce and count it.

Each rule is read from the Kubernetes source named in its test: the quota admission plugin
(``apiserver/pkg/admission/plugin/resourcequota/controller.go``), the evaluators
(``pkg/quota/v1/evaluator/core/{pods,services,persistent_volume_claims}.go``,
``apiserver/pkg/quota/v1/generic/evaluator.go``), the quota controller
(``pkg/controller/resourcequota/resource_quota_controller.go``) and the printers
(``pkg/printers/internalversion/printers.go``). Quotas live in namespaces of the test's own, so
the tests run unchanged against a real cluster (ACCURATE_TEST_KUBECONFIG).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubernetes import client as k8s_client

from accurate_testbed.cluster import Cluster
from accurate_testbed.kubectl import kubectl
from accurate_testbed.tests.helpers import error_of, request
from accurate_testbed.tests.test_custom import GROUP, collection, widgets  # noqa: F401
from accurate_testbed.tests.test_webhooks import webhook  # noqa: F401
from accurate_testbed.tests.webhook_server import WebhookServer, allow, denied
from accurate_testbed.waiting import CONTROLLER_TIMEOUT, wait_for

PAUSE = "registry.k8s.io/pause:3.9"
MERGE = "application/merge-patch+json"


def quotas(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/resourcequotas" + (f"/{name}" if name else "")


def core(ns: str, plural: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/{plural}" + (f"/{name}" if name else "")


def quota_namespace(cluster: Cluster) -> str:
    """A namespace of the test's where pods may be created: on a real cluster the
    ServiceAccount admission plugin refuses pods until the ``default`` ServiceAccount exists."""
    ns = cluster.namespace("quota")
    if cluster.is_real:
        wait_for(
            lambda: _exists(cluster, f"/api/v1/namespaces/{ns}/serviceaccounts/default"),
            CONTROLLER_TIMEOUT,
            "the default ServiceAccount",
        )
    return ns


def _exists(cluster: Cluster, path: str) -> bool:
    try:
        request(cluster.api_client, "GET", path)
    except k8s_client.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def make_quota(
    cluster: Cluster, ns: str, hard: dict[str, Any], name: str = "q", **spec: Any
) -> Any:
    """Create a ResourceQuota and wait for the controller to count its usage: until then quota
    admission ignores it (it reads what a quota tracks from status.hard)."""
    body = {"metadata": {"name": name}, "spec": {"hard": hard, **spec}}
    request(cluster.api_client, "POST", quotas(ns), body)
    return wait_for(
        lambda: counted(cluster, ns, name), CONTROLLER_TIMEOUT, f"quota {name} to be counted"
    )


def counted(cluster: Cluster, ns: str, name: str) -> Any:
    quota = request(cluster.api_client, "GET", quotas(ns, name))
    status = quota.get("status") or {}
    hard = status.get("hard")
    if (
        hard is None
        or set(hard) != set(quota["spec"]["hard"])
        or set(status.get("used") or {}) != set(hard)
    ):
        return None
    return quota


def used(cluster: Cluster, ns: str, name: str = "q") -> dict[str, str]:
    return dict(request(cluster.api_client, "GET", quotas(ns, name))["status"]["used"])


def refusal(
    cluster: Cluster,
    method: str,
    path: str,
    body: Any,
    query: list | None = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    with pytest.raises(k8s_client.ApiException) as refused:
        request(cluster.api_client, method, path, body, content_type, query=query)
    return error_of(refused.value)


def container(name: str, requests: dict | None = None, limits: dict | None = None) -> dict:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"name": name, "image": PAUSE, "resources": resources}


def pod(name: str, *containers: dict, **spec: Any) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": list(containers), **spec}}


def forbidden(resource: str, name: str, why: str) -> dict[str, Any]:
    """admission.NewForbidden as the client receives it."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{resource} "{name}" is forbidden: {why}',
        "reason": "Forbidden",
        "details": {"name": name, "kind": resource},
        "code": 403,
    }


# -- spec, status and quantities -----------------------------------------------------------------


def test_status_mirrors_hard_and_counts_usage_in_canonical_quantities(cluster: Cluster) -> None:
    """resource.Quantity is stored in canonical form (``1.5`` is ``1500m``, ``1024Mi`` is
    ``1Gi``, ``1e3`` keeps its exponent) after SetDefaults_ResourceList rounded it up to
    milli-units; syncResourceQuota copies spec.hard to status.hard and starts each used at
    ``0``."""
    ns = quota_namespace(cluster)
    hard = {
        "cpu": 1.5,
        "requests.memory": "1024Mi",
        "limits.cpu": "2000m",
        "requests.cpu": "0.0001",
        "secrets": "1e3",
    }

    quota = make_quota(cluster, ns, hard)

    canonical = {
        "cpu": "1500m",
        "requests.memory": "1Gi",
        "limits.cpu": "2",
        "requests.cpu": "1m",
        "secrets": "1e3",
    }
    assert quota["spec"]["hard"] == canonical
    assert quota["status"] == {"hard": canonical, "used": dict.fromkeys(canonical, "0")}


def test_a_quantity_that_does_not_parse_is_a_decoding_error(cluster: Cluster) -> None:
    """Quantity.UnmarshalJSON fails the whole decoding (apimachinery's quantity.go)."""
    ns = cluster.namespace("quota")

    status = refusal(
        cluster, "POST", quotas(ns), {"metadata": {"name": "q"}, "spec": {"hard": {"cpu": "1.5.5"}}}
    )

    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert status["message"] == (
        'ResourceQuota in version "v1" cannot be handled as a ResourceQuota: '
        "quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )


def selecting(scope: str, operator: str, values: list[str] | None = None) -> dict:
    requirement = {"scopeName": scope, "operator": operator}
    return {"matchExpressions": [{**requirement, **({"values": values} if values else {})}]}


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (
            {"hard": {"foo": "1"}},
            "[spec.hard[foo]: Invalid value: foo: must be a standard resource type or fully "
            "qualified, spec.hard[foo]: Invalid value: foo: must be a standard resource for "
            "quota]",
        ),
        (
            {"hard": {"storage": "1Gi"}},
            "spec.hard[storage]: Invalid value: storage: must be a standard resource for quota",
        ),
        (
            {"hard": {"pods": "-1"}},
            'spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0',
        ),
        (
            {"hard": {"cpu": "1"}, "scopes": ["BestEffort"]},
            'spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort"}: unsupported '
            "scope applied to resource",
        ),
        (
            {"hard": {"pods": "1"}, "scopes": ["Terminating", "NotTerminating"]},
            'spec.scopes: Invalid value: []core.ResourceQuotaScope{"Terminating", '
            '"NotTerminating"}: conflicting scopes',
        ),
        (
            {"hard": {"pods": "1"}, "scopeSelector": selecting("PriorityClass", "In")},
            "spec.scopeSelector.matchExpressions.values: Required value: must be at least one "
            "value when `operator` is 'In' or 'NotIn' for scope selector",
        ),
        (
            {"hard": {"pods": "1"}, "scopeSelector": selecting("BestEffort", "In", ["x"])},
            "spec.scopeSelector.matchExpressions.operator: Invalid value: \"In\": must be 'Exists' "
            "when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, "
            "ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or "
            "ResourceQuotaScopeCrossNamespacePodAffinity",
        ),
        (
            {"hard": {"pods": "1"}, "scopeSelector": selecting("PriorityClass", "Exists", ["x"])},
            'spec.scopeSelector.matchExpressions.values: Invalid value: []string{"x"}: must be '
            "no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
        ),
        (
            {"hard": {"cpu": "1"}, "scopeSelector": selecting("BestEffort", "Exists")},
            "spec.scopeSelector.matchExpressions: Invalid value: core.ScopeSelector{"
            "MatchExpressions:[]core.ScopedResourceSelectorRequirement{"
            'core.ScopedResourceSelectorRequirement{ScopeName:"BestEffort", Operator:"Exists", '
            "Values:[]string(nil)}}}: unsupported scope applied to resource",
        ),
        (
            {"hard": {"pods": "1500m"}},
            "spec.hard[pods]: Invalid value: resource.Quantity{i:resource.int64Amount{"
            'value:1500, scale:-3}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"1500m", '
            'Format:"DecimalSI"}: must be an integer',
        ),
        (
            {"hard": {"count/secrets": "1E"}},
            "spec.hard[count/secrets]: Invalid value: resource.Quantity{i:resource.int64Amount{"
            'value:1, scale:18}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"1E", '
            'Format:"DecimalSI"}: must be an integer',
        ),
    ],
    ids=[
        "unknown",
        "storage",
        "negative",
        "scope for pods only",
        "conflicting scopes",
        "selector without values",
        "selector operator",
        "selector values",
        "selector scope for pods only",
        "not whole",
        "too large to count in millis",
    ],
)
def test_an_invalid_quota_is_refused(cluster: Cluster, spec: dict, said: str) -> None:
    """ValidateResourceQuota (pkg/apis/core/validation/validation.go)."""
    ns = cluster.namespace("quota")

    status = refusal(cluster, "POST", quotas(ns), {"metadata": {"name": "q"}, "spec": spec})

    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["message"] == f'ResourceQuota "q" is invalid: {said}'


def test_scopes_may_not_change(cluster: Cluster) -> None:
    """ValidateResourceQuotaUpdate."""
    ns = cluster.namespace("quota")
    body = {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}}
    request(cluster.api_client, "POST", quotas(ns), body)
    patch = {"spec": {"scopes": ["NotBestEffort"]}}

    status = refusal(cluster, "PATCH", quotas(ns, "q"), patch, content_type=MERGE)

    assert status["message"] == (
        'ResourceQuota "q" is invalid: spec.scopes: Invalid value: '
        '[]core.ResourceQuotaScope{"NotBestEffort"}: field is immutable'
    )


# -- admission -----------------------------------------------------------------------------------


def test_a_create_over_the_quota_is_refused_naming_the_quota_and_the_numbers(
    cluster: Cluster,
) -> None:
    """CheckRequest: ``exceeded quota: <name>, requested: ..., used: ..., limited: ...``, only
    the resources over their limit, sorted and joined by ``,`` (prettyPrint)."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"secrets": "1", "count/secrets": "1", "services": "5"})
    request(cluster.api_client, "POST", core(ns, "secrets"), {"metadata": {"name": "one"}})

    status = refusal(cluster, "POST", core(ns, "secrets"), {"metadata": {"name": "two"}})

    assert status == forbidden(
        "secrets",
        "two",
        "exceeded quota: q, requested: count/secrets=1,secrets=1, "
        "used: count/secrets=1,secrets=1, limited: count/secrets=1,secrets=1",
    )
    assert used(cluster, ns) == {"secrets": "1", "count/secrets": "1", "services": "0"}


def test_kubectl_shows_the_refusal(cluster: Cluster) -> None:
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"requests.cpu": "1"})
    manifest = {"apiVersion": "v1", "kind": "Pod", **pod("big", container("app", {"cpu": "1.5"}))}

    result = kubectl(cluster.kubeconfig, "-n", ns, "create", "-f", "-", stdin=manifest)

    assert result.returncode == 1
    assert result.stderr == (
        'Error from server (Forbidden): error when creating "STDIN": pods "big" is forbidden: '
        "exceeded quota: q, requested: requests.cpu=1500m, used: requests.cpu=0, "
        "limited: requests.cpu=1\n"
    )


def test_pods_must_say_what_a_quota_on_cpu_or_memory_tracks(cluster: Cluster) -> None:
    """podEvaluator.Constraints: ``failed quota: <name>: must specify <resource> for:
    <containers>`` per resource, sorted, joined by ``; ``; init containers too. A limit alone
    also requests it (SetDefaults_Pod)."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"requests.cpu": "4", "limits.memory": "4Gi"})
    body = pod(
        "p",
        container("b-app", {"cpu": "100m"}),
        container("a-side"),
        initContainers=[container("init", limits={"memory": "64Mi"})],
    )

    status = refusal(cluster, "POST", core(ns, "pods"), body)

    assert status == forbidden(
        "pods",
        "p",
        "failed quota: q: must specify limits.memory for: a-side,b-app; "
        "requests.cpu for: a-side,init",
    )

    fine = pod("fine", container("app", limits={"cpu": "100m", "memory": "64Mi"}))
    request(cluster.api_client, "POST", core(ns, "pods"), fine)
    assert used(cluster, ns) == {"requests.cpu": "100m", "limits.memory": "64Mi"}


def test_pod_usage_sums_containers_and_takes_the_largest_init_container(cluster: Cluster) -> None:
    """PodRequests/PodLimits (pkg/api/v1/resource/helpers.go) and podComputeUsageHelper:
    ``cpu`` and ``memory`` are ``requests.*``; extended resources count as ``requests.<name>``;
    ``count/pods`` and ``pods`` are one each."""
    ns = quota_namespace(cluster)
    hard = {
        "pods": "10",
        "count/pods": "10",
        "cpu": "10",
        "requests.cpu": "10",
        "limits.cpu": "10",
        "memory": "10Gi",
        "requests.example.com/gpu": "4",
    }
    make_quota(cluster, ns, hard)
    body = pod(
        "p",
        container("a", {"cpu": "250m", "memory": "1Gi"}, {"cpu": "500m"}),
        container("b", {"cpu": "0.5", "memory": "512Mi"}, {"cpu": "1", "example.com/gpu": "1"}),
        initContainers=[container("init", {"cpu": "1", "memory": "256Mi"}, {"cpu": "1"})],
    )

    request(cluster.api_client, "POST", core(ns, "pods"), body)

    assert used(cluster, ns) == {
        "pods": "1",
        "count/pods": "1",
        "cpu": "1",
        "requests.cpu": "1",
        "limits.cpu": "1500m",
        "memory": "1536Mi",
        "requests.example.com/gpu": "1",
    }


def test_scopes_select_the_pods_a_quota_counts(cluster: Cluster) -> None:
    """podMatchesScopeFunc: BestEffort (no cpu or memory asked for anywhere), Terminating
    (activeDeadlineSeconds), and a scopeSelector on PriorityClass; a quota whose scopes do not
    match the pod neither counts nor refuses it."""
    ns = quota_namespace(cluster)
    priority = cluster.unique("quota-priority")
    scheduling = "/apis/scheduling.k8s.io/v1/priorityclasses"
    request(
        cluster.api_client,
        "POST",
        scheduling,
        {"metadata": {"name": priority, "labels": cluster.labels}, "value": 1000},
    )
    cluster.on_cleanup(lambda: request(cluster.api_client, "DELETE", f"{scheduling}/{priority}"))
    make_quota(cluster, ns, {"pods": "1"}, name="best-effort", scopes=["BestEffort"])
    make_quota(cluster, ns, {"pods": "5"}, name="terminating", scopes=["Terminating"])
    selector = {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": [priority]}]
    }
    make_quota(cluster, ns, {"pods": "5"}, name="priority", scopeSelector=selector)

    request(cluster.api_client, "POST", core(ns, "pods"), pod("idle", container("c")))
    status = refusal(cluster, "POST", core(ns, "pods"), pod("idle2", container("c")))
    assert status["message"].startswith('pods "idle2" is forbidden: exceeded quota: best-effort,')
    asking = container("c", {"cpu": "10m"})
    request(
        cluster.api_client,
        "POST",
        core(ns, "pods"),
        pod("job", asking, activeDeadlineSeconds=60, priorityClassName=priority),
    )

    counts = {
        name: used(cluster, ns, name)["pods"] for name in ("best-effort", "terminating", "priority")
    }
    assert counts == {"best-effort": "1", "terminating": "1", "priority": "1"}


def test_storage_is_counted_per_storage_class(cluster: Cluster) -> None:
    """pvcEvaluator: ``requests.storage``, ``persistentvolumeclaims`` and both per class as
    ``<class>.storageclass.storage.k8s.io/<resource>``."""
    ns = quota_namespace(cluster)
    gold = "gold.storageclass.storage.k8s.io/requests.storage"
    make_quota(
        cluster, ns, {"requests.storage": "10Gi", "persistentvolumeclaims": "5", gold: "1Gi"}
    )

    def claim(name: str, size: str) -> dict:
        spec = {
            "storageClassName": "gold",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        }
        return {"metadata": {"name": name}, "spec": spec}

    request(cluster.api_client, "POST", core(ns, "persistentvolumeclaims"), claim("a", "600Mi"))
    status = refusal(cluster, "POST", core(ns, "persistentvolumeclaims"), claim("b", "600Mi"))

    assert status["message"] == (
        'persistentvolumeclaims "b" is forbidden: exceeded quota: q, requested: '
        f"{gold}=600Mi, used: {gold}=600Mi, limited: {gold}=1Gi"
    )
    assert used(cluster, ns) == {
        "requests.storage": "600Mi",
        "persistentvolumeclaims": "1",
        gold: "600Mi",
    }


def test_services_count_node_ports_and_load_balancers_also_on_update(cluster: Cluster) -> None:
    """serviceEvaluator handles CREATE and UPDATE (a service's type can change); an UPDATE is
    charged the difference (SubtractWithNonNegativeResult)."""
    ns = quota_namespace(cluster)
    make_quota(
        cluster, ns, {"services": "5", "services.nodeports": "2", "services.loadbalancers": "0"}
    )
    ports = [{"name": "a", "port": 80}, {"name": "b", "port": 81}]
    svc = {"metadata": {"name": "web"}, "spec": {"type": "ClusterIP", "ports": ports}}
    request(cluster.api_client, "POST", core(ns, "services"), svc)

    patch = {"spec": {"type": "NodePort"}}
    request(cluster.api_client, "PATCH", core(ns, "services", "web"), patch, MERGE)
    assert used(cluster, ns) == {
        "services": "1",
        "services.nodeports": "2",
        "services.loadbalancers": "0",
    }

    balancer = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": ports[:1]}}
    status = refusal(cluster, "POST", core(ns, "services"), balancer)
    assert status["message"] == (
        'services "lb" is forbidden: exceeded quota: q, requested: '
        "services.loadbalancers=1,services.nodeports=1, used: "
        "services.loadbalancers=0,services.nodeports=2, limited: "
        "services.loadbalancers=0,services.nodeports=2"
    )


def test_any_resource_is_counted_by_count_slash_resource_dot_group(
    cluster: Cluster,
    widgets: str,  # noqa: F811
) -> None:
    """The object count evaluator quota admission makes for any resource, custom ones included
    (Evaluate: generic.NewObjectCountEvaluator)."""
    ns = quota_namespace(cluster)
    name = f"count/{widgets}.{GROUP}"
    make_quota(cluster, ns, {name: "1", "count/deployments.apps": "1"})
    request(
        cluster.api_client,
        "POST",
        collection(ns, widgets),
        {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w1"}},
    )
    labels = {"app": "idle"}
    deployment = {
        "metadata": {"name": "idle"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container("c")]}},
        },
    }
    request(cluster.api_client, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", deployment)

    body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w2"}}
    status = refusal(cluster, "POST", collection(ns, widgets), body)

    assert status["message"] == (
        f'{widgets}.{GROUP} "w2" is forbidden: exceeded quota: q, requested: {name}=1, '
        f"used: {name}=1, limited: {name}=1"
    )
    assert status["details"] == {"name": "w2", "group": GROUP, "kind": widgets}
    assert used(cluster, ns) == {name: "1", "count/deployments.apps": "1"}


def test_a_dry_run_is_checked_but_not_charged(cluster: Cluster) -> None:
    """checkQuotas: a dry-run request is refused as the real one would be, and never updates
    the quota."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"secrets": "1"})
    dry = [("dryRun", "All")]

    answered = request(
        cluster.api_client, "POST", core(ns, "secrets"), {"metadata": {"name": "a"}}, query=dry
    )
    assert answered["metadata"]["name"] == "a"
    assert used(cluster, ns) == {"secrets": "0"}
    request(cluster.api_client, "POST", core(ns, "secrets"), {"metadata": {"name": "b"}})
    status = refusal(cluster, "POST", core(ns, "secrets"), {"metadata": {"name": "c"}}, dry)

    assert status["message"].startswith('secrets "c" is forbidden: exceeded quota: q,')


def test_concurrent_creates_for_the_last_unit_let_exactly_one_through(cluster: Cluster) -> None:
    """The quota's resourceVersion serialises the charges: every status update carries the
    version it was computed from, and the loser of a race re-reads and is checked again."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"secrets": "1"})
    outcomes: list[int] = []
    start = threading.Barrier(8)

    def create(index: int) -> None:
        start.wait()
        try:
            request(
                cluster.api_client, "POST", core(ns, "secrets"), {"metadata": {"name": f"s{index}"}}
            )
            outcomes.append(201)
        except k8s_client.ApiException as error:
            outcomes.append(int(error.status))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == [201] + [403] * 7
    assert used(cluster, ns) == {"secrets": "1"}


# -- the status update goes through admission ----------------------------------------------------


def watch_quota_status(cluster: Cluster, server: WebhookServer, ns: str, timeout: int = 5) -> str:
    """A validating webhook on UPDATE of resourcequotas/status in ``ns`` only; its name."""
    name = cluster.unique("quota-status")
    hook = {
        "name": f"{name}.example.com",
        "clientConfig": {"url": server.url(), "caBundle": server.ca_bundle},
        "rules": [
            {
                "operations": ["UPDATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["resourcequotas/status"],
            }
        ],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": timeout,
    }
    body = {"metadata": {"name": name, "labels": cluster.labels}, "webhooks": [hook]}
    path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    request(cluster.api_client, "POST", path, body)
    return str(hook["name"])


def test_the_charge_is_a_status_update_by_the_apiserver_that_webhooks_see(
    cluster: Cluster,
    webhook: WebhookServer,  # noqa: F811
) -> None:
    """UpdateQuotaStatus goes through the loopback client: an ordinary UPDATE of
    resourcequotas/status, by ``system:apiserver`` (group ``system:masters``), carrying the
    new usage, made before the object is stored."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"secrets": "3"})
    watch_quota_status(cluster, webhook, ns)

    request(cluster.api_client, "POST", core(ns, "secrets"), {"metadata": {"name": "a"}})

    reviews = [
        r["request"]
        for r in webhook.reviews
        if r["request"]["userInfo"]["username"] == "system:apiserver"
    ]
    assert len(reviews) == 1
    seen = reviews[0]
    assert (seen["operation"], seen["subResource"], seen["name"]) == ("UPDATE", "status", "q")
    assert "system:masters" in seen["userInfo"]["groups"]
    assert seen["object"]["status"]["used"] == {"secrets": "1"}
    assert seen["oldObject"]["status"]["used"] == {"secrets": "0"}


# The options the quota writers' clients send: ``metav1.UpdateOptions{}``, no field manager.
BARE_UPDATE_OPTIONS = {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}


def test_the_servers_own_status_updates_name_no_field_manager_to_webhooks(
    cluster: Cluster,
    webhook: WebhookServer,  # noqa: F811
) -> None:
    """Both status writers call ``UpdateStatus(ctx, quota, metav1.UpdateOptions{})``: the quota
    admission's loopback client (``apiserver/pkg/admission/plugin/resourcequota/
    resource_access.go``, UpdateQuotaStatus) and the quota controller
    (``pkg/controller/resourcequota/resource_quota_controller.go``, syncResourceQuota). The
    update handler (``apiserver/pkg/endpoints/handlers/update.go``) hands admission the options
    decoded from the query as they are; the manager it takes from the User-Agent when they name
    none goes to managedFields only. So a webhook sees no ``fieldManager`` in either review."""
    ns = quota_namespace(cluster)
    watch_quota_status(cluster, webhook, ns)
    make_quota(cluster, ns, {"secrets": "3"})
    request(cluster.api_client, "POST", core(ns, "secrets"), {"metadata": {"name": "a"}})

    reviews = [review["request"] for review in webhook.reviews]
    # The controller's count of the new quota, then the loopback charge of the Secret.
    users = {review["userInfo"]["username"] for review in reviews}
    assert "system:apiserver" in users and len(users) == 2
    assert [review["options"] for review in reviews] == [BARE_UPDATE_OPTIONS] * len(reviews)


def test_a_webhook_refusing_the_status_update_fails_the_request_with_its_refusal(
    cluster: Cluster,
    webhook: WebhookServer,  # noqa: F811
) -> None:
    """checkQuotas retries a failed status update three times (re-reading the quota), then
    fails the request with the last error, which the loopback client decoded from the
    webhook's refusal (ToStatusErr): its code and message reach the user unchanged."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"secrets": "3"})
    webhook.answer = lambda review: (
        denied("the tree is full", code=403, reason="Forbidden")
        if review["userInfo"]["username"] == "system:apiserver"
        else allow(review)
    )
    hook = watch_quota_status(cluster, webhook, ns)

    status = refusal(cluster, "POST", core(ns, "secrets"), {"metadata": {"name": "a"}})

    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'admission webhook "{hook}" denied the request: the tree is full',
        "reason": "Forbidden",
        "code": 403,
    }
    calls = [
        r for r in webhook.reviews if r["request"]["userInfo"]["username"] == "system:apiserver"
    ]
    assert len(calls) == 4
    assert not _exists(cluster, core(ns, "secrets", "a"))
    assert used(cluster, ns) == {"secrets": "0"}


def test_a_quota_check_that_takes_too_long_fails_the_request_but_goes_on(
    cluster: Cluster,
    webhook: WebhookServer,  # noqa: F811
) -> None:
    """Evaluate waits 10 seconds for the check, then answers NewInternalError; the worker goes
    on, so a slow status update that is let through still charges the quota for an object that
    was never stored (the controller's next full recount gives it back)."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"secrets": "3"})

    def slow(review: dict[str, Any]) -> dict[str, Any]:
        if review["userInfo"]["username"] == "system:apiserver":
            time.sleep(12)
        return allow(review)

    webhook.answer = slow
    watch_quota_status(cluster, webhook, ns, timeout=20)

    status = refusal(cluster, "POST", core(ns, "secrets"), {"metadata": {"name": "a"}})

    assert (status["code"], status["reason"]) == (500, "InternalError")
    assert status["message"] == "Internal error occurred: resource quota evaluation timed out"
    assert not _exists(cluster, core(ns, "secrets", "a"))
    wait_for(lambda: used(cluster, ns) == {"secrets": "1"}, 30, "the late charge")


# -- the quota controller ------------------------------------------------------------------------


def test_usage_is_given_back_after_a_delete_and_hard_follows_spec(cluster: Cluster) -> None:
    """The quota monitor replenishes on deletion; syncResourceQuota copies a changed
    spec.hard into status.hard and counts the new resources."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"secrets": "1"})
    request(cluster.api_client, "POST", core(ns, "secrets"), {"metadata": {"name": "a"}})
    request(
        cluster.api_client,
        "POST",
        core(ns, "services"),
        {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}},
    )

    request(cluster.api_client, "DELETE", core(ns, "secrets", "a"))
    wait_for(lambda: used(cluster, ns) == {"secrets": "0"}, CONTROLLER_TIMEOUT, "usage given back")
    patch = {"spec": {"hard": {"secrets": "2", "services": "4"}}}
    request(cluster.api_client, "PATCH", quotas(ns, "q"), patch, MERGE)

    quota = wait_for(
        lambda: counted(cluster, ns, "q") if "services" in used(cluster, ns) else None,
        CONTROLLER_TIMEOUT,
        "the new hard to be counted",
    )
    assert quota["status"] == {
        "hard": {"secrets": "2", "services": "4"},
        "used": {"secrets": "0", "services": "1"},
    }


def test_a_quota_whose_status_hard_is_empty_charges_and_refuses_nothing(cluster: Cluster) -> None:
    """CheckRequest takes what a quota tracks from its status.hard (``hardResources :=
    quota.ResourceNames(resourceQuota.Status.Hard)``), not from its spec: a quota that
    kube-controller-manager has not filled in yet tracks nothing, so a write passes uncharged,
    even over spec.hard, with no ``status unknown for quota``. Hierarchical quotas depend on it:
    the controller copies nothing into a namespace until its quotas are filled in
    (docs/hierarchical-quotas.md). The controller does not fill it in again on a status-only
    change (updateQuota requeues only when spec.hard changed)."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"secrets": "1"})
    wiped = {"status": {"hard": None, "used": None}}
    request(cluster.api_client, "PATCH", quotas(ns, "q") + "/status", wiped, MERGE)

    for name in ("a", "b"):
        request(cluster.api_client, "POST", core(ns, "secrets"), {"metadata": {"name": name}})

    status = request(cluster.api_client, "GET", quotas(ns, "q")).get("status") or {}
    assert not status.get("hard") and not status.get("used")


def test_a_pod_that_ends_stops_using_compute(cluster: Cluster) -> None:
    """PodUsageFunc/QuotaV1Pod: a Succeeded or Failed pod keeps ``count/pods`` but no longer
    uses ``pods`` or compute; the quota monitor recounts when a pod ends."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"pods": "2", "count/pods": "2", "requests.cpu": "1"})
    # Bound to a node that does not exist, so no kubelet reports on it.
    body = pod("p", container("c", {"cpu": "100m"}), nodeName=cluster.unique("no-node"))
    request(cluster.api_client, "POST", core(ns, "pods"), body)
    current = request(cluster.api_client, "GET", core(ns, "pods", "p"))

    current["status"] = {"phase": "Succeeded"}
    request(cluster.api_client, "PUT", core(ns, "pods", "p") + "/status", current)

    wait_for(
        lambda: used(cluster, ns) == {"pods": "0", "count/pods": "1", "requests.cpu": "0"},
        CONTROLLER_TIMEOUT,
        "the ended pod to be given back",
    )


# -- kubectl -------------------------------------------------------------------------------------


def test_kubectl_get_quota_prints_used_over_hard(cluster: Cluster) -> None:
    """printResourceQuota: NAME AGE REQUEST LIMIT; ``resource: used/hard`` sorted, limits.*
    in LIMIT."""
    ns = quota_namespace(cluster)
    make_quota(cluster, ns, {"requests.cpu": "1.5", "limits.memory": "2Gi", "pods": "3"})

    result = kubectl(cluster.kubeconfig, "-n", ns, "get", "quota", "--no-headers")

    assert result.returncode == 0, result.stderr
    cells = result.stdout.split(None, 2)
    assert cells[0] == "q"
    assert cells[2].split("   ")[0].strip() == "pods: 0/3, requests.cpu: 0/1500m"
    assert cells[2].rstrip().endswith("limits.memory: 0/2Gi")


def test_kubectl_create_and_describe_quota(cluster: Cluster) -> None:
    """``kubectl create quota`` sends a protobuf body; ``describe`` lists scopes and used/hard."""
    ns = quota_namespace(cluster)
    created = kubectl(
        cluster.kubeconfig,
        *("-n", ns, "create", "quota", "q", "--hard=pods=4,cpu=1.5", "--scopes=NotTerminating"),
    )
    assert created.returncode == 0, created.stderr
    wait_for(lambda: counted(cluster, ns, "q"), CONTROLLER_TIMEOUT, "the quota to be counted")

    result = kubectl(cluster.kubeconfig, "-n", ns, "describe", "quota", "q")

    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["Scopes:", "NotTerminating"] in rows
    assert ["Resource", "Used", "Hard"] in rows
    assert ["cpu", "0", "1500m"] in rows
    assert ["pods", "0", "4"] in rows


def test_discovery_lists_resourcequotas_and_their_status(cluster: Cluster) -> None:
    listed = request(cluster.api_client, "GET", "/api/v1")["resources"]
    names = {resource["name"]: resource for resource in listed}

    assert names["resourcequotas"]["namespaced"] is True
    assert names["resourcequotas"]["shortNames"] == ["quota"]
    assert "resourcequotas/status" in names
