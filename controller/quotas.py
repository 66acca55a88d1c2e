"""The quota keeper: the ResourceQuotas hierarchical quotas need, and the HRQs' statuses.

For every HierarchicalResourceQuota and every namespace of its subtree there must be the
ResourceQuota that makes kube-apiserver count what the HRQ limits there (libaccurate.quota);
the keeper creates the missing ones, rewrites those whose spec drifted, deletes those of a
namespace that left the subtree or of an HRQ that is gone, and writes each HRQ's status (the
sums over its subtree, and conditions), with a Warning Event when an HRQ goes over its limit.

It runs in the reconcile loop's passes, like the sudoer keeper, from the cache's picture. A
whole pass plans every HRQ afresh from the forest and the ResourceQuotas' statuses, so a
restart, a relist or a pass cut short leaves nothing to drift; a pass scoped to what changed
plans only the HRQs the change concerns (libaccurate.quotascope), from HRQs parsed once per
spec, so that its cost follows their subtrees rather than the cluster. A pass where the
picture matches sends nothing. A write that fails is logged, and the next pass plans every HRQ
again; a conflict means the picture is stale, and the change that made it so starts a pass
over the namespaces it touched.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from controller.cache import HRQ_QUOTAS, Cache
from controller.events import Recorder
from controller.quota_admission import Parsed, ParsedHrqs
from controller.selfcheck import Permission
from libaccurate import quota
from libaccurate.actions import ObjectRef
from libaccurate.forest import Forest
from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path
from libaccurate.quotascope import Coverage

Obj = Mapping[str, Any]
# What the keeper does (controller.selfcheck checks them at startup when the CRD is there).
PERMISSIONS = (
    Permission(quota.GROUP, quota.PLURAL, ("list", "watch")),
    Permission(quota.GROUP, f"{quota.PLURAL}/status", ("patch",)),
    Permission("", "resourcequotas", ("list", "watch", "create", "update", "delete")),
)

log = logging.getLogger(__name__)


def _quota_path(namespace: str, name: str | None = None) -> str:
    return resource_path("", "v1", "resourcequotas", namespace, name)


def _hrq_path(namespace: str, name: str) -> str:
    return resource_path(quota.GROUP, quota.VERSION, quota.PLURAL, namespace, name)


class Quotas:
    """Keeps the HRQs' ResourceQuotas and statuses; call ``keep`` every pass."""

    def __init__(self, kube: Kube, cache: Cache, recorder: Recorder | None = None) -> None:
        self.kube = kube
        self.cache = cache
        self.recorder = recorder
        self._problems: Mapping[quota.QuotaKey, str] = {}
        # The HRQs parsed once per spec, as the webhook keeps them (controller.quota_admission).
        self._hrqs = ParsedHrqs()
        self._coverage = Coverage()
        # Both lanes make the quotas of new namespaces (keep_new) while the bulk lane keeps
        # them all: the parsed HRQs and the coverage are read and changed under this lock.
        self._lock = threading.Lock()
        # Whether the next pass must plan every HRQ: nothing planned yet, or a write failed
        # (a scoped pass might not plan its HRQ again, and a failed write is tried again).
        self._whole = True
        self._failed = False

    def parsed(self) -> quota.HrqIndex:
        """The usable HRQs as cached, parsed once per spec: the planner's hold check reads
        them by namespace rather than parsing every HRQ each pass."""
        with self._lock:
            return self._hrqs.current(self.cache)

    def held(self) -> quota.Lookup:
        """The ResourceQuotas kept for HRQs, looked up in the cache one by one."""
        return _Held(self.cache)

    def kept(self) -> Sequence[Obj]:
        """The ResourceQuotas kept for HRQs as cached, with their status."""
        return self.cache.items(HRQ_QUOTAS)

    def keep(self, forest: Forest, scope: Collection[str] | None = None) -> None:
        """Settle the HRQs a change in ``scope`` concerns (None: every HRQ), at a cost of
        their subtrees (libaccurate.quotascope)."""
        whole, self._whole, self._failed = self._whole or scope is None, True, False
        try:
            with self._lock:
                planned = self._plan(forest, None if whole else scope)
            self._create(planned.create)
            for obj in planned.replace:
                self._write("update", obj, lambda o: self.kube.replace(_path_of(o), o))
            for namespace, name, uid in planned.delete:
                self._delete(namespace, name, uid)
            for hrq, status in planned.statuses:
                self._write_status(hrq, status)
            self._whole = self._failed
        except Exception:
            # A bug here must not hold up propagation, which runs in the same pass.
            log.exception("hierarchical quotas not kept")

    def _plan(self, forest: Forest, scope: Collection[str] | None) -> quota.QuotaPlan:
        """The writes for every HRQ (``scope`` None) or for those ``scope`` concerns."""
        index = self._hrqs.current(self.cache)
        problems = _problems(self._hrqs.parsed.values())
        self._report(problems)
        objects = _Objects(self._hrqs.parsed)
        if scope is None:
            held = quota.held_quotas(self.kept())
            planned = quota.plan_hrqs(forest, index, objects, problems, held, objects, held)
            self._coverage.record(planned.subtrees, whole=True)
            return planned
        keys = self._coverage.concerned(forest, index, problems, scope)
        former = self._coverage.former(keys)
        held_view = _Held(self.cache)
        planned = quota.plan_hrqs(forest, index, objects, problems, held_view, keys, former)
        self._coverage.record(planned.subtrees)
        return planned

    def keep_new(self, forest: Forest, namespaces: Collection[str]) -> None:
        """Create the ResourceQuotas of ``namespaces``, made in this pass (``forest`` is the
        picture after it): the copies held back there wait for them, so they go out at once
        rather than in the next pass."""
        if not namespaces:
            return
        try:
            with self._lock:
                index = self._hrqs.current(self.cache)
                missing = quota.missing_quotas(forest, index, _Held(self.cache), namespaces)
            self._create(missing)
        except Exception:
            log.exception("hierarchical quotas of new namespaces not made")

    def _create(self, objects: Iterable[Obj]) -> None:
        for obj in objects:
            self._write("create", obj, lambda o: self.kube.create(_quota_path(_ns(o)), o))

    def _report(self, problems: Mapping[quota.QuotaKey, str]) -> None:
        """Say once when an HRQ cannot be enforced, and when it can again."""
        for key, problem in problems.items():
            if self._problems.get(key) != problem:
                log.warning("hierarchical quota not enforced", extra={"problem": problem})
        self._problems = dict(problems)

    def _write(self, verb: str, obj: Obj, send: Any) -> None:
        try:
            send(obj)
        except ApiError as error:
            if error.already_exists or error.conflict or error.namespace_terminating:
                return
            if error.not_found and verb == "create":
                return
            self._fail(verb, obj, error)
            return
        except KubeError as error:
            self._fail(verb, obj, error)
            return
        log.info(f"quota {verb}d", extra=_about(obj))

    def _fail(self, verb: str, obj: Obj, error: KubeError) -> None:
        """Log a write that failed; the next pass plans every HRQ, so it is tried again."""
        self._failed = True
        log.warning(
            f"cannot {verb} a hierarchical quota object", extra={**_about(obj), "error": str(error)}
        )

    def _delete(self, namespace: str, name: str, uid: str | None) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        obj = {"metadata": {"namespace": namespace, "name": name}}
        try:
            self.kube.delete(_quota_path(namespace, name), body)
        except ApiError as error:
            if not (error.not_found or error.conflict):
                self._fail("delete", obj, error)
            return
        except KubeError as error:
            self._fail("delete", obj, error)
            return
        log.info("quota deleted", extra=_about(obj))

    def _write_status(self, hrq: Obj, status: quota.HrqStatus) -> None:
        """Patch the status the keeper owns, keeping each condition's transition time while its
        status stays, and record an Event when the HRQ goes over its limit."""
        metadata = hrq.get("metadata") or {}
        current = (hrq.get("status") or {}).get("conditions") or []
        before = {c.get("type"): c for c in current}
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = [c for c in current if c.get("type") not in quota.OWNED_CONDITIONS]
        for condition in status.conditions:
            old = before.get(condition.type) or {}
            kept = old.get("lastTransitionTime") if old.get("status") == condition.status else None
            conditions.append(
                {
                    "type": condition.type,
                    "status": condition.status,
                    "lastTransitionTime": kept or now,
                    "reason": condition.reason,
                    "message": condition.message,
                }
            )
        body = {
            "status": {
                **_merge_patch(hrq.get("status") or {}, status.body()),
                "conditions": conditions,
            }
        }
        path = _hrq_path(metadata.get("namespace", ""), metadata.get("name", ""))
        try:
            self.kube.patch(f"{path}/status", body)
        except ApiError as error:
            if not error.not_found:
                self._fail("update status of", hrq, error)
            return
        except KubeError as error:
            self._fail("update status of", hrq, error)
            return
        exceeded = next((c for c in status.conditions if c.type == quota.CONDITION_EXCEEDED), None)
        went_over = (before.get(quota.CONDITION_EXCEEDED) or {}).get("status") != "True"
        if self.recorder is not None and exceeded and exceeded.status == "True" and went_over:
            ref = ObjectRef(
                quota.API_VERSION,
                quota.KIND,
                metadata.get("namespace", ""),
                metadata.get("name", ""),
                metadata.get("uid"),
            )
            self.recorder.record(ref, "Warning", "QuotaExceeded", exceeded.message)


def _merge_patch(current: Obj, wanted: Mapping[str, Any]) -> dict[str, Any]:
    """``wanted`` as a merge patch over ``current``: a merge patch keeps the keys of a map it
    does not name, so a resource gone from ``hard`` or ``used`` is named, with null."""
    patch = dict(wanted)
    for field, values in wanted.items():
        before = current.get(field)
        if isinstance(values, Mapping) and isinstance(before, Mapping):
            patch[field] = {**{key: None for key in before if key not in values}, **values}
    return patch


def _ns(obj: Obj) -> str:
    return str(obj["metadata"]["namespace"])


def _path_of(obj: Obj) -> str:
    return _quota_path(_ns(obj), obj["metadata"]["name"])


def _about(obj: Obj) -> dict[str, str]:
    metadata = obj.get("metadata") or {}
    return {"object": f"{metadata.get('namespace')}/{metadata.get('name')}"}


class _Held:
    """The ResourceQuotas the controller keeps for HRQs, looked up in the cache one by one:
    a scoped plan reads only those of the subtrees it plans."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache

    def get(self, key: quota.QuotaKey, /) -> Obj | None:
        found = self._cache.get(HRQ_QUOTAS, *key)
        return found if found is not None and quota.hrq_of_quota(found) is not None else None


class _Objects:
    """The cached HRQ objects by namespace and name, from the parsed HRQs."""

    def __init__(self, parsed: Mapping[quota.QuotaKey, Parsed]) -> None:
        self._parsed = parsed

    def get(self, key: quota.QuotaKey, /) -> Obj | None:
        found = self._parsed.get(key)
        return None if found is None else found.obj

    def __iter__(self) -> Iterator[quota.QuotaKey]:
        return iter(self._parsed)


def _problems(parsed: Iterable[Parsed]) -> dict[quota.QuotaKey, str]:
    """Why each HRQ whose spec cannot be used cannot (parsed again: there are few)."""
    found = {}
    for entry in parsed:
        if entry.hrq is None:
            try:
                quota.read_hrq(entry.obj)
            except quota.QuotaError as error:
                found[entry.key] = str(error)
    return found
