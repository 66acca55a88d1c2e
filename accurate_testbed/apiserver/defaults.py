"""What the real server does to a built-in object on its way in: the defaults it fills in, and
a Secret's write-only stringData folded into data.

The controller must tell a user's change from a value the server added on its own (DESIGN.md
4.3), so these have to happen here exactly as on a real cluster; kinds not listed get none.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable
from typing import Any

from accurate_testbed.apiserver import errors
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.resources import ADMISSION, RBAC
from libaccurate import quantity

Obj = dict[str, Any]


def _namespace(obj: Obj) -> None:
    name = obj["metadata"].get("name", "")
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    obj.setdefault("spec", {})


def _secret(obj: Obj) -> None:
    """``stringData`` is write-only: decoding a Secret folds it into ``data`` (base64, over
    any key already there), on every write, so it is never stored or served."""
    string_data = obj.pop("stringData", None) or {}
    if not isinstance(string_data, dict):
        raise _undecodable(string_data, "map[string]string")
    folded: dict[str, str] = {}
    for key, value in string_data.items():
        if not isinstance(value, str | None):
            raise _undecodable(value, "string")
        folded[key] = base64.b64encode((value or "").encode()).decode()
    if folded:
        obj["data"] = {**(obj.get("data") or {}), **folded}
    obj.setdefault("type", "Opaque")


def _undecodable(value: Any, go_type: str) -> ApiError:
    """The decoding error kube-apiserver answers for a stringData of the wrong JSON type."""
    json_type = {dict: "object", list: "array", str: "string", bool: "bool"}.get(
        type(value), "number"
    )
    return errors.bad_request(
        'Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal '
        f"{json_type} into Go struct field Secret.stringData of type {go_type}"
    )


def _quantities(kind: str, lists: list[Any]) -> None:
    """Read every quantity of these ResourceLists and write it back canonical, as decoding,
    defaulting (SetDefaults_ResourceList rounds up to milli-units) and encoding a built-in
    object does (``cpu: 1.5`` is stored ``1500m``, ``1.0001`` is ``1001m``, names sorted); text
    that is not a quantity is the decoding error kube-apiserver answers."""
    for resources in lists:
        if not isinstance(resources, dict):
            continue
        try:
            written = {name: _stored(value) for name, value in resources.items()}
        except quantity.QuantityError as error:
            raise errors.bad_request(
                f'{kind} in version "v1" cannot be handled as a {kind}: {error}'
            ) from error
        resources.clear()
        resources.update(sorted(written.items()))  # Go writes a map's keys sorted


def _stored(value: Any) -> str:
    """A quantity as a built-in object stores it; text is remembered as it was written, as
    the few distinct amounts of a cluster are written over and over (every quota status update
    carries them all, twice: its body, then the object it makes)."""
    if type(value) is str:
        return _stored_text(value)
    return _stored_form(quantity.parse(value))


@functools.lru_cache(maxsize=4096)
def _stored_text(text: str) -> str:
    return _stored_form(quantity.parse(text))


def _stored_form(amount: quantity.Quantity) -> str:
    return str(quantity.round_up(amount, -3))


def _requirements(holder: Any) -> list[Any]:
    """The requests and limits of a container, or of a claim's spec."""
    resources = holder.get("resources") if isinstance(holder, dict) else None
    if not isinstance(resources, dict):
        return []
    return [resources.get("requests"), resources.get("limits")]


def _pod(obj: Obj) -> None:
    """SetDefaults_Pod: a container with limits but no request for a resource requests its
    limit (which is how a pod with only ``limits.cpu`` satisfies a quota on requests.cpu)."""
    spec = obj.get("spec") or {}
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    for container in containers:
        resources = container.get("resources") or {}
        limits = resources.get("limits")
        if isinstance(limits, dict) and limits:
            requests = resources.setdefault("requests", {})
            for name, value in limits.items():
                requests.setdefault(name, value)
    lists = [spec.get("overhead")] + [r for c in containers for r in _requirements(c)]
    _quantities("Pod", lists)


def _persistent_volume_claim(obj: Obj) -> None:
    status = obj.get("status") or {}
    lists = _requirements(obj.get("spec") or {})
    _quantities(
        "PersistentVolumeClaim", [*lists, status.get("capacity"), status.get("allocatedResources")]
    )


def _resource_quota(obj: Obj) -> None:
    status = obj.get("status") or {}
    lists = [(obj.get("spec") or {}).get("hard"), status.get("hard"), status.get("used")]
    _quantities("ResourceQuota", lists)


def _binding(obj: Obj) -> None:
    for subject in obj.get("subjects") or []:
        if subject.get("kind") in ("User", "Group"):
            subject.setdefault("apiGroup", RBAC)


def _network_policy(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress"] + (["Egress"] if spec.get("egress") else [])


def _service(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))


def _deployment(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    spec.setdefault(
        "strategy",
        {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
    )


def _webhooks(mutating: bool) -> Callable[[Obj], None]:
    def default(obj: Obj) -> None:
        for hook in obj.get("webhooks") or []:
            hook.setdefault("failurePolicy", "Fail")
            hook.setdefault("matchPolicy", "Equivalent")
            hook.setdefault("namespaceSelector", {})
            hook.setdefault("objectSelector", {})
            hook.setdefault("timeoutSeconds", 10)
            if mutating:
                hook.setdefault("reinvocationPolicy", "Never")
            for rule in hook.get("rules") or []:
                rule.setdefault("scope", "*")

    return default


def _crd(obj: Obj) -> None:
    obj.setdefault("spec", {}).setdefault("conversion", {"strategy": "None"})


_DEFAULTERS: dict[tuple[str, str], Callable[[Obj], None]] = {
    ("", "Namespace"): _namespace,
    ("", "Secret"): _secret,
    ("", "Service"): _service,
    ("", "Pod"): _pod,
    ("", "PersistentVolumeClaim"): _persistent_volume_claim,
    ("", "ResourceQuota"): _resource_quota,
    (RBAC, "RoleBinding"): _binding,
    (RBAC, "ClusterRoleBinding"): _binding,
    ("networking.k8s.io", "NetworkPolicy"): _network_policy,
    ("apps", "Deployment"): _deployment,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
    (ADMISSION, "ValidatingWebhookConfiguration"): _webhooks(mutating=False),
    (ADMISSION, "MutatingWebhookConfiguration"): _webhooks(mutating=True),
}


def apply_builtin_defaults(group: str, kind: str, obj: Obj) -> None:
    """Fill in the server-side defaults of a built-in kind, in place; an empty list of owner
    references or finalizers is dropped, as ObjectMeta's ``omitempty`` fields never show one
    (a patch deleting the last reference leaves none)."""
    meta = obj.get("metadata") or {}
    for listed in ("ownerReferences", "finalizers"):
        if meta.get(listed) == []:
            del meta[listed]
    defaulter = _DEFAULTERS.get((group, kind))
    if defaulter is not None:
        defaulter(obj)
