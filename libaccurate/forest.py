"""The namespace forest: which namespace is whose parent, template, child or instance.

Built from plain Namespace objects, and kept current one namespace at a time (``upsert``,
``remove``) so that a long-lived forest follows a watch at a cost independent of the cluster's
size, it answers the structural questions that the planner, the
admission rules and the CLI all ask, and it finds the states that webhooks should have prevented
(cycles, references to namespaces that do not exist), because the planner must leave such
namespaces alone rather than act on a broken picture.
"""

# Annotations are evaluated here (no `from __future__ import annotations`): as strings, each
# NamedTuple field cost a compile() at import, the first one 10 M instructions, 5 % of a
# `list` (docs/design-notes.md, "`list` without click").

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, NamedTuple

from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE, LABEL_TYPE, TYPE_ROOT, TYPE_TEMPLATE

Kind = Literal["root", "template", "subnamespace", "instance", "plain"]


class Node(NamedTuple):
    """One namespace as the forest sees it: its name and the labels that link it.

    The forest's records are named tuples: the plugin loads this module at every start, and a
    frozen dataclass costs several times as much to define (docs/design-notes.md, Start-up).
    """

    name: str
    labels: Mapping[str, str]
    terminating: bool = False

    @property
    def type(self) -> str | None:
        return self.labels.get(LABEL_TYPE)

    @property
    def parent(self) -> str | None:
        return self.labels.get(LABEL_PARENT) or None

    @property
    def template(self) -> str | None:
        return self.labels.get(LABEL_TEMPLATE) or None

    @property
    def is_root(self) -> bool:
        return self.parent is None and self.type == TYPE_ROOT

    @property
    def is_template(self) -> bool:
        return self.parent is None and self.type == TYPE_TEMPLATE

    @property
    def source(self) -> str | None:
        """The namespace that labels and objects flow from: the parent, else the template.

        A sub-namespace may not have a template (admission denies it), so when both labels are
        present the parent wins, as it does in the Go Accurate.
        """
        return self.parent or self.template

    @property
    def kind(self) -> Kind:
        """A single word for display; a root that uses a template is still shown as a root."""
        if self.parent is not None:
            return "subnamespace"
        if self.type == TYPE_ROOT:
            return "root"
        if self.type == TYPE_TEMPLATE:
            return "template"
        if self.template is not None:
            return "instance"
        return "plain"


def node_from_object(namespace: Mapping[str, Any]) -> Node:
    """Read the forest's view of a Namespace object (the JSON form the API returns)."""
    metadata = namespace.get("metadata") or {}
    terminating = bool(metadata.get("deletionTimestamp")) or (
        (namespace.get("status") or {}).get("phase") == "Terminating"
    )
    return Node(
        name=metadata["name"],
        labels=dict(metadata.get("labels") or {}),
        terminating=terminating,
    )


ProblemReason = Literal["Cycle", "MissingReference"]


class Problem(NamedTuple):
    """Why nothing can flow into a namespace: a cycle, or a link to a missing namespace.

    ``namespaces`` lists the names along the broken chain, starting at the namespace asked
    about, so that a message can name every namespace an operator has to look at.
    """

    reason: ProblemReason
    namespaces: tuple[str, ...]

    @property
    def message(self) -> str:
        chain = " -> ".join(self.namespaces)
        if self.reason == "Cycle":
            return f"parent/template references form a cycle: {chain}"
        return f"parent/template reference to a namespace that does not exist: {chain}"


class Chain(NamedTuple):
    """The result of walking parent-or-template links upward from a namespace."""

    names: tuple[str, ...]
    end: Literal["top", "missing", "cycle"]


class Forest:
    """An index of namespaces by the links between them: built from a snapshot, then kept
    current by ``upsert`` and ``remove`` (each O(log k) in the siblings k it moves among)."""

    def __init__(
        self,
        nodes: dict[str, Node] | None = None,
        children: dict[str, list[str]] | None = None,
        instances: dict[str, list[str]] | None = None,
    ) -> None:
        self.nodes: dict[str, Node] = {} if nodes is None else nodes
        self._children: dict[str, list[str]] = {} if children is None else children
        self._instances: dict[str, list[str]] = {} if instances is None else instances
        self._problems: dict[str, Problem | None] = {}

    @classmethod
    def build(cls, namespaces: Iterable[Mapping[str, Any] | Node]) -> "Forest":
        """Index Namespace objects (or ready-made nodes) by name, parent and template."""
        forest = cls()
        for item in namespaces:
            node = item if isinstance(item, Node) else node_from_object(item)
            forest.nodes[node.name] = node
        for node in sorted(forest.nodes.values(), key=lambda n: n.name):
            links = forest._links_of(node)
            if links is not None:
                index, key = links
                index.setdefault(key, []).append(node.name)
        return forest

    def upsert(self, node: Node) -> None:
        """Add ``node`` or replace the namespace of that name, as a watch event says."""
        self.remove(node.name)
        self.nodes[node.name] = node
        links = self._links_of(node)
        if links is not None:
            index, key = links
            bisect.insort(index.setdefault(key, []), node.name)

    def remove(self, name: str) -> None:
        """Forget a namespace that is gone; a name the forest does not hold is ignored.

        Memoised problems are dropped: a change anywhere may break or mend chains below it.
        """
        node = self.nodes.pop(name, None)
        self._problems.clear()
        links = None if node is None else self._links_of(node)
        if links is None:
            return
        index, key = links
        names = index[key]
        names.pop(bisect.bisect_left(names, name))
        if not names:
            del index[key]

    def _links_of(self, node: Node) -> tuple[dict[str, list[str]], str] | None:
        """The index that lists ``node`` under its source (children or instances), and the key."""
        if node.parent is not None:
            return self._children, node.parent
        if node.template is not None:
            return self._instances, node.template
        return None

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def get(self, name: str) -> Node | None:
        return self.nodes.get(name)

    def children(self, name: str) -> tuple[str, ...]:
        """Sub-namespaces whose parent label names ``name``, sorted by name."""
        return tuple(self._children.get(name, ()))

    def instances(self, name: str) -> tuple[str, ...]:
        """Non-sub-namespaces whose template label names ``name``, sorted by name."""
        return tuple(self._instances.get(name, ()))

    def dependents(self, name: str) -> tuple[str, ...]:
        """Every namespace whose source is ``name``: its children, then its instances."""
        return self.children(name) + self.instances(name)

    def roots(self) -> tuple[str, ...]:
        """Namespaces labelled as roots (tops of sub-namespace trees), sorted by name."""
        return tuple(sorted(n.name for n in self.nodes.values() if n.is_root))

    def templates(self) -> tuple[str, ...]:
        """Template namespaces that are not instances of another template, sorted by name."""
        return tuple(
            sorted(n.name for n in self.nodes.values() if n.is_template and n.template is None)
        )

    def walk_sources(self, name: str, first: str | None = None) -> Chain:
        """Follow parent-or-template links upward from ``name``.

        ``first`` replaces the first hop, so that admission can ask "what if this namespace
        pointed there?" without building a new forest. The walk ends at a namespace with no
        source (``top``), at a name that does not exist (``missing``, the name is included) or
        when a name repeats (``cycle``, the repeated name is included once more).
        """
        node = self.nodes.get(name)
        hop = first if first is not None else (node.source if node else None)
        names = [name]
        while hop is not None:
            if hop in names:
                return Chain((*names, hop), "cycle")
            names.append(hop)
            upper = self.nodes.get(hop)
            if upper is None:
                return Chain(tuple(names), "missing")
            hop = upper.source
        return Chain(tuple(names), "top")

    def problem(self, name: str) -> Problem | None:
        """Why ``name`` must get nothing propagated, or None when its chain is sound.

        A broken link anywhere above a namespace breaks it too: what it would inherit cannot be
        known. Each answer costs one walk up the chain, O(depth), and is memoised.
        """
        if name in self._problems:
            return self._problems[name]
        chain = self.walk_sources(name)
        found: Problem | None = None
        if chain.end == "cycle":
            found = Problem("Cycle", chain.names)
        elif chain.end == "missing":
            found = Problem("MissingReference", chain.names)
        self._problems[name] = found
        return found

    def problems(self) -> dict[str, Problem]:
        """Every namespace with a broken chain, by name."""
        found = {}
        for name in self.nodes:
            problem = self.problem(name)
            if problem is not None:
                found[name] = problem
        return found

    def ancestors(self, name: str) -> tuple[str, ...]:
        """Parent, grandparent, ... of a sub-namespace, nearest first; stops before a repeat."""
        seen = [name]
        node = self.nodes.get(name)
        while node is not None and node.parent is not None and node.parent not in seen:
            seen.append(node.parent)
            node = self.nodes.get(node.parent)
        return tuple(seen[1:])

    def root_of(self, name: str) -> str | None:
        """The root whose tree holds ``name`` (itself if it is a root), or None if not in one."""
        top = (self.ancestors(name) or (name,))[-1]
        node = self.nodes.get(top)
        return top if node is not None and node.is_root else None

    def subtree(self, name: str) -> tuple[str, ...]:
        """``name`` and all its sub-namespaces, depth first, parents before children."""
        return self._closure(name, self.children)

    def downstream(self, name: str) -> tuple[str, ...]:
        """``name`` and every namespace that inherits from it, sources before dependents."""
        return self._closure(name, self.dependents)

    def upward(self, names: Iterable[str]) -> frozenset[str]:
        """``names`` and every namespace their parent-or-template chains pass through, missing
        ones included: all that what flows into ``names`` depends on."""
        found: set[str] = set()
        for name in names:
            if name not in found:
                found.update(self.walk_sources(name).names)
        return frozenset(found)

    def copy(self) -> "Forest":
        """An independent forest of the same namespaces, for a pass to change as it plans."""
        return Forest(
            dict(self.nodes),
            {key: list(names) for key, names in self._children.items()},
            {key: list(names) for key, names in self._instances.items()},
        )

    def _closure(self, name: str, step: Callable[[str], tuple[str, ...]]) -> tuple[str, ...]:
        order: list[str] = []
        seen: set[str] = set()
        stack = [name]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            order.append(current)
            stack.extend(reversed(step(current)))
        return tuple(order)

    def top_down(self, within: frozenset[str] | None = None) -> tuple[str, ...]:
        """Every namespace with a sound chain, each after its source; ties by name.

        Walking down from the namespaces without a source reaches exactly the sound ones: a
        namespace in a cycle or below a missing reference has no path from such a top.
        ``within``, closed upward (see ``upward``), limits the walk to those namespaces, in
        the same order as the whole walk, at a cost that follows their number.
        """
        if within is None:
            tops: Iterable[str] = self.nodes
            step = self.dependents
        else:
            tops = (name for name in within if name in self.nodes)

            def step(name: str) -> tuple[str, ...]:
                return tuple(d for d in self.dependents(name) if d in within)

        order: list[str] = []
        for name in sorted(tops):
            if self.nodes[name].source is None:
                order.extend(self._closure(name, step))
        return tuple(order)
