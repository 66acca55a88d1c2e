"""Hierarchical resource quotas: what a whole subtree may use, as pure rules over plain dicts.

A HierarchicalResourceQuota (HRQ) in namespace N limits the sum of what N and every namespace
below it (sub-namespaces, grafted or made by a SubNamespace; not template instances) use. The
counting is left to kube-apiserver: every namespace of N's subtree holds a ResourceQuota
(``quota_name``) that counts what the HRQ limits, so the API server's own quota admission
counts each write and records the namespace's usage in that ResourceQuota's status as part of
the write. One ResourceQuota serves every HRQ above a namespace that counts the same objects
(the same scope) and no resource it lacks (``Chain``): a namespace keeps one per HRQ that
no other HRQ above it serves, so a write is charged, and reviewed, once per distinct scope
rather than once per HRQ. The sum over the subtree of those statuses is the HRQ's usage; the
webhook on their status updates (``review_usage``) refuses the update, and so the write, that
would take it over ``hard``. docs/hierarchical-quotas.md has the whole model.

Everything here reads the forest (libaccurate.forest), HRQ objects and those ResourceQuotas,
and returns data: the ResourceQuotas that should exist, each HRQ's status, and verdicts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple, Protocol, overload

from libaccurate.actions import Condition
from libaccurate.constants import CREATED_BY_VALUE, LABEL_CREATED_BY
from libaccurate.forest import Forest
from libaccurate.quantity import ZERO, Quantity, QuantityError, exceeded, of_nanos, parse

Object = Mapping[str, Any]
ResourceList = Mapping[str, Quantity]
QuotaKey = tuple[str, str]

GROUP = "quota.accurate.cybozu.com"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "HierarchicalResourceQuota"
PLURAL = "hierarchicalresourcequotas"
CRD_NAME = f"{PLURAL}.{GROUP}"
# The object count that caps how many sub-namespaces a tree may have: SubNamespaces live in
# the parent, so the sum over a subtree of the SubNamespaces in each namespace is the number of
# namespaces made below it.
COUNT_SUBNAMESPACES = "count/subnamespaces.accurate.cybozu.com"

# On each ResourceQuota the controller keeps for an HRQ: the HRQ's namespace (a label, so that
# the controller and the webhook can select exactly these) and its namespace/name.
LABEL_HRQ_NAMESPACE = "accurate.cybozu.com/hrq-namespace"
ANNOTATION_HRQ = "accurate.cybozu.com/hrq"
# The other HRQs a ResourceQuota counts for in its namespace (``Chain.serves``), "ns/name,...": so a
# tenant who may not read an HRQ above their tree still learns that it limits them.
ANNOTATION_SERVES = "accurate.cybozu.com/hrq-serves"
QUOTA_PREFIX = "hrq."
# The limit of the ResourceQuotas kept for HRQs (1P): they count, the webhook judges. Not
# higher: kube-apiserver refuses object counts of 9.3e15 and more (their milli value overflows).
COUNTING_ONLY = Quantity(Fraction(10**15))
_MAX_NAME = 253

CONDITION_EXCEEDED = "Exceeded"
CONDITION_LIMITED_ABOVE = "LimitedAbove"
CONDITION_COUNTED = "Counted"
OWNED_CONDITIONS = (CONDITION_COUNTED, CONDITION_EXCEEDED, CONDITION_LIMITED_ABOVE)


class QuotaError(ValueError):
    """An HRQ whose spec cannot be enforced; the message names the HRQ and the field."""


class Hrq(NamedTuple):
    """One HRQ as the rules read it: where it is, what it limits, which objects it counts."""

    namespace: str
    name: str
    hard: Mapping[str, Quantity]
    scope_selector: Mapping[str, Any] | None = None

    @property
    def key(self) -> QuotaKey:
        return (self.namespace, self.name)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def read_resource_list(values: Any, where: str) -> dict[str, Quantity]:
    """A ResourceList's quantities; raises QuotaError naming the entry that is wrong."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise QuotaError(f"{where} must be a map of resource names to quantities")
    found = {}
    for resource, text in values.items():
        try:
            quantity = parse(text)
        except QuantityError as error:
            raise QuotaError(f"{where}.{resource}: {text!r}: {error}") from None
        if quantity.value < 0:
            raise QuotaError(f"{where}.{resource}: {text} must be greater than or equal to 0")
        found[str(resource)] = quantity
    return found


def read_hrq(obj: Object) -> Hrq:
    """An HRQ object as the rules read it; raises QuotaError for a spec that cannot be used."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    where = f"HierarchicalResourceQuota {metadata.get('namespace')}/{metadata.get('name')}"
    hard = read_resource_list(spec.get("hard"), f"{where}: spec.hard")
    scope = spec.get("scopeSelector") or None
    return Hrq(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""), hard, scope)


def read_hrqs(objects: Iterable[Object]) -> tuple[list[Hrq], dict[QuotaKey, str]]:
    """The usable HRQs, and for the others why not (by namespace and name)."""
    usable, problems = [], {}
    for obj in objects:
        try:
            usable.append(read_hrq(obj))
        except QuotaError as error:
            metadata = obj.get("metadata") or {}
            problems[(metadata.get("namespace", ""), metadata.get("name", ""))] = str(error)
    return usable, problems


def quota_name(hrq: QuotaKey) -> str:
    """The name of the ResourceQuota kept for ``hrq`` in each namespace of its subtree.

    ``hrq.<namespace>.<name>`` names the HRQ, so that kube-apiserver's own refusals (``must
    specify requests.cpu``, a namespace over the limit on its own) tell a tenant which HRQ
    they hit; namespace names hold no dots, so two HRQs never share one. A pair too long for an
    object name gets a hash in place of the HRQ's name.
    """
    namespace, name = hrq
    full = f"{QUOTA_PREFIX}{namespace}.{name}"
    if len(full) <= _MAX_NAME:
        return full
    return f"{QUOTA_PREFIX}{namespace}.{hashlib.sha256(name.encode()).hexdigest()}"


def hrq_of_quota(quota: Object) -> QuotaKey | None:
    """Which HRQ a ResourceQuota stands for, if the controller keeps it for one."""
    metadata = quota.get("metadata") or {}
    labels = metadata.get("labels") or {}
    text = (metadata.get("annotations") or {}).get(ANNOTATION_HRQ) or ""
    namespace, _, name = text.partition("/")
    if LABEL_HRQ_NAMESPACE not in labels or not name or labels[LABEL_HRQ_NAMESPACE] != namespace:
        return None
    return (namespace, name)


def desired_quota(hrq: Hrq, namespace: str, serves: Sequence[Hrq] = ()) -> dict[str, Any]:
    """The ResourceQuota that makes kube-apiserver count, in ``namespace``, what ``hrq`` limits
    (and what the HRQs ``serves`` limit: it counts for them too).

    Its limits are ``COUNTING_ONLY``, never reached: kube-apiserver counts and records, and
    every refusal for going over comes from the webhook, with the numbers of the whole tree
    (a namespace-local ``exceeded quota`` would show what one namespace uses, not the tree).
    """
    spec: dict[str, Any] = {"hard": dict(sorted(_counting_hard(hrq).items()))}
    if hrq.scope_selector:
        spec["scopeSelector"] = hrq.scope_selector
    annotations = {ANNOTATION_HRQ: hrq.ref}
    if (refs := _refs(serves)) is not None:
        annotations[ANNOTATION_SERVES] = refs
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": quota_name(hrq.key),
            "namespace": namespace,
            "labels": {LABEL_CREATED_BY: CREATED_BY_VALUE, LABEL_HRQ_NAMESPACE: hrq.namespace},
            "annotations": annotations,
        },
        "spec": spec,
    }


def _refs(hrqs: Sequence[Hrq]) -> str | None:
    """The ``accurate.cybozu.com/hrq-serves`` annotation for ``hrqs`` (None: none)."""
    return ",".join(sorted(hrq.ref for hrq in hrqs)) or None


def hrqs_counted_by(quota: Object) -> list[QuotaKey]:
    """The HRQs a kept ResourceQuota counts for: its own and those it serves."""
    own = hrq_of_quota(quota)
    if own is None:
        return []
    text = ((quota.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_SERVES) or ""
    served = [ref.partition("/") for ref in text.split(",") if "/" in ref]
    return [own, *((namespace, name) for namespace, _, name in served if namespace and name)]


def subtree(forest: Forest, hrq: Hrq) -> tuple[str, ...]:
    """The namespaces ``hrq`` limits: its own and every sub-namespace below it."""
    if hrq.namespace not in forest:
        return ()
    return forest.subtree(hrq.namespace)


def by_namespace(hrqs: Iterable[Hrq]) -> dict[str, list[Hrq]]:
    """The HRQs by the namespace they are in, sorted: an index for many ``covering`` calls."""
    found: dict[str, list[Hrq]] = {}
    for hrq in sorted(hrqs):
        found.setdefault(hrq.namespace, []).append(hrq)
    return found


class HrqIndex(Sequence[Hrq]):
    """HRQs with their index by namespace kept beside them, so that finding the HRQs above a
    namespace costs its depth, not the number of HRQs: the webhook reviews with one built once
    per change of the HRQs' specs."""

    def __init__(self, hrqs: Iterable[Hrq]) -> None:
        self._all = tuple(hrqs)
        self.namespaces: Mapping[str, Sequence[Hrq]] = by_namespace(self._all)

    def __len__(self) -> int:
        return len(self._all)

    @overload
    def __getitem__(self, index: int) -> Hrq: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Hrq]: ...
    def __getitem__(self, index: int | slice) -> Hrq | Sequence[Hrq]:
        return self._all[index]

    def in_namespace(self, namespace: str) -> Sequence[Hrq]:
        """The HRQs in ``namespace``, in name order."""
        return self.namespaces.get(namespace, ())


def covering(
    forest: Forest,
    hrqs: Iterable[Hrq],
    namespace: str,
    index: Mapping[str, Sequence[Hrq]] | None = None,
) -> list[Hrq]:
    """The HRQs that limit what ``namespace`` uses: its own and those of its ancestors,
    nearest first (``index``, from ``by_namespace(hrqs)``, saves building it again; an
    HrqIndex carries its own)."""
    chain = (namespace, *forest.ancestors(namespace))
    if index is None:
        index = hrqs.namespaces if isinstance(hrqs, HrqIndex) else by_namespace(hrqs)
    return [hrq for name in chain for hrq in index.get(name, ())]


def scope_key(selector: Mapping[str, Any] | None) -> str:
    """What tells the objects a quota counts apart: its scopeSelector in one canonical text
    ("" for none). An empty ``values`` list and no list read alike, as the API server writes a
    ResourceQuota back without the empty one."""
    if not selector:
        return ""
    expressions = [
        {k: (sorted(v) if k == "values" else v) for k, v in term.items() if v not in (None, [])}
        for term in selector.get("matchExpressions") or ()
    ]
    if not expressions:
        return ""
    return json.dumps(expressions, sort_keys=True, separators=(",", ":"))


def hrq_scope(hrq: Hrq) -> str:
    return scope_key(hrq.scope_selector)


def quota_scope(quota: Object) -> str:
    """The ``scope_key`` of a ResourceQuota: what it counts."""
    return scope_key((quota.get("spec") or {}).get("scopeSelector"))


class Counted(NamedTuple):
    """What one ResourceQuota kept for HRQs counts: the objects it counts (``scope_key``) and
    its recorded usage, by resource."""

    scope: str
    used: ResourceList


def counted_quota(quota: Object) -> Counted:
    """A kept ResourceQuota as the sums read it; an entry that cannot be read counts as
    nothing (kube-apiserver writes only valid quantities)."""
    used = (quota.get("status") or {}).get("used") or {}
    values = {}
    for resource, text in used.items():
        try:
            values[resource] = parse(text)
        except QuantityError:
            continue
    return Counted(quota_scope(quota), values)


class Usage(Protocol):
    """What the ResourceQuotas kept in each namespace count: a QuotaTable, the keeper's view
    of its cache, the webhook's sums or its ledger."""

    def counted_in(self, namespace: str, /) -> Iterable[Counted]: ...


class QuotaTable:
    """Kept ResourceQuotas by namespace: a Usage over a list of them."""

    def __init__(self, quotas: Iterable[Object]) -> None:
        self._by_namespace: dict[str, list[Counted]] = {}
        for quota in quotas:
            namespace = str((quota.get("metadata") or {}).get("namespace") or "")
            self._by_namespace.setdefault(namespace, []).append(counted_quota(quota))

    def counted_in(self, namespace: str, /) -> Iterable[Counted]:
        return self._by_namespace.get(namespace, ())


def usage_of(quotas: Iterable[Object]) -> dict[QuotaKey, dict[str, Quantity]]:
    """What each object's status says is used, by (namespace, name); an entry that cannot be
    read counts as nothing."""
    return {_key(quota): dict(counted_quota(quota).used) for quota in quotas}


def namespace_used(
    usage: Usage, hrq: Hrq, namespace: str, wider: bool = False
) -> dict[str, Quantity]:
    """What ``namespace`` uses of what ``hrq`` limits, as the ResourceQuotas there that count
    the same objects say: per resource, the largest they record (each counts every such
    object; one may be a write ahead of another). ``wider`` takes unscoped ones too, which
    count more than a scoped HRQ: an upper bound, for refusing."""
    scopes = {hrq_scope(hrq), ""} if wider else {hrq_scope(hrq)}
    found: dict[str, Quantity] = {}
    for counted in usage.counted_in(namespace):
        if counted.scope not in scopes:
            continue
        for resource in hrq.hard:
            amount = counted.used.get(resource)
            if amount is not None and (resource not in found or amount > found[resource]):
                found[resource] = amount
    return found


def nothing_used(hrq: Hrq) -> dict[str, Quantity]:
    """A zero of each resource ``hrq`` limits, in the format of its ``hard``: where a sum over
    its subtree starts."""
    return {resource: of_nanos(0, q.format) for resource, q in hrq.hard.items()}


def tree_used(
    forest: Forest, hrq: Hrq, usage: Usage, without: str | None = None
) -> dict[str, Quantity]:
    """The sum over ``hrq``'s subtree (leaving out ``without``) of each resource it limits."""
    sums = nothing_used(hrq)
    for namespace in subtree(forest, hrq):
        if namespace == without:
            continue
        used = namespace_used(usage, hrq, namespace)
        for resource in sums:
            if resource in used:
                sums[resource] = sums[resource] + used[resource]
    return sums


class SubtreeUsed(Protocol):
    """What ``tree_used`` answers, however it is found: ``tree_used`` itself adds up the
    subtree; the webhook reads the sums it keeps (libaccurate.quotasums)."""

    def __call__(
        self, forest: Forest, hrq: Hrq, usage: Usage, without: str | None = None
    ) -> dict[str, Quantity]: ...


def _pairs(values: ResourceList, resources: Sequence[str]) -> str:
    return ",".join(f"{r}={values.get(r, ZERO)!s}" for r in resources)


def review_usage(
    forest: Forest,
    hrqs: Sequence[Hrq],
    usage: Usage,
    namespace: str,
    scope: str,
    before: ResourceList,
    after: ResourceList,
    subtree_used: SubtreeUsed = tree_used,
) -> str | None:
    """Whether a ResourceQuota kept in ``namespace`` that counts the objects ``scope`` selects
    (``scope_key``) may record ``after`` instead of ``before`` (an update of its status); the
    denial. ``subtree_used`` gives what the other namespaces of an HRQ's subtree use (by
    default, their sum).

    The growth is the write's charge. It is judged against every HRQ above the namespace that
    counts those objects (the same scope, or none: an unscoped HRQ counts them too) and limits
    a resource that grew, nearest first: kube-apiserver updates a namespace's ResourceQuotas one
    by one and keeps those that passed when a later one is refused, so refusing the first update
    already is what keeps the others from counting a write that never happened. Whether another
    ResourceQuota in this namespace already shows this very write cannot be told, but each
    counts at least what this one does, so the namespace counts at the larger of what they show
    and ``after``. Only growth is judged: freeing never fails, and a namespace whose use did not
    change may record it even while a lowered HRQ is exceeded.
    """
    grown = {
        r: after.get(r, ZERO) - before.get(r, ZERO)
        for r in after.keys() | before.keys()
        if after.get(r, ZERO) > before.get(r, ZERO)
    }
    if not grown:
        return None
    for other in covering(forest, hrqs, namespace):
        if hrq_scope(other) not in (scope, ""):
            continue
        shown = namespace_used(usage, other, namespace)
        rest = subtree_used(forest, other, usage, without=namespace)
        total = {r: rest[r] + max(shown.get(r, ZERO), after.get(r, ZERO)) for r in rest}
        beyond = [r for r, limit in hard_items(other) if r in grown and total[r] > limit]
        if beyond:
            used = {r: total[r] - grown[r] for r in beyond}
            return exceeded_message(other, grown, used, beyond)
    return None


def hard_items(hrq: Hrq) -> list[tuple[str, Quantity]]:
    return sorted(hrq.hard.items())


def exceeded_message(
    hrq: Hrq, requested: ResourceList, used: ResourceList, resources: Sequence[str]
) -> str:
    """The refusal a tenant reads, worded as ResourceQuota's own ``exceeded quota`` one."""
    return (
        f"exceeded hierarchical quota: {hrq.ref} (namespace {hrq.namespace} and every namespace "
        f"below it), requested: {_pairs(requested, resources)}, used: {_pairs(used, resources)}, "
        f"limited: {_pairs(hrq.hard, resources)}"
    )


def review_move(
    forest: Forest, hrqs: Sequence[Hrq], usage: Usage, name: str, parent: str | None
) -> str | None:
    """Whether namespace ``name`` (with its subtree) may get ``parent``; the denial.

    Every HRQ above the new parent that does not already cover ``name`` gets the moved
    subtree's use on top of its own. What the subtree uses of a resource is read from the
    ResourceQuotas already in it that count the same objects (the same scope, or unscoped); a
    resource nothing counts there yet is taken as unused, and the HRQ's status reports the
    excess once the controller has counted it (docs/hierarchical-quotas.md, Moves).
    """
    if parent is None or parent not in forest:
        return None
    moved = forest.subtree(name) if name in forest else (name,)
    for hrq in covering(forest, hrqs, parent):
        if name in subtree(forest, hrq):
            continue
        tree = tree_used(forest, hrq, usage)
        extra = _known_use(usage, moved, hrq)
        beyond = [
            r
            for r, limit in hard_items(hrq)
            if extra.get(r, ZERO).value > 0 and tree[r].value + extra[r].value > limit.value
        ]
        if beyond:
            message = exceeded_message(hrq, extra, tree, beyond)
            return f"namespace {name} cannot move under {parent}: {message}"
    return None


def _known_use(usage: Usage, namespaces: Sequence[str], hrq: Hrq) -> dict[str, Quantity]:
    """What ``namespaces`` use of ``hrq``'s resources, as far as the ResourceQuotas kept there
    that count the same objects (or more: unscoped ones) say."""
    found: dict[str, Quantity] = {}
    for namespace in namespaces:
        for resource, amount in namespace_used(usage, hrq, namespace, wider=True).items():
            found[resource] = found[resource] + amount if resource in found else amount
    return found


@dataclass(frozen=True)
class HrqStatus:
    """The status the controller keeps on an HRQ (conditions without transition times)."""

    hard: Mapping[str, str]
    used: Mapping[str, str]
    summary: str
    conditions: tuple[Condition, ...]

    def body(self) -> dict[str, Any]:
        """The status as JSON, conditions left for the writer to date."""
        return {"hard": dict(self.hard), "used": dict(self.used), "summary": self.summary}


def binding_above(forest: Forest, hrqs: Sequence[Hrq], hrq: Hrq) -> list[tuple[Hrq, str]]:
    """The HRQs above ``hrq`` (or beside it, in its namespace) that allow less of one of its
    resources over a subtree that holds all of ``hrq``'s, with that resource: those bind it.

    One binds only if it counts at least the same objects (no scope, or the same scope)."""
    found = []
    for other in covering(forest, hrqs, hrq.namespace):
        if other == hrq or (other.scope_selector and other.scope_selector != hrq.scope_selector):
            continue
        for resource, limit in hard_items(hrq):
            if resource in other.hard and other.hard[resource].value < limit.value:
                found.append((other, resource))
    return found


def hrq_status(
    forest: Forest, hrqs: Sequence[Hrq], hrq: Hrq, usage: Usage, uncounted: Sequence[str]
) -> HrqStatus:
    """What ``hrq``'s status should say: the sums over its subtree and what limits it.

    ``uncounted`` are the namespaces of the subtree whose ResourceQuota for it does not exist
    or has no status yet: until kube-apiserver counted them, the sums may be low, and the
    ``Counted`` condition says so.
    """
    used = tree_used(forest, hrq, usage)
    resources = [r for r, _ in hard_items(hrq)]
    hard = {r: str(q) for r, q in hard_items(hrq)}
    shown = {r: str(used[r]) for r in resources}
    summary = ", ".join(f"{r}: {shown[r]}/{hard[r]}" for r in resources)
    excess = exceeded(used, hrq.hard)
    conditions = [_counted(uncounted), _exceeded(hrq, used, excess)]
    above = binding_above(forest, hrqs, hrq)
    if above:
        parts = [
            f"{other.ref} allows {resource}={other.hard[resource]!s}" for other, resource in above
        ]
        message = "a tighter quota applies: " + "; ".join(parts)
        conditions.append(Condition(CONDITION_LIMITED_ABOVE, "True", "TighterQuota", message))
    else:
        message = "no quota above allows less"
        conditions.append(Condition(CONDITION_LIMITED_ABOVE, "False", "NoTighterQuota", message))
    return HrqStatus(hard, shown, summary, tuple(conditions))


def invalid_status(problem: str) -> HrqStatus:
    """The status of an HRQ whose spec cannot be enforced: nothing counted, and why."""
    condition = Condition(CONDITION_COUNTED, "False", "InvalidSpec", f"not enforced: {problem}")
    return HrqStatus({}, {}, "invalid spec", (condition,))


def _counted(uncounted: Sequence[str]) -> Condition:
    if not uncounted:
        return Condition(CONDITION_COUNTED, "True", "Counted", "every namespace is counted")
    names = ", ".join(sorted(uncounted)[:10]) + (", ..." if len(uncounted) > 10 else "")
    message = f"usage not counted yet in {len(uncounted)} namespace(s): {names}"
    return Condition(CONDITION_COUNTED, "False", "Counting", message)


def _exceeded(hrq: Hrq, used: ResourceList, excess: Sequence[str]) -> Condition:
    if not excess:
        return Condition(CONDITION_EXCEEDED, "False", "WithinLimits", "usage is within hard")
    pairs = ", ".join(f"{r} used {used[r]!s} of {hrq.hard[r]!s}" for r in excess)
    message = f"over the limit (new use is refused, nothing running is removed): {pairs}"
    return Condition(CONDITION_EXCEEDED, "True", "OverLimit", message)


def status_differs(obj: Object, status: HrqStatus) -> bool:
    """Whether the HRQ's current status differs from ``status`` in what the controller owns."""
    current = obj.get("status") or {}
    body = status.body()
    if any(current.get(key) != value for key, value in body.items()):
        return True
    found = {
        c.get("type"): (c.get("status"), c.get("reason"), c.get("message"))
        for c in current.get("conditions") or ()
        if c.get("type") in OWNED_CONDITIONS
    }
    return found != {c.type: (c.status, c.reason, c.message) for c in status.conditions}


@dataclass(frozen=True)
class QuotaPlan:
    """What the controller must write to make the cluster's quota objects match the HRQs.

    ``create`` and ``replace`` hold ResourceQuotas (``replace`` with the current
    resourceVersion in the object); ``delete`` holds (namespace, name, uid) of ResourceQuotas
    kept for HRQs, or for namespaces, that are gone; ``statuses`` the HRQs whose status
    differs, with the status they should have; ``problems`` the HRQs that cannot be used;
    ``subtrees`` the namespaces each planned HRQ limits now (none for one that is gone or
    cannot be used), which a later plan of part of the cluster needs to find it again
    (libaccurate.quotascope).
    """

    create: tuple[dict[str, Any], ...] = ()
    replace: tuple[dict[str, Any], ...] = ()
    delete: tuple[tuple[str, str, str | None], ...] = ()
    statuses: tuple[tuple[Object, HrqStatus], ...] = ()
    problems: Mapping[QuotaKey, str] = field(default_factory=dict)
    subtrees: Mapping[QuotaKey, tuple[str, ...]] = field(default_factory=dict)


class Lookup(Protocol):
    """Objects by (namespace, name): a dict, or a view of the controller's cache."""

    def get(self, key: QuotaKey, /) -> Object | None: ...


def desired_quotas(forest: Forest, hrqs: Iterable[Hrq]) -> dict[QuotaKey, dict[str, Any]]:
    """Every ResourceQuota the HRQs need, by namespace and name, once each is counted: one in
    each namespace for each HRQ above it that no other serves (``Chain``)."""
    index = HrqIndex(hrqs)
    wanted = {}
    for hrq in index:
        for namespace in subtree(forest, hrq):
            chain = chain_of(covering(forest, index, namespace))
            if not chain.dominated[hrq.key]:
                wanted[(namespace, quota_name(hrq.key))] = desired_quota(
                    hrq, namespace, chain.serves[hrq.key]
                )
    return wanted


class Chain(NamedTuple):
    """The HRQs above one namespace, nearest first, and which ResourceQuota counts for each.

    The ResourceQuota kept for HRQ *B* there serves HRQ *A* when both count the same objects
    (the same scope) and *B* limits every resource *A* limits: more of them, or the same and
    *B* is nearer (in one namespace: first by name). So the namespace keeps one for every HRQ
    that none serves (``dominated`` False), and each HRQ is served by one of those.
    """

    above: Sequence[Hrq]
    # Whether another HRQ's ResourceQuota serves this one here.
    dominated: Mapping[QuotaKey, bool]
    # The HRQs this one's ResourceQuota serves here.
    serves: Mapping[QuotaKey, Sequence[Hrq]]

    def server(self, hrq: Hrq) -> Hrq:
        """The HRQ whose ResourceQuota counts for ``hrq`` here once all are in place."""
        found = (o for o in self.above if hrq in self.serves[o.key] and not self.dominated[o.key])
        return next(found, hrq)


def chain_of(above: Sequence[Hrq]) -> Chain:
    """Who serves whom among the HRQs ``above`` a namespace (nearest first)."""
    scopes = [hrq_scope(hrq) for hrq in above]
    over = [
        [
            i != j
            and scopes[i] == scopes[j]
            and a.hard.keys() >= b.hard.keys()
            and (i < j or a.hard.keys() != b.hard.keys())
            for j, b in enumerate(above)
        ]
        for i, a in enumerate(above)
    ]
    indexes = range(len(above))
    return Chain(
        above,
        {b.key: any(over[i][j] for i in indexes) for j, b in enumerate(above)},
        {a.key: [above[j] for j in indexes if over[i][j]] for i, a in enumerate(above)},
    )


Kept = Sequence[tuple[Hrq, str, "Object | None"]]


def kept_for(namespace: str, above: Sequence[Hrq], held: Lookup) -> Kept:
    """Each HRQ ``above`` a namespace, the name of its ResourceQuota and that quota there (None:
    none), looked up once for the namespace's checks."""
    names = [(hrq, quota_name(hrq.key)) for hrq in above]
    return [(hrq, name, held.get((namespace, name))) for hrq, name in names]


def counted_for(hrq: Hrq, kept: Kept, besides: str | None = None) -> bool:
    """Whether a ResourceQuota ``kept`` in a namespace for an HRQ above it that counts the same
    objects and every resource ``hrq`` limits (``hrq`` itself included), other than the one
    named ``besides``, counts every write of what ``hrq`` limits: each such write is then
    charged to it, and the webhook judges the charge against ``hrq`` too."""
    scope = hrq_scope(hrq)
    return any(
        counting(quota or {}, hrq)
        for other, name, quota in kept
        if name != besides
        and other.hard.keys() >= hrq.hard.keys()
        and (other is hrq or hrq_scope(other) == scope)
    )


def counting(quota: Object, hrq: Hrq) -> bool:
    """Whether kube-apiserver's quota admission charges, to this ResourceQuota, every write of
    what ``hrq`` limits.

    Admission reads a quota's resources from its ``status.hard``, which kube-controller-manager
    fills in after the quota is created (or its spec changes): until then a resource missing
    there is not charged at all (plugin/pkg/admission/resourcequota/controller.go CheckRequest
    masks the write's usage by ``status.hard``), so the quota counts only once each resource of
    the HRQ is in ``status.hard`` and, with its usage, in ``status.used``.
    """
    status = quota.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    return all(resource in hard and resource in used for resource in hrq.hard)


def awaiting(
    forest: Forest, hrqs: HrqIndex, held: Lookup, namespaces: Iterable[str]
) -> dict[str, str]:
    """Which of ``namespaces`` are below an HRQ whose ResourceQuota there does not count yet
    (missing, or not yet filled in by kube-controller-manager), each with why.

    Until it counts, a write there would not be charged to the HRQ, so nothing may give anyone
    rights there: the planner holds back copies into these namespaces. ``hrqs`` are the usable
    HRQs (one whose spec cannot be used holds nothing: it is not enforced at all, and its
    status says so) and ``held`` the ResourceQuotas kept for them (``held_quotas``, or a view
    of the controller's cache). Only the chains of ``namespaces`` are looked at: a pass of a
    few namespaces pays for their depth, not for every HRQ of the cluster.
    """
    found = {}
    for namespace in sorted(namespaces):
        node = forest.get(namespace)
        # Nothing can be created in a terminating namespace, and it gets no ResourceQuota.
        if node is None or node.terminating:
            continue
        above = covering(forest, hrqs, namespace)
        kept = kept_for(namespace, above, held)
        waiting = [hrq for hrq in above if not counted_for(hrq, kept)]
        if waiting:
            chain = chain_of(above)
            missing = [f"{quota_name(chain.server(hrq).key)} (for {hrq.ref})" for hrq in waiting]
            found[namespace] = (
                f"waiting until the ResourceQuotas counting for the hierarchical quotas above "
                f"namespace {namespace} exist and are counted: {', '.join(missing)}"
            )
    return found


def held_quotas(quotas: Iterable[Object]) -> dict[QuotaKey, Object]:
    """The ResourceQuotas among ``quotas`` that the controller keeps for an HRQ (those with
    its HRQ label and annotation), by namespace and name; one of the right name without them
    is someone else's and is left alone."""
    return {_key(q): q for q in quotas if hrq_of_quota(q) is not None}


def plan_quotas(
    forest: Forest, hrq_objects: Sequence[Object], quotas: Sequence[Object]
) -> QuotaPlan:
    """The writes that settle every HRQ's ResourceQuotas and status: a plan of everything.

    ``quotas`` are the ResourceQuotas the controller keeps (those with its HRQ label)."""
    hrqs, problems = read_hrqs(hrq_objects)
    held = held_quotas(quotas)
    objects = {_key(obj): obj for obj in hrq_objects}
    return plan_hrqs(forest, HrqIndex(hrqs), objects, problems, held, objects, held)


def plan_hrqs(
    forest: Forest,
    hrqs: HrqIndex,
    objects: Lookup,
    problems: Mapping[QuotaKey, str],
    held: Lookup,
    planned: Iterable[QuotaKey],
    former: Iterable[QuotaKey],
) -> QuotaPlan:
    """The writes that settle the ResourceQuotas and statuses of the HRQs ``planned`` (by
    namespace and name), at a cost of their subtrees, not of the cluster.

    ``hrqs`` are every usable HRQ (those above a planned one may bind it, or serve it),
    ``objects`` the HRQ objects as cached and ``problems`` why the others cannot be used;
    ``held`` the ResourceQuotas the controller keeps; ``former`` those of them that may no
    longer be wanted (a planned HRQ's, in the namespaces it was kept in before): those not
    wanted now are deleted, once none is the only one counting for an HRQ above its namespace.
    An HRQ served in a namespace by another's ResourceQuota (``Chain``) gets none there;
    one it already has there stays until the other's counts. A namespace being deleted gets no
    new ResourceQuota, but what it still uses counts until it is gone.
    """
    seen = _Seen(forest, hrqs, held)
    create, replace, statuses = [], [], []
    subtrees: dict[QuotaKey, list[str]] = {}
    wanted: set[QuotaKey] = set()
    summed: list[tuple[Hrq, Object | None, list[str]]] = []
    for key in sorted(set(planned)):
        hrq = next((h for h in hrqs.in_namespace(key[0]) if h.name == key[1]), None)
        obj = objects.get(key)
        if hrq is None:
            subtrees[key] = []
            invalid = invalid_status(problems[key]) if key in problems else None
            if obj is not None and invalid is not None and status_differs(obj, invalid):
                statuses.append((obj, invalid))
            continue
        subtrees[key] = list(subtree(forest, hrq))
        name, hard = quota_name(key), _counting_hard(hrq)
        uncounted = []
        for namespace in subtrees[key]:
            chain, kept = seen.chain(namespace), seen.kept(namespace)
            own = [quota for other, _, quota in kept if other is hrq]
            # A namespace of its subtree has it on its chain, unless the forest is cut.
            current = own[0] if own else held.get((namespace, name))
            node = forest.get(namespace)
            serves = chain.serves[hrq.key]
            if chain.dominated[hrq.key]:
                keep = current is not None and not counted_for(hrq, kept, name)
            else:
                keep = True
                if current is None and node is not None and not node.terminating:
                    create.append(desired_quota(hrq, namespace, serves))
            if keep:
                wanted.add((namespace, name))
                if current is not None and _differs(current, hrq, hard, _refs(serves)):
                    wanted_quota = desired_quota(hrq, namespace, serves)
                    version = (current.get("metadata") or {}).get("resourceVersion")
                    metadata = {**wanted_quota["metadata"], "resourceVersion": version}
                    replace.append({**wanted_quota, "metadata": metadata})
            if not counted_for(hrq, kept):
                uncounted.append(namespace)
        summed.append((hrq, obj, uncounted))
    delete = []
    for key in sorted(set(former) - wanted):
        quota = held.get(key)
        if quota is None:
            continue
        if _still_counting(seen, forest, key, quota):
            owner = hrq_of_quota(quota)
            if owner is not None:
                subtrees.setdefault(owner, []).append(key[0])
            continue
        delete.append((key[0], key[1], (quota.get("metadata") or {}).get("uid")))
    # The sums are those of the quotas this plan leaves: a deleted one may have recorded more.
    seen.leaving = {(namespace, name) for namespace, name, _ in delete}
    for hrq, obj, uncounted in summed:
        status = hrq_status(forest, hrqs, hrq, seen, uncounted)
        if obj is not None and status_differs(obj, status):
            statuses.append((obj, status))
    invalid_first = sorted(statuses, key=lambda pair: _key(pair[0]) not in problems)
    return QuotaPlan(
        tuple(sorted(create, key=_key)),
        tuple(sorted(replace, key=_key)),
        tuple(delete),
        tuple(invalid_first),
        problems,
        {key: tuple(namespaces) for key, namespaces in subtrees.items()},
    )


def _still_counting(seen: _Seen, forest: Forest, key: QuotaKey, quota: Object) -> bool:
    """Whether a kept ResourceQuota no longer wanted (its HRQ is gone, no longer above its
    namespace, or served there by another's) is still the only one counting, in its namespace,
    what an HRQ above limits: it goes only once the one that takes over counts, so that a move,
    or a new or deleted HRQ, never leaves a write there uncounted."""
    namespace, name = key
    if namespace not in forest:
        return False
    counted, kept = counted_quota(quota), seen.kept(namespace)
    return any(
        hrq_scope(hrq) == counted.scope
        and counted.used.keys() & hrq.hard.keys()
        and not counted_for(hrq, kept, besides=name)
        for hrq, _, _ in kept
    )


def missing_quotas(
    forest: Forest, hrqs: HrqIndex, held: Lookup, namespaces: Iterable[str]
) -> list[dict[str, Any]]:
    """The ResourceQuotas ``namespaces`` lack for the HRQs above them, as a plan of everything
    would create them there: at a cost of their depth, for namespaces just made."""
    found = []
    for namespace in sorted(namespaces):
        node = forest.get(namespace)
        if node is None or node.terminating:
            continue
        chain = chain_of(covering(forest, hrqs, namespace))
        for hrq in chain.above:
            # An HRQ in a namespace that is gone limits nothing (``subtree``).
            if (
                hrq.namespace in forest
                and not chain.dominated[hrq.key]
                and held.get((namespace, quota_name(hrq.key))) is None
            ):
                found.append(desired_quota(hrq, namespace, chain.serves[hrq.key]))
    return found


class _Seen:
    """What a plan reads of each namespace it plans, worked out once: the HRQs above it (a
    namespace is in the subtree of each of them the plan plans), the ResourceQuotas kept there
    for them, and what those count (a Usage). One kept for an HRQ no longer above the namespace
    is left out: the status then shows the namespace as not counted yet, until the one that
    takes over counts."""

    def __init__(self, forest: Forest, hrqs: HrqIndex, held: Lookup) -> None:
        self._forest = forest
        self._hrqs = hrqs
        self._held = held
        self._chains: dict[str, Chain] = {}
        self._kept: dict[str, Kept] = {}
        self._counted: dict[str, list[Counted]] = {}
        # The quotas the plan deletes, left out of what is counted (set before it is read).
        self.leaving: set[QuotaKey] = set()

    def chain(self, namespace: str) -> Chain:
        if namespace not in self._chains:
            self._chains[namespace] = chain_of(covering(self._forest, self._hrqs, namespace))
        return self._chains[namespace]

    def kept(self, namespace: str) -> Kept:
        if namespace not in self._kept:
            above = self.chain(namespace).above
            self._kept[namespace] = kept_for(namespace, above, self._held)
        return self._kept[namespace]

    def counted_in(self, namespace: str, /) -> Iterable[Counted]:
        if namespace not in self._counted:
            found = (
                quota
                for _, name, quota in self.kept(namespace)
                if quota is not None and (namespace, name) not in self.leaving
            )
            self._counted[namespace] = [counted_quota(quota) for quota in found]
        return self._counted[namespace]


def _key(obj: Object) -> QuotaKey:
    metadata = obj.get("metadata") or {}
    return (metadata.get("namespace", ""), metadata.get("name", ""))


def _counting_hard(hrq: Hrq) -> dict[str, str]:
    """The ``hard`` of the ResourceQuotas kept for ``hrq``, as ``desired_quota`` writes it."""
    return {r: str(max(q, COUNTING_ONLY)) for r, q in hrq.hard.items()}


def _differs(current: Object, hrq: Hrq, hard: Mapping[str, str], serves: str | None) -> bool:
    """Whether a kept ResourceQuota's spec or identifying metadata is not what ``hrq`` needs
    (``hard`` from ``_counting_hard``, ``serves`` from ``_refs``; quantities compared by value
    when not as written: the API server may print them differently)."""
    metadata = current.get("metadata") or {}
    if hrq_of_quota(current) != hrq.key:
        return True
    if (metadata.get("labels") or {}).get(LABEL_CREATED_BY) != CREATED_BY_VALUE:
        return True
    if (metadata.get("annotations") or {}).get(ANNOTATION_SERVES) != serves:
        return True
    if quota_scope(current) != hrq_scope(hrq):
        return True
    spec = current.get("spec") or {}
    if spec.get("hard") == hard:
        return False
    try:
        found = read_resource_list(spec.get("hard"), "spec.hard")
    except QuotaError:
        return True
    want = read_resource_list(hard, "spec.hard")
    return {r: q.value for r, q in found.items()} != {r: q.value for r, q in want.items()}


class Headroom(NamedTuple):
    """What one HRQ still lets a namespace use of one resource: ``hard - used`` over the
    HRQ's whole subtree (negative when it is over its limit)."""

    hrq: Hrq
    used: Quantity
    left: Quantity


def tightest(applied: Iterable[tuple[Hrq, ResourceList]]) -> dict[str, Headroom]:
    """Per resource, the HRQ that leaves a namespace the least of it: the limit its next write
    meets first. ``applied`` are the HRQs that limit the namespace, nearest first, each with
    what its subtree uses (as ``applying`` gives them, or as their statuses say).

    The least left wins, not the lowest ``hard``: a parent's HRQ nearly spent by siblings
    binds before a child's small one. Scoped HRQs take no part, as they limit only what their
    scopes select; a resource whose use is not known is left out; on a tie the nearest wins.
    """
    found: dict[str, Headroom] = {}
    for hrq, used in applied:
        if hrq.scope_selector:
            continue
        for resource, limit in hard_items(hrq):
            if resource not in used:
                continue
            left = limit - used[resource]
            if resource not in found or left.value < found[resource].left.value:
                found[resource] = Headroom(hrq, used[resource], left)
    return dict(sorted(found.items()))
