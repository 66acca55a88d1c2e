"""The namespaces a command works on: all of the cluster's, or the part the user may read.

An administrator's view is one LIST and holds every namespace. A tenant may not list
namespaces, so their view holds the ones they could get, and remembers which names they were
refused, with the server's words. Rules judged on a partial view must not refuse on what it
cannot see: ``rules_forests`` puts a stand-in for every refused name, once as a root and once
as a template, and only a refusal that holds in both is certain. The API server and the
webhook stay the judges of the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from libaccurate.constants import LABEL_TYPE, TYPE_ROOT, TYPE_TEMPLATE
from libaccurate.forest import Forest, Node


class Namespaces:
    """Namespaces by name, the forest they form, and, for a partial view, what was refused."""

    def __init__(
        self,
        items: Sequence[dict[str, Any]],
        refused: Mapping[str, str] | None = None,
        subnamespaces_read: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.items = list(items)
        self.by_name = {item["metadata"]["name"]: item for item in self.items}
        self.refused = dict(refused or {})
        # A partial view's SubNamespaces, by namespace, as read to follow them down.
        self.subnamespaces_read = {k: tuple(v) for k, v in (subnamespaces_read or {}).items()}
        self.complete = refused is None
        self.forest = Forest.build(self.items)

    def get(self, name: str) -> dict[str, Any] | None:
        return self.by_name.get(name)

    @property
    def rules_forests(self) -> tuple[Forest, ...]:
        """The forests the admission rules are judged on (see the module's docstring)."""
        if not self.refused:
            return (self.forest,)
        return tuple(
            Forest.build([*self.items, *(Node(name, {LABEL_TYPE: kind}) for name in self.refused)])
            for kind in (TYPE_ROOT, TYPE_TEMPLATE)
        )

    def missing(self, name: str) -> str:
        """Why ``name`` is not in the view: it does not exist, or the user may not read it."""
        return self.refused.get(name) or f"namespace {name} not found"
