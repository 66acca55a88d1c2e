"""The markers ``list`` draws: how each namespace got into its tree, the way ``kubectl hns
tree`` marks sub-namespaces with ``[s]``.

Roots, instances and broken chains show in the namespaces' labels; telling a namespace a
SubNamespace made from one grafted by a parent label alone takes the SubNamespaces. ``list``
therefore sends a LIST of every SubNamespace alongside its LIST of namespaces, on a connection
of its own, so the two cost one round trip of wall time (docs/design-notes.md). A user who may
not list SubNamespaces everywhere is marked from the SubNamespaces their view already read
(a tenant's view follows them down), and sees ``[s]`` where the origin is unknown, as the
legend then says.
"""

# Annotations are evaluated here (no `from __future__ import annotations`): as strings, each
# NamedTuple field cost a compile() at import, the first one 10 M instructions, 5 % of a
# `list` (docs/design-notes.md, "`list` without click").

import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from kubectl_accurate.namespaces import Namespaces
from kubectl_accurate.subnamespace_api import SubNamespaceApi
from libaccurate.forest import Forest
from libaccurate.network.kube import KubeError

LEGEND = {
    "r": "root",
    "s": "sub-namespace made by a SubNamespace",
    "g": "grafted: a parent label without a SubNamespace",
    "i": "instance of a template",
    "!": "broken chain: 'kubectl accurate ns describe NS' says why",
}
UNKNOWN_ORIGIN = "sub-namespace (made or grafted: the SubNamespaces could not all be read)"


class Origins(NamedTuple):
    """What the SubNamespaces read say: the namespaces they made, and the namespaces whose
    SubNamespaces were read (None: every namespace's, from one cluster-wide LIST)."""

    made: frozenset[str]
    read: frozenset[str] | None


def made_by_subnamespaces(forest: Forest, subs: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Of the SubNamespaces given as (namespace, name), the sub-namespaces they made: those
    whose parent is the SubNamespace's namespace, as the controller keeps them."""
    made = set()
    for namespace, name in subs:
        node = forest.get(name)
        if node is not None and node.parent == namespace:
            made.add(name)
    return frozenset(made)


def read_with_origins(
    api: SubNamespaceApi, view: Callable[[], Namespaces]
) -> tuple[Namespaces, Origins]:
    """``view()`` and, sent at the same time, the cluster-wide LIST of SubNamespaces (their
    metadata only: names are all it takes); the origins come from that LIST, else
    (forbidden, not served) from what the view read."""
    listed: list[list[dict[str, Any]]] = []
    failed: list[Exception] = []

    def list_all() -> None:
        try:
            listed.append(api.list_metadata(None))
        except KubeError:
            return  # forbidden or not served: what the view read decides
        except Exception as error:  # raised in the caller's thread below
            failed.append(error)

    lister = threading.Thread(target=list_all, daemon=True)
    lister.start()
    namespaces = view()
    lister.join()
    if failed:
        raise failed[0]
    if not listed:
        seen = namespaces.subnamespaces_read
        pairs = ((parent, child) for parent, children in seen.items() for child in children)
        return namespaces, Origins(made_by_subnamespaces(namespaces.forest, pairs), frozenset(seen))
    pairs = ((sub["namespace"], sub["name"]) for sub in listed[0])
    return namespaces, Origins(made_by_subnamespaces(namespaces.forest, pairs), None)


class Marking:
    """Marks namespaces as the trees are grown, then gives the legend of the marks drawn."""

    def __init__(self, forest: Forest, origins: Origins) -> None:
        self.forest = forest
        self.origins = origins
        self.drawn: set[str] = set()
        self.unknown = False

    def mark(self, name: str) -> str:
        """The markers of a namespace, joined (``r,i`` for a root that uses a template)."""
        node = self.forest.get(name)
        if node is None:
            return ""
        codes = []
        if self.forest.problem(name) is not None:
            codes.append("!")
        if node.is_root:
            codes.append("r")
        if node.parent is not None:
            known = self.origins.read is None or node.parent in self.origins.read
            self.unknown |= not known
            codes.append("g" if known and name not in self.origins.made else "s")
        elif node.template is not None:
            codes.append("i")
        self.drawn.update(codes)
        return ",".join(codes)

    def legend(self) -> str:
        """One line saying what each marker drawn means; ``[s]`` widened where a namespace's
        origin was unknown."""
        meanings = {**LEGEND, **({"s": UNKNOWN_ORIGIN} if self.unknown else {})}
        return "  ".join(f"[{code}] {meanings[code]}" for code in LEGEND if code in self.drawn)
