"""Filling a cluster fast: namespace trees and objects, created by a pool of writers."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.target import Target
from libaccurate import subnamespaces
from libaccurate.constants import (
    CREATED_BY_VALUE,
    FIELD_MANAGER,
    FINALIZER,
    LABEL_CREATED_BY,
    LABEL_PARENT,
    LABEL_TYPE,
    SUBNAMESPACE_KIND,
    TYPE_ROOT,
)
from libaccurate.network.kube import ApiError, Kube, resource_path

NAMESPACES = resource_path("", "v1", "namespaces")
WRITERS = 8


def in_parallel(
    action: Callable[..., object], calls: Iterable[tuple[Any, ...]], writers: int = WRITERS
) -> None:
    """``action(*arguments)`` for every tuple in ``calls`` on a pool of ``writers`` threads, the
    way the controller's workers send writes; the first failure is raised."""
    with ThreadPoolExecutor(writers) as pool:
        for future in [pool.submit(action, *arguments) for arguments in calls]:
            future.result()


def forest(
    target: Target, roots: int, size: int, subnamespaces: bool = False, deepest: int = 4
) -> dict[str, list[str]]:
    """``roots`` trees of ``size`` namespaces in all, of mixed depth: each tree is a chain of
    1 to ``deepest`` levels under its root, the rest hang off the chain's levels round-robin.
    Sub-namespaces carry a hand-set parent label, or with ``subnamespaces`` what the Go
    Accurate leaves (see ``_as_go_left_it``). Returns each root's descendants, parents before
    children."""
    per_tree = max(1, size // roots)
    trees: dict[str, list[str]] = {}
    layers: list[list[tuple[str, dict[str, str]]]] = [[]]
    for r in range(roots):
        root = target.name(f"r{r}")
        layers[0].append((root, {LABEL_TYPE: TYPE_ROOT}))
        depth = 1 + r % deepest
        chain = [root]
        trees[root] = []
        for i in range(1, per_tree):
            level = i if i <= depth else i % depth + 1
            parent = chain[level - 1]
            name = f"{root}-{i}"
            if i <= depth:
                chain.append(name)
            while len(layers) <= level:
                layers.append([])
            layers[level].append((name, {LABEL_PARENT: parent}))
            trees[root].append(name)
    kube = target.kube()
    for layer in layers:
        in_parallel(functools.partial(_create_namespace, kube), layer)
    everything = [name for layer in layers for name, _ in layer]
    target.on_cleanup(lambda: delete_namespaces(target, everything), removes=True)
    if subnamespaces:
        below = [(name, labels[LABEL_PARENT]) for layer in layers[1:] for name, labels in layer]
        in_parallel(functools.partial(_as_go_left_it, kube), below)
        target.on_cleanup(
            lambda: in_parallel(functools.partial(_let_go, kube), below), removes=True
        )
    return trees


def _create_namespace(kube: Any, name: str, labels: Mapping[str, str]) -> None:
    kube.create(NAMESPACES, {"metadata": {"name": name, "labels": dict(labels)}})


def _as_go_left_it(kube: Kube, name: str, parent: str) -> None:
    """Sub-namespace ``name`` as a cluster run by the Go Accurate holds it: a SubNamespace in
    ``parent`` with the finalizer (its mutating webhook adds it) and the status its
    controller applies to a SubNamespace without conflict (observedGeneration, no condition),
    and the namespace's ``parent`` and ``created-by`` labels owned by that controller's
    server-side apply, with its field manager (internal/controller/namespace_controller.go,
    propagateMeta, and ssa_client.go of cybozu-go/accurate)."""
    api_version = subnamespaces.api_version()
    metadata = {"name": name, "namespace": parent}
    sub = kube.create(
        subnamespaces.path(parent),
        {
            "apiVersion": api_version,
            "kind": SUBNAMESPACE_KIND,
            "metadata": {**metadata, "finalizers": [FINALIZER]},
        },
    )
    status = {"observedGeneration": sub["metadata"]["generation"]}
    kube.apply(
        subnamespaces.path(parent, name, subresource="status"),
        {
            "apiVersion": api_version,
            "kind": SUBNAMESPACE_KIND,
            "metadata": metadata,
            "status": status,
        },
        FIELD_MANAGER,
    )
    labels = {LABEL_PARENT: parent, LABEL_CREATED_BY: CREATED_BY_VALUE}
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels},
    }
    kube.apply(resource_path("", "v1", "namespaces", name=name), namespace, FIELD_MANAGER)


def _let_go(kube: Kube, name: str, parent: str) -> None:
    """Without a controller left to finalise it, the SubNamespace would keep ``parent`` from
    being deleted on a real cluster: its finalizer is removed first."""
    try:
        kube.patch(subnamespaces.path(parent, name), {"metadata": {"finalizers": None}})
    except ApiError as error:
        if not error.not_found:
            raise


def delete_namespaces(target: Target, names: Sequence[str]) -> None:
    """Children first, so that no webhook refuses a parent that still has children."""
    kube = target.kube()
    paths = ((kube, resource_path("", "v1", "namespaces", name=name)) for name in reversed(names))
    in_parallel(delete, paths)


def delete(kube: Any, path: str) -> None:
    """Delete what ``path`` names; already gone, or going (409), is fine for a clean-up."""
    try:
        kube.delete(path)
    except ApiError as error:
        if not (error.not_found or error.code == 409):
            raise


def secrets_path(namespace: str | None = None, name: str | None = None) -> str:
    return resource_path("", "v1", "secrets", namespace, name)


def configmaps(target: Target, namespaces: Sequence[str], count: int) -> None:
    """``count`` objects of a watched kind that nothing propagates, spread evenly over
    ``namespaces``: what the controller must hold cheaply."""
    kube = target.kube()

    def create(namespace: str, index: int) -> None:
        body = {"metadata": {"name": f"cm-{index}"}, "data": {"key": "x" * 64}}
        kube.create(resource_path("", "v1", "configmaps", namespace), body)

    share, extra = divmod(count, len(namespaces))
    calls = (
        (ns, index)
        for position, ns in enumerate(namespaces)
        for index in range(share + (position < extra))
    )
    in_parallel(create, calls)
