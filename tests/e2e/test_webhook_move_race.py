"""``sub move`` against a webhook whose cache lags (issue 13): the namespace's parent label is
patched and the old SubNamespace deleted right after, before the controller's cache has seen the
patch. The deletion must be judged on the namespace as it is now, which no longer belongs to the
old SubNamespace, not on the cached copy that still has children under it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pytest
import trustme

from accurate_testbed.certificates import write_serving_pair
from accurate_testbed.cluster import Cluster
from controller.webhook import VALIDATE_SUBNAMESPACE_PATH, WebhookServer
from libaccurate.constants import GROUP, LABEL_PARENT, LABEL_TYPE, SUBNAMESPACE_PLURAL, TYPE_ROOT
from libaccurate.forest import Forest
from libaccurate.network.kube import ApiError, Kube, resource_path
from tests.e2e.webhooks import LiveNamespaces, connect, namespace, register_webhooks

# The race showed about once in 20 moves on a real API server; with the cache held back it
# would show every time, so this many rounds leave no room for luck.
ROUNDS = 25


class LaggingNamespaces:
    """A cache that shows the namespaces as they were at the last ``catch_up``."""

    def __init__(self, kube: Kube) -> None:
        self._live = LiveNamespaces(kube)
        self._forest = self._live.forest()

    def catch_up(self) -> None:
        self._forest = self._live.forest()

    def forest(self) -> Forest:
        return self._forest

    def reading(self) -> AbstractContextManager[Forest]:
        return nullcontext(self._forest)


@pytest.fixture
def lagging(
    cluster: Cluster, subnamespace_crd: None, webhook_ca: trustme.CA, tmp_path: Path
) -> Iterator[tuple[LaggingNamespaces, list[tuple[str, bool]]]]:
    """A webhook server on a lagging cache, registered; also the (path, allowed) it answered."""
    kube = connect(cluster)
    write_serving_pair(webhook_ca, tmp_path / "certs")
    cache = LaggingNamespaces(kube)
    calls: list[tuple[str, bool]] = []
    server = WebhookServer(
        "127.0.0.1:0",
        tmp_path / "certs",
        cache,
        kube,
        (),
        False,
        lambda path, allowed, _: calls.append((path, allowed)),
    )
    server.start()
    register_webhooks(cluster, f"https://127.0.0.1:{server.port}", webhook_ca)
    yield cache, calls
    cluster.withdraw_webhooks()
    server.stop()


def subnamespace(parent: str, name: str) -> tuple[str, dict[str, Any]]:
    collection = resource_path(GROUP, "v2", SUBNAMESPACE_PLURAL, namespace=parent)
    body = {"apiVersion": f"{GROUP}/v2", "kind": "SubNamespace", "metadata": {"name": name}}
    return collection, body


def let_go(kube: Kube, parent: str, name: str) -> None:
    """Delete the SubNamespace and remove its finalizer, as the controller would."""
    collection, _ = subnamespace(parent, name)
    try:
        kube.delete(f"{collection}/{name}")
        kube.patch(f"{collection}/{name}", {"metadata": {"finalizers": None}})
    except ApiError as error:
        if not error.not_found:
            raise


def test_a_move_deletes_the_old_subnamespace_however_stale_the_cache(
    cluster: Cluster, lagging: tuple[LaggingNamespaces, list[tuple[str, bool]]]
) -> None:
    cache, calls = lagging
    kube = connect(cluster)
    parents = [namespace(cluster, "root", {LABEL_TYPE: TYPE_ROOT}) for _ in range(2)]
    moved = namespace(cluster, "moved", {LABEL_PARENT: parents[0]})
    namespace(cluster, "child", {LABEL_PARENT: moved})
    kube.create(*subnamespace(parents[0], moved))

    for round in range(ROUNDS):
        old, new = parents[round % 2], parents[(round + 1) % 2]
        cache.catch_up()

        kube.patch(f"{resource_path('', 'v1', 'namespaces')}/{moved}", _parent(new))
        let_go(kube, old, moved)
        kube.create(*subnamespace(new, moved))

        assert cache.forest().get(moved).parent == old  # type: ignore[union-attr]

    reviews = [allowed for path, allowed in calls if path == VALIDATE_SUBNAMESPACE_PATH]
    assert reviews and all(reviews)


def _parent(name: str) -> dict[str, Any]:
    return {"metadata": {"labels": {LABEL_PARENT: name}}}
