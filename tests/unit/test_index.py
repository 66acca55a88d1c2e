"""The planner's indexes as the controller keeps them: a copy taken for a pass stays as it
was taken while watch events keep changing the indexes."""

from __future__ import annotations

from libaccurate.config import GroupVersionKind
from libaccurate.index import NAMESPACES, SUBNAMESPACES, Indexes

SECRET = GroupVersionKind("", "v1", "Secret")


def _obj(namespace: str, name: str, value: str = "1") -> dict:
    return {"metadata": {"namespace": namespace, "name": name}, "data": {"v": value}}


def test_a_copy_taken_for_a_pass_is_left_alone_by_later_events():
    kept = Indexes()
    kept.reset(NAMESPACES, [_obj("", "a"), _obj("", "b")])
    kept.reset(SUBNAMESPACES, [_obj("a", "b")])
    kept.reset(SECRET, [_obj("a", "x"), _obj("a", "y"), _obj("b", "x")])
    taken = kept.index()
    kept.put(SECRET, _obj("a", "x", "2"))
    kept.forget(SECRET, "a", "y")
    kept.forget(SECRET, "b", "x")
    kept.put(SUBNAMESPACES, _obj("b", "c"))
    kept.forget(NAMESPACES, "", "b")
    assert taken.objects[SECRET] == {
        "a": {"x": _obj("a", "x"), "y": _obj("a", "y")},
        "b": {"x": _obj("b", "x")},
    }
    assert taken.naming == {"b": {"a": _obj("a", "b")}}
    assert set(taken.namespaces) == {"a", "b"}
    now = kept.index()
    assert now.objects[SECRET] == {"a": {"x": _obj("a", "x", "2")}}
    assert now.naming == {"b": {"a": _obj("a", "b")}, "c": {"b": _obj("b", "c")}}
    assert set(now.namespaces) == {"a"}


def test_every_copy_taken_stays_as_taken_however_changes_and_passes_alternate():
    kept = Indexes()
    kept.reset(NAMESPACES, [_obj("", "a")])
    kept.reset(SUBNAMESPACES, [])
    kept.reset(SECRET, [_obj("a", "x")])
    first = kept.index()
    kept.put(SECRET, _obj("a", "x", "2"))
    kept.put(NAMESPACES, _obj("", "b"))
    second = kept.index()
    kept.put(SECRET, _obj("a", "x", "3"))
    kept.put(SUBNAMESPACES, _obj("a", "b"))
    kept.reset(NAMESPACES, [_obj("", "c")])
    kept.put(NAMESPACES, _obj("", "d"))
    third = kept.index()
    assert [i.objects[SECRET]["a"]["x"]["data"]["v"] for i in (first, second, third)] == [
        "1",
        "2",
        "3",
    ]
    assert [set(i.namespaces) for i in (first, second, third)] == [{"a"}, {"a", "b"}, {"c", "d"}]
    assert [dict(i.naming) for i in (first, second, third)] == [
        {},
        {},
        {"b": {"a": _obj("a", "b")}},
    ]
