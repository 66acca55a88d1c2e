"""The quota webhook's verdicts follow each HRQ's spec as the cache holds it, while parsing an
HRQ only when its spec changes: a status write (which the keeper makes after nearly every
counted write) must not cost a parse of every HRQ, and a spec change must apply at once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.keeper import Followed
from controller.cache import HRQ_QUOTAS, HRQS
from controller.quota_admission import ParsedHrqs, QuotaReviews
from libaccurate import quota
from libaccurate.constants import LABEL_PARENT, LABEL_TYPE
from libaccurate.forest import Forest

Key = tuple[str, str]


class Cached:
    """What the webhook process's cache holds: a forest, HRQs and their ResourceQuotas."""

    def __init__(self) -> None:
        self.forest = Forest.build(
            [
                {"metadata": {"name": "team", "labels": {LABEL_TYPE: "root"}}},
                {"metadata": {"name": "a", "labels": {LABEL_PARENT: "team"}}},
            ]
        )
        self.objects: dict[str, dict[Key, dict[str, Any]]] = {HRQS: {}, HRQ_QUOTAS: {}}
        self.followers: list[Followed] = []

    def put(self, resource: str, obj: dict[str, Any]) -> None:
        metadata = obj["metadata"]
        key = (metadata["namespace"], metadata["name"])
        self.objects[resource][key] = obj
        for followed in self.followers:
            followed.add(resource, key)

    def drop(self, resource: str, key: Key) -> None:
        del self.objects[resource][key]
        for followed in self.followers:
            followed.add(resource, key)

    def follow(self, kinds: list[str]) -> Followed:
        """The cache's changes as a Feed hands them over."""
        followed = Followed(kinds)
        self.followers.append(followed)
        return followed

    follow_beside = follow

    def items(self, resource: str) -> list[dict[str, Any]]:
        return list(self.objects[resource].values())

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects[resource].get((namespace, name))

    @contextmanager
    def reading(self) -> Iterator[Forest]:
        yield self.forest


def hrq(pods: str, generation: int, uid: str = "u1", used: str = "0") -> dict[str, Any]:
    metadata = {"namespace": "team", "name": "cap", "uid": uid, "generation": generation}
    return {
        "apiVersion": quota.API_VERSION,
        "kind": quota.KIND,
        "metadata": metadata,
        "spec": {"hard": {"pods": pods}},
        "status": {"used": {"pods": used}},
    }


def counted(pods: str, version: int) -> dict[str, Any]:
    obj = quota.desired_quota(quota.Hrq("team", "cap", {}), "a")
    obj["metadata"]["resourceVersion"] = str(version)
    obj["status"] = {"used": {"pods": pods}}
    return obj


def review(reviews: QuotaReviews, old: dict[str, Any], new: dict[str, Any]) -> bool:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "r",
            "operation": "UPDATE",
            "kind": {"group": "", "version": "v1", "kind": "ResourceQuota"},
            "object": new,
            "oldObject": old,
            "userInfo": {"username": "system:apiserver"},
        },
    }
    return reviews.validate_status(body)[1]


def limited(pods: str, counting: str) -> tuple[Cached, QuotaReviews]:
    """A cache holding the HRQ ``team/cap`` of ``pods`` pods, with namespace ``a`` counting
    ``counting`` of them (its ResourceQuota at resourceVersion 10), and the webhook over it."""
    cache = Cached()
    cache.put(HRQS, hrq(pods, generation=1))
    cache.put(HRQ_QUOTAS, counted(counting, 10))
    return cache, QuotaReviews(cache, kube=None)  # type: ignore[arg-type]


def test_a_status_write_keeps_the_limit_and_a_spec_change_applies_at_once() -> None:
    cache, reviews = limited("2", "0")
    assert review(reviews, counted("0", 10), counted("1", 10))
    cache.put(HRQ_QUOTAS, counted("1", 11))
    cache.put(HRQS, hrq("2", generation=1, used="1"))
    assert not review(reviews, counted("1", 11), counted("3", 11))
    assert review(reviews, counted("1", 11), counted("2", 11))
    cache.put(HRQ_QUOTAS, counted("2", 12))
    cache.put(HRQS, hrq("3", generation=2, used="2"))
    assert review(reviews, counted("2", 12), counted("3", 12))


def test_an_hrq_made_again_under_the_same_name_is_read_again() -> None:
    cache, reviews = limited("5", "0")
    assert review(reviews, counted("0", 10), counted("1", 10))
    cache.put(HRQ_QUOTAS, counted("1", 11))
    cache.put(HRQS, hrq("1", generation=1, uid="u2"))
    assert not review(reviews, counted("1", 11), counted("2", 11))


def test_a_deleted_hrq_limits_nothing_any_more() -> None:
    cache, reviews = limited("1", "1")
    assert not review(reviews, counted("1", 10), counted("2", 10))
    cache.drop(HRQS, ("team", "cap"))
    assert review(reviews, counted("1", 10), counted("2", 10))


def test_the_parsed_hrqs_follow_each_write_and_index_again_only_on_a_spec_change() -> None:
    """The keeper reads the HRQ objects it compares its statuses with from here: each status
    write is taken in (the object as written), without parsing or indexing anything again."""
    cache = Cached()
    cache.put(HRQS, hrq("5", generation=1))
    parsed = ParsedHrqs()
    index = parsed.current(cache)  # type: ignore[arg-type]
    written = hrq("5", generation=1, used="3")
    cache.put(HRQS, written)
    assert parsed.current(cache) is index  # type: ignore[arg-type]
    assert parsed.parsed[("team", "cap")].obj is written
    cache.put(HRQS, hrq("7", generation=2))
    raised = parsed.current(cache)  # type: ignore[arg-type]
    assert raised is not index
    assert [h.hard["pods"].value for h in raised.in_namespace("team")] == [7]
    cache.drop(HRQS, ("team", "cap"))
    assert list(parsed.current(cache)) == []  # type: ignore[arg-type]
    assert parsed.parsed == {}
