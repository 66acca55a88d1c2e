"""The HierarchicalResourceQuotas a user may read, for ``quota`` and ``ns describe``.

An administrator reads every HRQ with one LIST. A tenant may not list them cluster-wide; the
aggregated ``accurate-hrq-view`` role lets them list them in each namespace they hold, so their
reading is one LIST per namespace of their view. An HRQ in a namespace above their tree, which
they may not read, still limits them: the ResourceQuota that counts for it in each of their
namespaces names it (annotation ``accurate.cybozu.com/hrq``, or ``accurate.cybozu.com/hrq-serves``
on the one kept for another HRQ that serves it there), and tenants may read ResourceQuotas, so
such an HRQ is named as applying, without its numbers.

A cluster without the HRQ CRD answers 404 to a LIST; a tenant's LIST is refused (403) before
the server looks for the resource, so when every LIST was refused, the API group's discovery
document, which every user may read, tells "not installed" from "not allowed".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from libaccurate import quota
from libaccurate.network.kube import ApiError, Kube, resource_path

NOT_INSTALLED = (
    f"hierarchical quotas are not installed on this cluster (no CRD {quota.CRD_NAME}); an "
    "administrator installs them with controller/config/quota or the chart's quota.enabled"
)


class NotInstalled(Exception):
    """The cluster does not serve HierarchicalResourceQuotas."""


class HrqReading(NamedTuple):
    """The HRQ objects read; the HRQs known to apply but not readable, by (namespace, name);
    the namespaces whose HRQs could not be read, with the server's words."""

    objects: list[dict[str, Any]]
    hidden: frozenset[quota.QuotaKey] = frozenset()
    refused: Mapping[str, str] = MappingProxyType({})


def _hrqs_path(namespace: str | None = None) -> str:
    return resource_path(quota.GROUP, quota.VERSION, quota.PLURAL, namespace)


def served(kube: Kube) -> bool:
    """Whether the cluster serves the HRQ API (one discovery request)."""
    return kube.find(f"/apis/{quota.API_VERSION}") is not None


def read_everywhere(kube: Kube) -> list[dict[str, Any]] | None:
    """Every HRQ of the cluster, or None when the user may not list them cluster-wide;
    raises NotInstalled."""
    try:
        return kube.list_objects(_hrqs_path()).get("items") or []
    except ApiError as error:
        if error.not_found:
            raise NotInstalled(NOT_INSTALLED) from None
        if error.code == 403:
            return None
        raise


def read_in(kube: Kube, namespaces: Iterable[str]) -> HrqReading:
    """The HRQs of each of ``namespaces``, one LIST each; raises NotInstalled."""
    objects: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    for namespace in dict.fromkeys(namespaces):
        try:
            objects.extend(kube.list_objects(_hrqs_path(namespace)).get("items") or [])
        except ApiError as error:
            if error.not_found:
                raise NotInstalled(NOT_INSTALLED) from None
            if error.code != 403:
                raise
            refused[namespace] = error.message
    if refused and not objects and not served(kube):
        raise NotInstalled(NOT_INSTALLED)
    return HrqReading(objects, refused=refused)


def applying_here(kube: Kube, namespace: str) -> frozenset[quota.QuotaKey]:
    """The HRQs the ResourceQuotas the controller keeps in ``namespace`` count for: every HRQ
    that limits it, readable or not, once the controller has caught up. Empty when the user
    may not read ResourceQuotas there."""
    path = resource_path("", "v1", "resourcequotas", namespace)
    try:
        items = kube.list_objects(path, labelSelector=quota.LABEL_HRQ_NAMESPACE).get("items")
    except ApiError as error:
        if error.code != 403:
            raise
        return frozenset()
    return frozenset(key for item in items or () for key in quota.hrqs_counted_by(item))


def with_hidden(kube: Kube, reading: HrqReading, namespaces: Iterable[str]) -> HrqReading:
    """``reading`` with the HRQs that limit ``namespaces`` but that the user could not read."""
    read = {_key(obj) for obj in reading.objects}
    hidden = {key for name in namespaces for key in applying_here(kube, name) if key not in read}
    return reading._replace(hidden=reading.hidden | hidden)


def _key(obj: dict[str, Any]) -> quota.QuotaKey:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
