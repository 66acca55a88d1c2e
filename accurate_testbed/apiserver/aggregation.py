"""The ClusterRole aggregation controller: a ClusterRole with an ``aggregationRule`` holds the
rules of every other ClusterRole its selectors match.

As in kube-controller-manager it runs in the background, gathers the rules of the matching roles
in name order without duplicates, and writes them with server-side apply as field manager
``clusterrole-aggregation-controller`` under that controller's ServiceAccount (so the write
passes admission and escalation checks like the real one). A chain such as view -> edit -> admin
settles over successive passes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from accurate_testbed.apiserver.api import APPLY_PATCH, Api, Caller
from accurate_testbed.apiserver.bootstrap_policy import AGGREGATION_CONTROLLER
from accurate_testbed.apiserver.rbac import AUTHENTICATED
from accurate_testbed.apiserver.resources import RBAC
from accurate_testbed.apiserver.store import Change
from accurate_testbed.apiserver.webhooks import selector_matches

Obj = dict[str, Any]

FIELD_MANAGER = "clusterrole-aggregation-controller"
_CALLER = Caller(
    user_info={
        "username": AGGREGATION_CONTROLLER,
        "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", AUTHENTICATED],
    },
    field_manager=FIELD_MANAGER,
    force=True,
)
_MAX_PASSES = 10


class ClusterRoleAggregation:
    """A background step; see BackgroundLoop."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def __call__(self, changes: Sequence[Change] | None) -> None:
        if changes is None or any(_is_cluster_role(change) for change in changes):
            self.sync()

    def sync(self) -> bool:
        """One pass over the aggregated roles; whether it rewrote any."""
        roles, _ = self.api.store.select(RBAC, "clusterroles")
        changed = False
        for role in roles:
            selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors")
            if selectors is None:
                continue
            rules = gathered_rules(role["metadata"]["name"], selectors, roles)
            if rules != (role.get("rules") or []):
                changed = self._write(role, rules) or changed
        return changed

    def _write(self, role: Obj, rules: list[Obj]) -> bool:
        name = role["metadata"]["name"]
        resource = self.api.registry.find(RBAC, "v1", "clusterroles")
        current = self.api.store.get(RBAC, "clusterroles", "", name)
        if (
            resource is None
            or current is None
            or current["metadata"]["uid"] != role["metadata"]["uid"]
        ):
            return False  # deleted (or replaced) meanwhile: applying could create it again
        body = {
            "apiVersion": resource.api_version,
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        }
        self.api.patch(resource, "", name, json.dumps(body).encode(), APPLY_PATCH, _CALLER)
        return True


def settled(roles: list[Obj]) -> list[Obj]:
    """The roles with every aggregated one filled, as the controller would leave them: how a
    fresh cluster's bootstrap roles are created."""
    for _ in range(_MAX_PASSES):
        changed = False
        for role in roles:
            selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors")
            if selectors is not None:
                rules = gathered_rules(role["metadata"]["name"], selectors, roles)
                changed = changed or rules != role.get("rules")
                role["rules"] = rules
        if not changed:
            break
    return roles


def gathered_rules(
    name: str, selectors: Sequence[Mapping[str, Any]], roles: Sequence[Obj]
) -> list[Obj]:
    """The rules of the roles each selector matches (by name, itself excluded), first copies
    kept."""
    rules: list[Obj] = []
    for selector in selectors:
        matched = [
            role
            for role in roles
            if role["metadata"]["name"] != name
            and selector_matches(selector, role["metadata"].get("labels") or {})
        ]
        for role in sorted(matched, key=lambda role: str(role["metadata"]["name"])):
            for rule in role.get("rules") or []:
                if rule not in rules:
                    rules.append(rule)
    return rules


def _is_cluster_role(change: Change) -> bool:
    return (change.group, change.plural) == (RBAC, "clusterroles")
