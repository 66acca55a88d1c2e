"""Which kinds the controller propagates: from its config when the user may read it, else guessed.

Like the Go plugin, the config is found through the controller's Deployment
(``accurate-controller-manager``, volume ``config``) and read from that ConfigMap's
``config.yaml``. A tenant usually may not read either; where the Go plugin then fails, this
falls back to the kinds Accurate is usually set up to propagate, as far as the server serves
them, and says so: the answer is always labelled with where it came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from libaccurate.config import (
    Config,
    ConfigError,
    GroupVersionKind,
    WatchedResource,
    parse_config,
    resolve_watches,
)
from libaccurate.network.kube import ApiError, Kube, resource_path

DEPLOYMENT = "accurate-controller-manager"
CONFIG_VOLUME = "config"
DEFAULT_CONFIGMAP = "accurate-config"
CONFIG_KEY = "config.yaml"
RBAC = "rbac.authorization.k8s.io"
USUAL_KINDS = (
    GroupVersionKind(RBAC, "v1", "Role"),
    GroupVersionKind(RBAC, "v1", "RoleBinding"),
    GroupVersionKind("", "v1", "Secret"),
    GroupVersionKind("", "v1", "ConfigMap"),
    GroupVersionKind("", "v1", "ServiceAccount"),
    GroupVersionKind("", "v1", "ResourceQuota"),
    GroupVersionKind("", "v1", "LimitRange"),
    GroupVersionKind("networking.k8s.io", "v1", "NetworkPolicy"),
)


@dataclass(frozen=True)
class Watched:
    """The controller's config (or one holding only the guessed kinds) and where it came from."""

    config: Config
    resources: tuple[WatchedResource, ...]
    source: str
    from_config: bool


class _Unreadable(Exception):
    """The controller's config could not be read; the message says why."""


def find_watched(kube: Kube, accurate_namespace: str) -> Watched:
    try:
        config, source = _controller_config(kube, accurate_namespace)
    except _Unreadable as reason:
        config = Config(watches=USUAL_KINDS)
        source = f"guessed: the usual kinds the server serves ({reason})"
        return Watched(config, _served(kube, config.watches), source, from_config=False)
    return Watched(config, _served(kube, config.watches), source, from_config=True)


def _controller_config(kube: Kube, namespace: str) -> tuple[Config, str]:
    name = _configmap_name(kube, namespace)
    try:
        configmap = kube.get(resource_path("", "v1", "configmaps", namespace, name))
    except ApiError as error:
        raise _Unreadable(f"cannot read ConfigMap {namespace}/{name}: {error.message}") from None
    source = f"ConfigMap {namespace}/{name}"
    text = (configmap.get("data") or {}).get(CONFIG_KEY)
    if text is None:
        raise _Unreadable(f"{source} has no {CONFIG_KEY}")
    try:
        return parse_config(text, source), source
    except ConfigError as error:
        raise _Unreadable(str(error)) from None


def _configmap_name(kube: Kube, namespace: str) -> str:
    """The ConfigMap the Deployment mounts as its config, or the usual name without one."""
    path = resource_path("apps", "v1", "deployments", namespace, DEPLOYMENT)
    try:
        deployment = kube.get(path)
    except ApiError as error:
        if error.not_found:
            return DEFAULT_CONFIGMAP
        reason = f"cannot read Deployment {namespace}/{DEPLOYMENT}: {error.message}"
        raise _Unreadable(reason) from None
    volumes = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "volumes"
    ) or []
    for volume in volumes:
        if volume.get("name") == CONFIG_VOLUME:
            configmap = volume.get("configMap") or {}
            if not configmap.get("name"):
                raise _Unreadable(f"volume {CONFIG_VOLUME} of {DEPLOYMENT} is not a ConfigMap")
            return str(configmap["name"])
    return DEFAULT_CONFIGMAP


def _served(kube: Kube, kinds: Iterable[GroupVersionKind]) -> tuple[WatchedResource, ...]:
    """The kinds the server serves, with their resource names; others are left out."""
    wanted = tuple(kinds)
    lists = [
        _resource_list(kube, api_version) for api_version in sorted({k.api_version for k in wanted})
    ]
    served: list[WatchedResource] = []
    for gvk in wanted:
        try:
            served.extend(resolve_watches(Config(watches=(gvk,)), lists, "discovery"))
        except ConfigError:
            continue
    return tuple(served)


def _resource_list(kube: Kube, api_version: str) -> Mapping[str, Any]:
    path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    try:
        return kube.get(path)
    except ApiError as error:
        if error.not_found:
            return {}
        raise
