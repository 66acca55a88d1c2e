"""The cluster's SubNamespace API: the version it serves, and reads and writes in that version.

Which versions of ``subnamespaces.accurate.cybozu.com`` a cluster serves depends on the
controller that installed the CRD (libaccurate.subnamespaces), so the plugin asks once, with one
request for the API group's discovery document, and keeps the answer on disk next to kubectl's
own discovery cache: ``--cache-dir``, else ``$KUBECACHEDIR``, else ``~/.kube/cache``, then
``discovery/<host_port>/`` as kubectl names it. A cached version the cluster no longer serves
(the CRD was replaced) answers with a 404 for the path; the plugin then asks again, once. Everything
read is converted to v2 and everything written from v2, so the rest of the plugin sees v2 only.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from libaccurate import subnamespaces
from libaccurate.constants import GROUP, SUBNAMESPACE_CRD_NAME
from libaccurate.network.kube import ApiError, Kube, KubeError

T = TypeVar("T")
# As long as kubectl trusts its discovery cache.
CACHE_TTL = 6 * 3600.0
CACHE_FILE = "kubectl-accurate-versions.json"
INSTALL_HINT = (
    "install Accurate (its CRDs come with the controller's Helm chart or manifests) or ask "
    "the cluster's administrator"
)
# kubectl's rule for turning a server address into a folder name.
_UNSAFE = re.compile(r"[^(\w/.)]")


class NotServed(KubeError):
    """The cluster serves no SubNamespace version this plugin speaks."""


def cache_root(cache_dir: str | None) -> str:
    """Where kubectl keeps its caches, given its --cache-dir flag and environment. Paths are
    plain strings: ``pathlib`` would be imported by every command for this alone (issue 18)."""
    if cache_dir:
        return os.path.expanduser(cache_dir)
    if os.environ.get("KUBECACHEDIR"):
        return os.environ["KUBECACHEDIR"]
    return os.path.join(os.path.expanduser("~"), ".kube", "cache")


class SubNamespaceApi:
    """SubNamespaces of one cluster, as v2 objects, whatever version it serves."""

    def __init__(self, kube: Kube, cache_dir: str | None = None) -> None:
        self.kube = kube
        host = _UNSAFE.sub("_", re.sub(r"^https?://", "", kube.host))
        self.cache = os.path.join(cache_root(cache_dir), "discovery", host, GROUP, CACHE_FILE)
        self._version: str | None = None
        self._from_cache = False

    @property
    def version(self) -> str:
        if self._version is None:
            self._version = self._cached()
            self._from_cache = self._version is not None
            if self._version is None:
                self._version = self._discover()
        return self._version

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The SubNamespace, or None when there is none (or its namespace does not exist)."""
        try:
            found = self._call(lambda v: self.kube.get(subnamespaces.path(namespace, name, v)))
        except ApiError as error:
            if error.not_found:
                return None
            raise
        return subnamespaces.read(found)

    def list_metadata(self, namespace: str | None) -> list[dict[str, Any]]:
        """The metadata of the SubNamespaces ``list`` would give: what naming them needs, for
        a fraction of the bytes (no spec, no status)."""
        found = self._call(
            lambda v: self.kube.list_metadata(subnamespaces.path(namespace, None, v))
        )
        return [item["metadata"] for item in found.get("items") or []]

    def list(self, namespace: str | None) -> list[dict[str, Any]]:
        """The SubNamespaces of ``namespace``, or of every namespace when it is None."""
        found = self._call(lambda v: self.kube.list_objects(subnamespaces.path(namespace, None, v)))
        return [subnamespaces.read(item) for item in found.get("items") or []]

    def create(self, obj: dict[str, Any], **query: str) -> dict[str, Any]:
        namespace = obj["metadata"]["namespace"]
        return self._call(
            lambda v: self.kube.create(
                subnamespaces.path(namespace, None, v), subnamespaces.in_version(obj, v), **query
            )
        )

    def delete(self, namespace: str, name: str, body: dict[str, Any], **query: str) -> Any:
        return self._call(
            lambda v: self.kube.delete(subnamespaces.path(namespace, name, v), body, **query)
        )

    def _call(self, request: Callable[[str], T]) -> T:
        """``request(version)``; once more with a fresh version if the cached one is not served."""
        try:
            return request(self.version)
        except ApiError as error:
            if not (self._from_cache and _path_unknown(error)):
                raise
        self._version, self._from_cache = self._discover(), False
        return request(self._version)

    def _cached(self) -> str | None:
        try:
            if time.time() - os.stat(self.cache).st_mtime > CACHE_TTL:
                return None
            with open(self.cache, encoding="utf-8") as stream:
                version = json.load(stream).get("version")
        except (OSError, ValueError, AttributeError):
            return None
        return version if version in subnamespaces.VERSIONS else None

    def _discover(self) -> str:
        try:
            group = self.kube.get(subnamespaces.GROUP_PATH)
        except ApiError as error:
            if error.not_found:
                raise NotServed(
                    f"this cluster has no SubNamespace API (the CRD {SUBNAMESPACE_CRD_NAME} is "
                    f"not installed): {INSTALL_HINT}"
                ) from None
            raise
        served = subnamespaces.served_versions(group)
        version = subnamespaces.preferred(served)
        if version is None:
            listed = ", ".join(v.get("version", "?") for v in group.get("versions") or ())
            raise NotServed(
                f"the cluster serves SubNamespaces only as {listed or 'nothing'}; this plugin "
                f"speaks {', '.join(subnamespaces.VERSIONS)}"
            )
        self._remember(version)
        return version

    def _remember(self, version: str) -> None:
        """Keep the answer for the next command; a cache that cannot be written costs only a
        request next time, as with kubectl."""
        try:
            os.makedirs(os.path.dirname(self.cache), exist_ok=True)
            temporary = f"{os.path.splitext(self.cache)[0]}.{os.getpid()}.tmp"
            with open(temporary, "w", encoding="utf-8") as stream:
                json.dump({"version": version}, stream)
            os.replace(temporary, self.cache)
        except OSError:
            return


def _path_unknown(error: ApiError) -> bool:
    """A 404 for the path itself (a version not served), not for an object: kube-apiserver
    answers those with a bare ``404 page not found`` or, in newer releases, a NotFound Status
    that names no kind; a missing object's or namespace's Status names its kind."""
    details = error.status.get("details") or {}
    return error.not_found and not details.get("kind")
