"""The owners that propagate-generated (a deprecated feature, off by default) asks about.

An object controlled by another one becomes a source when its controller carries the
``propagate-generated`` annotation. The owner can be of any kind, so owners are not cached by
watches: each is read once when an object first needs a verdict, and the answer is kept for a
while. Once the planner marked the object (``propagate`` or ``generated=false``), its owner is
never asked about again, so a settled cluster costs no request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from controller.throttle import Throttle
from libaccurate.constants import ANNOTATION_GENERATED, ANNOTATION_PROPAGATE
from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path
from libaccurate.propagation import NOT_GENERATED

Obj = Mapping[str, Any]

log = logging.getLogger(__name__)


def controller_reference(obj: Obj) -> Mapping[str, Any] | None:
    """The owner reference marked ``controller``, if any."""
    for reference in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if reference.get("controller"):
            return dict(reference)
    return None


def awaits_verdict(obj: Obj) -> bool:
    """Whether the planner will look at this object's owner: it is controlled and unmarked."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if ANNOTATION_PROPAGATE in annotations:
        return False
    if annotations.get(ANNOTATION_GENERATED) == NOT_GENERATED:
        return False
    return controller_reference(obj) is not None


class Owners:
    """Reads owners by uid, remembering each answer (also "not found") for ``ttl`` seconds."""

    def __init__(
        self,
        kube: Kube,
        resource_lists: Iterable[Mapping[str, Any]],
        throttle: Throttle,
        stop: threading.Event,
        ttl: float,
    ) -> None:
        self.kube = kube
        self.throttle = throttle
        self.stop = stop
        self.ttl = ttl
        self._kinds: dict[tuple[str, str], tuple[str, bool]] = {}
        for resource_list in resource_lists:
            group_version = resource_list.get("groupVersion", "")
            for resource in resource_list.get("resources") or ():
                if "/" not in resource.get("name", "/"):
                    key = (group_version, resource.get("kind", ""))
                    self._kinds.setdefault(
                        key, (resource["name"], resource.get("namespaced", False))
                    )
        self._known: dict[str, tuple[float, Obj | None]] = {}

    def lookup(self, objects: Iterable[Obj]) -> dict[str, Obj]:
        """The owners of the objects that await a verdict, by uid."""
        found: dict[str, Obj] = {}
        for obj in objects:
            if not awaits_verdict(obj):
                continue
            reference = controller_reference(obj) or {}
            namespace = (obj.get("metadata") or {}).get("namespace", "")
            owner = self.owner(reference, namespace)
            if owner is not None:
                found[reference.get("uid", "")] = owner
        return found

    def owner(self, reference: Mapping[str, Any], namespace: str) -> Obj | None:
        """The owner ``reference`` names (of an object in ``namespace``), if it is there."""
        uid = reference.get("uid", "")
        known = self._known.get(uid)
        if known is not None and time.monotonic() - known[0] < self.ttl:
            return known[1]
        owner = self._read(reference, namespace)
        self._known[uid] = (time.monotonic(), owner)
        return owner

    def _read(self, reference: Mapping[str, Any], namespace: str) -> Obj | None:
        api_version, kind = reference.get("apiVersion", ""), reference.get("kind", "")
        served = self._kinds.get((api_version, kind))
        if served is None:
            log.info("owner kind not served", extra={"kind": f"{kind} {api_version}"})
            return None
        plural, namespaced = served
        group, _, version = api_version.rpartition("/")
        path = resource_path(
            group, version, plural, namespace if namespaced else None, reference.get("name")
        )
        if not self.throttle.wait(self.stop):
            return None
        try:
            owner = self.kube.get(path)
        except ApiError as error:
            if not error.not_found:
                log.warning("cannot read owner", extra={"path": path, "error": str(error)})
            return None
        except KubeError as error:
            log.warning("cannot read owner", extra={"path": path, "error": str(error)})
            return None
        same = (owner.get("metadata") or {}).get("uid") == reference.get("uid")
        return owner if same else None
