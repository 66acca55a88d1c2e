"""When a SubNamespace's status goes out during a long pass (issue 31, point 4): as soon as what
it reports is true, and not before.

A status tells of one namespace, so it is written once that namespace's own writes are done,
not after every write of the pass: with ``--apiserver-qps-throttle`` each kind has a bucket of
its own, and statuses held back to the end of a pass left the SubNamespaces' bucket idle while
the copies' worked. The pass is made long on purpose: two requests a second for each kind, so
copying Secrets into two new sub-namespaces takes seconds. The figures are in bench/ (scenario
8, converge).
"""

from __future__ import annotations

from accurate_testbed.objects import secret
from libaccurate.network.kube import resource_path
from tests.e2e.controller import SECRETS, Controllers, Scene

# Secrets copied into each sub-namespace: at two a second (a burst of three), the first
# sub-namespace has its copies some 3.5 s into the pass and the second some 5 s later.
COPIES = 10
# The default writers (8): a bucket serves the writers waiting at it in the order they came,
# so the first namespace's copies are not overtaken by the second's.
LIMITED = ("--apiserver-qps-throttle", "2")


def test_a_subnamespace_is_ready_once_its_own_copies_are_there_not_at_the_end_of_the_pass(
    controllers: Controllers, scene: Scene
) -> None:
    """Two SubNamespaces asked for before the controller starts: its first pass creates both
    namespaces and copies the parent's Secrets into them, the first's before the second's. The
    first is Ready while the second still lacks copies, and is Ready only once its own copies
    are all there."""
    root = scene.root()
    for index in range(COPIES):
        path = resource_path("", "v1", "secrets", root)
        scene.kube.create(path, secret(root, f"s{index}", "update", {"value": "x"}))
    first, second = scene.subnamespace(root, "a"), scene.subnamespace(root, "b")
    controllers.start(SECRETS, *LIMITED)
    scene.settle(root, first)
    assert scene.copies(first, root) == COPIES
    assert scene.copies(second, root) < COPIES
    scene.settle(root, second)
    assert scene.copies(second, root) == COPIES


def test_a_status_someone_else_overwrote_is_put_back(
    controllers: Controllers, scene: Scene
) -> None:
    """A change to a SubNamespace's status alone goes to the bulk lane, not the SubNamespace
    lane (the controller's own statuses come by the thousand during a long pass): a status
    emptied by someone else is still written back, by a pass that change starts (the resync
    is ten minutes away)."""
    controllers.start(SECRETS, "--resync-period", "10m")
    root = scene.root()
    child = scene.subnamespace(root, "child")
    scene.settle(root, child)
    emptied = '{"status": {"conditions": []}}'
    scene.kubectl(
        "patch",
        "subnamespace",
        child,
        "-n",
        root,
        "--subresource=status",
        "--type=merge",
        "-p",
        emptied,
    )
    scene.settle(root, child)
