"""The tour itself: two teams' namespace trees built, changed and inspected with kubectl and
``kubectl accurate``, waiting after each change until the controller has done its part."""

from __future__ import annotations

from demo.narrator import Narrator
from demo.stage import RBAC, wait
from libaccurate.constants import ANNOTATION_PROPAGATE, LABEL_TYPE, TYPE_ROOT
from libaccurate.network.kube import Kube, resource_path

ROOT = "team-a"
OTHER_ROOT = "team-b"
WEB = "team-a-web"
STAGING = "team-a-web-staging"
BATCH = "team-a-batch"
ADMINS = "team-a-admin"
OTHER_ADMINS = "team-b-admin"
SECOND_TEAM = f"""\
apiVersion: v1
kind: Namespace
metadata:
  name: {OTHER_ROOT}
  labels:
    {LABEL_TYPE}: {TYPE_ROOT}
    team: b
---
apiVersion: {RBAC}/v1
kind: RoleBinding
metadata:
  name: {OTHER_ADMINS}
  namespace: {OTHER_ROOT}
  annotations:
    {ANNOTATION_PROPAGATE}: update
roleRef:
  apiGroup: {RBAC}
  kind: ClusterRole
  name: admin
subjects:
- apiGroup: {RBAC}
  kind: Group
  name: {OTHER_ROOT}
"""


def tour(narrator: Narrator, kube: Kube) -> None:
    """Walk through the tour; a DemoError if a command fails or the controller falls behind."""
    _root(narrator)
    _subnamespaces(narrator)
    _propagated(narrator, kube)
    _move(narrator, kube)
    _cut(narrator, kube)


def _root(narrator: Narrator) -> None:
    narrator.heading(
        "A root namespace for team A",
        "A root is the top of a tree a team owns. The `team` label is one the controller "
        "copies down the tree.",
    )
    narrator.run("kubectl", "create", "namespace", ROOT)
    narrator.run("kubectl", "label", "namespace", ROOT, "team=a")
    narrator.run("kubectl", "accurate", "namespace", "set-type", ROOT, "root")
    narrator.heading(
        "Admin rights that follow the tree",
        "This RoleBinding makes group team-a admins of team-a; the annotation asks Accurate to "
        "copy it into every namespace below and keep the copies up to date.",
    )
    binding = ("--clusterrole=admin", "--group=team-a")
    narrator.run("kubectl", "create", "rolebinding", ADMINS, "-n", ROOT, *binding)
    narrator.run(
        "kubectl", "annotate", "rolebinding", ADMINS, "-n", ROOT, f"{ANNOTATION_PROPAGATE}=update"
    )


def _subnamespaces(narrator: Narrator) -> None:
    narrator.heading(
        "Sub-namespaces, two levels deep",
        "Tenants cannot create namespaces (they are cluster-wide), but they may create a "
        "SubNamespace in a namespace they own; the controller then creates the namespace.",
    )
    narrator.run("kubectl", "accurate", "sub", "create", WEB, ROOT)
    narrator.run("kubectl", "accurate", "sub", "create", BATCH, ROOT)
    _ready(narrator, ROOT, WEB, BATCH)
    narrator.run("kubectl", "accurate", "sub", "create", STAGING, WEB)
    _ready(narrator, WEB, STAGING)
    narrator.heading(
        "The tree",
        "`kubectl accurate list` draws every tree in the cluster, marking how each namespace "
        "got there: [r] a root, [s] made by a SubNamespace.",
    )
    narrator.run("kubectl", "accurate", "list")
    narrator.heading(
        "One namespace up close",
        "Its place in the tree, and the objects Accurate copied into it and from where.",
    )
    narrator.run("kubectl", "accurate", "namespace", "describe", STAGING)


def _ready(narrator: Narrator, parent: str, *names: str) -> None:
    subnamespaces = [f"subnamespace/{name}" for name in names]
    narrator.run(
        "kubectl", "wait", "--for=condition=Ready", *subnamespaces, "-n", parent, "--timeout=30s"
    )


def _propagated(narrator: Narrator, kube: Kube) -> None:
    narrator.heading(
        "What was propagated",
        "Every namespace below team-a got its `team` label and a copy of its RoleBinding.",
    )
    below = (WEB, BATCH, STAGING)
    wait(
        lambda: all(_label(kube, ns) == "a" and ADMINS in _bindings(kube, ns) for ns in below),
        "the team label and RoleBinding in every sub-namespace",
    )
    _show(narrator)


def _move(narrator: Narrator, kube: Kube) -> None:
    narrator.heading(
        "A second team",
        "Team B's root, declared in one manifest: the type label makes it a root.",
    )
    narrator.run("kubectl", "apply", "-f", "-", stdin=SECOND_TEAM)
    narrator.heading(
        "Move a sub-namespace to the other team",
        "A moved namespace takes its new parent's label and RoleBinding; the old copy goes.",
    )
    narrator.run("kubectl", "accurate", "sub", "move", BATCH, OTHER_ROOT)
    wait(
        lambda: _label(kube, BATCH) == "b" and _bindings(kube, BATCH) == {OTHER_ADMINS},
        f"{BATCH} to have team B's label and RoleBinding only",
    )
    narrator.run("kubectl", "get", "namespace", BATCH, "-L", "team")
    narrator.run("kubectl", "get", "rolebindings", "-n", BATCH)


def _cut(narrator: Narrator, kube: Kube) -> None:
    narrator.heading(
        "Cut a sub-namespace loose",
        "Cutting makes a sub-namespace a root of its own, keeping what is below it. The "
        "RoleBinding copies from its old root are removed, here and below; labels stay.",
    )
    narrator.run("kubectl", "accurate", "sub", "cut", WEB)
    wait(
        lambda: not (_bindings(kube, WEB) or _bindings(kube, STAGING)),
        f"the copies of {ADMINS} to leave {WEB} and {STAGING}",
    )
    narrator.run("kubectl", "accurate", "list")
    _show(narrator)


def _show(narrator: Narrator) -> None:
    narrator.run("kubectl", "get", "namespaces", "-l", "team", "-L", "team")
    narrator.run("kubectl", "get", "rolebindings", "--all-namespaces")


def _label(kube: Kube, namespace: str) -> str | None:
    found = kube.get(resource_path("", "v1", "namespaces", name=namespace))
    return (found["metadata"].get("labels") or {}).get("team")


def _bindings(kube: Kube, namespace: str) -> set[str]:
    path = resource_path(RBAC, "v1", "rolebindings", namespace=namespace)
    return {item["metadata"]["name"] for item in kube.list_objects(path).get("items") or []}
