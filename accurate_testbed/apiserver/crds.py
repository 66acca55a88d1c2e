"""A CRD's status as apiextensions-apiserver's controllers keep it: accepted names, the
Established condition, and the Terminating condition a deletion sets and the finalizer
controller moves along.

Clients read these conditions (``kubectl wait --for=condition=Established``, a CRD stuck
deleting), so their reasons and messages are the real ones. Pure functions over the CRD dict;
the caller passes the time, so they are usable both from a request and from a controller.
"""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
TERMINATING = "Terminating"

# (status, reason, message) of the Terminating condition at each step of a deletion: the
# DELETE itself (registry/customresourcedefinition/etcd.go), then the finalizer controller
# (controller/finalizer/crd_finalizer.go) before and after it removed the instances.
DELETION_PENDING = (
    "True",
    "InstanceDeletionPending",
    "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
)
DELETION_IN_PROGRESS = (
    "True",
    "InstanceDeletionInProgress",
    "CustomResource deletion is in progress",
)
DELETION_COMPLETED = ("False", "InstanceDeletionCompleted", "removed all instances")


def set_condition(crd: Obj, kind: str, state: tuple[str, str, str], moment: str) -> None:
    """Set condition ``kind`` to ``state`` (status, reason, message) as SetCRDCondition does:
    lastTransitionTime moves only when the status changes."""
    status, reason, message = state
    conditions = crd.setdefault("status", {}).setdefault("conditions", [])
    for condition in conditions:
        if condition["type"] == kind:
            if condition.get("status") != status:
                condition["lastTransitionTime"] = moment
            condition.update(status=status, reason=reason, message=message)
            return
    conditions.append(
        {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": moment,
        }
    )


def is_terminating(crd: Obj) -> bool:
    """Whether the CRD's Terminating condition is True: its instances are still served, but
    no new ones may be created."""
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == TERMINATING and c.get("status") == "True" for c in conditions)


def marked_for_deletion(crd: Obj, moment: str) -> Obj:
    """What the first DELETE of a CRD stores: a deletionTimestamp, the cleanup finalizer and a
    pending Terminating condition; unlike other kinds, no deletionGracePeriodSeconds and no new
    generation (apiextensions' own Delete bypasses the generic registry's markAsDeleting)."""
    marked = copy.deepcopy(crd)
    meta = marked["metadata"]
    meta["deletionTimestamp"] = moment
    finalizers = meta.setdefault("finalizers", [])
    if CLEANUP_FINALIZER not in finalizers:
        finalizers.append(CLEANUP_FINALIZER)
    set_condition(marked, TERMINATING, DELETION_PENDING, moment)
    return marked


def establish(crd: Obj, moment: str) -> None:
    """What the real CRD controllers report once names are accepted: established at once."""
    spec = crd.get("spec") or {}
    status = crd.setdefault("status", {})
    status["acceptedNames"] = copy.deepcopy(spec.get("names") or {})
    stored = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    status["storedVersions"] = sorted(set(status.get("storedVersions") or []) | set(stored))
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    for kind, reason, message in (
        ("NamesAccepted", "NoConflicts", "no conflicts found"),
        ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
    ):
        conditions.setdefault(
            kind,
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": moment,
            },
        )
    status["conditions"] = list(conditions.values())
