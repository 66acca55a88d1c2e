"""The plugin's view of the namespaces: complete for an administrator, partial for a tenant,
and the admission pre-checks on a partial view, which refuse only what is certain."""

from __future__ import annotations

from typing import Any

from kubectl_accurate.changes import CreateSubNamespace, LabelPatch, Refused
from kubectl_accurate.namespaces import Namespaces
from kubectl_accurate.writes import review
from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE, LABEL_TYPE

FORBIDDEN = 'namespaces "ops" is forbidden: User "alice" cannot get resource "namespaces"'


def ns(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def refusal(view: Namespaces, *writes: Any) -> str | None:
    try:
        review(writes, view.rules_forests)
    except Refused as refused:
        return str(refused)
    return None


def test_a_listed_view_is_complete_and_says_what_is_missing() -> None:
    view = Namespaces([ns("team", **{LABEL_TYPE: "root"})])
    assert view.complete
    assert view.missing("nope") == "namespace nope not found"
    assert len(view.rules_forests) == 1


def test_a_partial_view_names_the_servers_refusal() -> None:
    view = Namespaces([ns("team", **{LABEL_TYPE: "root"})], {"ops": FORBIDDEN})
    assert not view.complete
    assert view.missing("ops") == FORBIDDEN
    assert view.missing("nope") == "namespace nope not found"
    assert "ops" not in view.forest


def test_a_sub_namespace_below_an_unreadable_root_passes_the_pre_check() -> None:
    """The tenant's namespace hangs under a root they may not read: the chain cannot be
    judged here, so it is left to the webhook."""
    view = Namespaces([ns("team-web", **{LABEL_PARENT: "ops"})], {"ops": FORBIDDEN})
    assert refusal(view, CreateSubNamespace("team-web", "team-web-api")) is None
    listed = Namespaces([ns("team-web", **{LABEL_PARENT: "ops"})])
    assert "cannot find the root namespace of team-web" in str(
        refusal(listed, CreateSubNamespace("team-web", "team-web-api"))
    )


def test_an_unreadable_template_or_parent_is_left_to_the_server() -> None:
    team = ns("team", **{LABEL_TYPE: "root"})
    view = Namespaces([team], {"ops": FORBIDDEN})
    assert refusal(view, LabelPatch(team, {LABEL_TEMPLATE: "ops"})) is None
    web = ns("web", **{LABEL_PARENT: "team"})
    assert (
        refusal(Namespaces([team, web], {"ops": FORBIDDEN}), LabelPatch(web, {LABEL_PARENT: "ops"}))
        is None
    )


def test_what_holds_whatever_the_unreadable_namespaces_are_is_refused() -> None:
    team = ns("team", **{LABEL_TYPE: "root"})
    view = Namespaces([team], {"ops": FORBIDDEN})
    assert refusal(view, CreateSubNamespace("team", "Not_A_Name")) is not None
    plain = ns("plain")
    assert "neither a root nor a sub namespace" in str(
        refusal(Namespaces([plain], {"ops": FORBIDDEN}), CreateSubNamespace("plain", "x"))
    )
