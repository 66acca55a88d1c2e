"""SubNamespaces on the wire: the versions Accurate has served, which one to speak to a cluster,
their API paths, and SubNamespace objects built or read in any of those versions.

Each released controller's CRD serves a different set: the Go Accurate v0.x only ``v1``, v1.x
``v2alpha1`` and ``v2``, today's Go and Python controllers ``v2``. A client speaks the best
version the cluster serves and converts at the edge (libaccurate.conversion), so that the rules
only ever see ``v2`` objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from libaccurate.constants import GROUP, STORAGE_VERSION, SUBNAMESPACE_KIND, SUBNAMESPACE_PLURAL
from libaccurate.conversion import convert_subnamespace
from libaccurate.paths import resource_path

# Best first: the storage version, then the older ones a cluster may still serve alone.
VERSIONS: tuple[str, ...] = (STORAGE_VERSION, "v2alpha1", "v1")
# The API group's discovery document (APIGroup): which of its versions the cluster serves.
GROUP_PATH = f"/apis/{GROUP}"


def api_version(version: str = STORAGE_VERSION) -> str:
    return f"{GROUP}/{version}"


def path(
    namespace: str | None = None,
    name: str | None = None,
    version: str = STORAGE_VERSION,
    subresource: str | None = None,
) -> str:
    """The REST path of the SubNamespaces (of one namespace, or all), or of one of them."""
    return resource_path(GROUP, version, SUBNAMESPACE_PLURAL, namespace, name, subresource)


def served_versions(api_group: Mapping[str, Any]) -> tuple[str, ...]:
    """The versions we speak among those an APIGroup discovery document lists, best first."""
    listed = {entry.get("version") for entry in api_group.get("versions") or ()}
    return tuple(version for version in VERSIONS if version in listed)


def preferred(served: Iterable[str]) -> str | None:
    """The version to speak to a cluster serving ``served``, or None if we speak none of them."""
    offered = set(served)
    return next((version for version in VERSIONS if version in offered), None)


def build(
    namespace: str,
    name: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A new SubNamespace in the storage version; empty labels and annotations are left out of
    the spec, as ``kubectl create`` of the same object would send them."""
    spec = {
        key: dict(value)
        for key, value in (("labels", labels), ("annotations", annotations))
        if value
    }
    return {
        "apiVersion": api_version(),
        "kind": SUBNAMESPACE_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def in_version(obj: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The SubNamespace as it is sent to a cluster that speaks ``version``."""
    return convert_subnamespace(obj, api_version(version))


def read(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A SubNamespace as a cluster returned it, in whatever version, as the rules read it."""
    return in_version(obj, STORAGE_VERSION)
