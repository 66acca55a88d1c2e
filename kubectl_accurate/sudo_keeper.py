"""Whether the controller's sudo keeper works, as far as the person granting sudo can see.

A sudo grant gives nobody anything until the controller keeps the sudoer's cluster-wide RBAC,
which it can only where a cluster administrator turned sudo on (docs/tenant-access.md). The
controller says so in its log, which the person granting rarely reads, so ``access grant ROOT
sudo`` looks for signs, with the caller's own rights, and warns when it finds one:

- the controller's ServiceAccount (named by its Deployment) lacks the keeper's rights, as
  SubjectAccessReviews answer: sudo is off;
- someone the root's sudo grant named before may still not impersonate the root's sudo group:
  sudo is off, or the controller has not caught up.

Both need reads that cluster administrators have (the controller's Deployment,
SubjectAccessReviews). Where the caller has neither, nothing is said, since nothing is known:
a tenant who may grant sudo at all is usually a sudoer whose own sudo the keeper made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubectl_accurate.reviews import judged
from kubectl_accurate.watched import DEPLOYMENT
from libaccurate.access import (
    KEEPER_RIGHTS,
    TURN_SUDO_ON,
    Subject,
    subject_access_review,
    sudo_group,
    sudo_review,
)
from libaccurate.network.kube import ApiError, Kube, resource_path

# Asking about more of the people already granted would only repeat the same answer.
_EARLIER_ASKED = 5


def sudo_off_warning(
    kube: Kube, root: str, earlier: Sequence[Subject], accurate_namespace: str
) -> str | None:
    """A warning that the sudo grant in ``root`` will give nothing, when that can be seen;
    ``earlier`` are the people the grant named before this change."""
    try:
        account = _controller_account(kube, accurate_namespace)
        if account is not None:
            lacking = _lacking(kube, *account)
            if not lacking:
                return None
            return (
                f"warning: sudo looks off in this cluster: the controller's ServiceAccount "
                f"{account[0]}/{account[1]} may not {'; '.join(lacking)}. Until a cluster "
                f"administrator turns sudo on ({TURN_SUDO_ON}), this grant gives nobody anything."
            )
        waiting = _waiting(kube, root, earlier)
    except ApiError as error:
        if error.code != 403:
            raise
        return None
    if not waiting:
        return None
    return (
        f"warning: sudo looks off in this cluster, or the controller has not caught up: "
        f"{', '.join(waiting)}, named in {root}'s sudo grant before, may still not impersonate "
        f"group {sudo_group(root)}. This grant gives nobody anything until the controller's "
        f"sudo keeper has made their cluster-wide rights; if that does not happen, a cluster "
        f"administrator must turn sudo on ({TURN_SUDO_ON})."
    )


def _controller_account(kube: Kube, namespace: str) -> tuple[str, str] | None:
    """The namespace and ServiceAccount of the controller's Deployment, when it is there."""
    found = kube.find(resource_path("apps", "v1", "deployments", namespace, DEPLOYMENT))
    if found is None:
        return None
    pod: dict[str, Any] = ((found.get("spec") or {}).get("template") or {}).get("spec") or {}
    return namespace, str(pod.get("serviceAccountName") or "default")


def _lacking(kube: Kube, namespace: str, account: str) -> list[str]:
    """The keeper's rights the ServiceAccount lacks, as ``verb resource.group`` phrases."""
    user = f"system:serviceaccount:{namespace}:{account}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]

    def may(verb: str, group: str, resource: str) -> bool:
        attributes = {"verb": verb, "group": group, "resource": resource}
        return bool(judged(kube, subject_access_review(user, groups, attributes)).get("allowed"))

    lacking = []
    for group, resource, verbs in KEEPER_RIGHTS:
        missing = [verb for verb in verbs if not may(verb, group, resource)]
        if missing:
            lacking.append(f"{', '.join(missing)} {resource}.{group}")
    return lacking


def _waiting(kube: Kube, root: str, earlier: Sequence[Subject]) -> list[str]:
    """Users the grant named before who still may not impersonate the root's sudo group."""
    users = [s.name for s in earlier if s.kind == "User"][:_EARLIER_ASKED]
    return [u for u in users if not judged(kube, sudo_review(u, [], root)).get("allowed")]
