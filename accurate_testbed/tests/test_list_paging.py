"""Contract: LISTs in chunks (``limit`` and ``continue``) as kube-apiserver serves them.

Rules and messages come from k8s.io/apiserver (storage/continue.go, storage/etcd3/store.go and
errors.go, storage/cacher: ``limit`` is ignored for ``resourceVersion=0``), the API concepts page
("Retrieving large results sets in chunks", "The ResourceVersion parameter") and the Kubernetes
integration tests TestListOptions and TestAPIListChunkingWithLabelSelector. Objects are Secrets in
a namespace of the test's own: a real cluster puts a ConfigMap in every namespace, not a Secret.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from kubernetes import client as k8s_client

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from accurate_testbed.kubectl import kubectl
from accurate_testbed.tests.helpers import error_of, request
from accurate_testbed.waiting import wait_for

TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"
_CHUNK_CONTINUED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this response "
    "to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


def secrets_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/secrets"


def make_secrets(cluster: Cluster, namespace: str, names: list[str], **labels: str) -> None:
    for name in names:
        body = {"metadata": {"name": name, "labels": labels}, "stringData": {"k": name}}
        request(cluster.api_client, "POST", secrets_path(namespace), body)


def list_page(cluster: Cluster, path: str, accept: str = "application/json", **query: str) -> Any:
    return request(cluster.api_client, "GET", path, query=list(query.items()), accept=accept)


def names(listed: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in listed["items"]]


def list_error(cluster: Cluster, path: str, **query: str) -> dict[str, Any]:
    with pytest.raises(k8s_client.ApiException) as caught:
        list_page(cluster, path, **query)
    return error_of(caught.value)


def token(**fields: Any) -> str:
    """A continue token as the server encodes one (base64url JSON without padding)."""
    data = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def everything(cluster: Cluster, path: str, limit: int, **query: str) -> tuple[list[str], int]:
    """Follow the continue tokens to the end: every name, and how many pages it took."""
    found: list[str] = []
    pages, following = 0, ""
    while True:
        extra = {"continue": following} if following else {}
        listed = list_page(cluster, path, limit=str(limit), **query, **extra)
        found += names(listed)
        pages += 1
        following = listed["metadata"].get("continue", "")
        if not following:
            return found, pages


@needs_kubectl
@pytest.mark.parametrize("output", [[], ["-o", "name"]], ids=["table", "name"])
def test_kubectl_get_in_small_chunks_lists_everything(
    cluster: Cluster, kubeconfig: Path, output: list[str]
) -> None:
    ns = cluster.namespace("paging")
    wanted = [f"s-{i}" for i in range(5)]
    make_secrets(cluster, ns, wanted)
    shown = kubectl(kubeconfig, "get", "secrets", "-n", ns, "--chunk-size=2", *output)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    if output:
        assert lines == [f"secret/{name}" for name in wanted]
    else:
        assert [line.split()[0] for line in lines] == ["NAME", *wanted]


@needs_kubectl
def test_kubectl_get_namespaces_sends_one_list_per_chunk(
    cluster: Cluster, kubeconfig: Path, apiserver: ApiServer
) -> None:
    created = [cluster.namespace("chunk") for _ in range(3)]
    total = len(request(cluster.api_client, "GET", "/api/v1/namespaces")["items"])
    apiserver.clear_requests()
    shown = kubectl(kubeconfig, "get", "ns", "--chunk-size=2", "-o", "name")
    assert shown.returncode == 0, shown.stderr
    assert {f"namespace/{name}" for name in created} <= set(shown.stdout.splitlines())
    assert len(shown.stdout.splitlines()) == total
    lists = [r for r in apiserver.requests if r.verb == "list" and r.path == "/api/v1/namespaces"]
    assert len(lists) == (total + 1) // 2
    queries = [parse_qs(r.query) for r in lists]
    assert all(query["limit"] == ["2"] for query in queries)
    assert "continue" not in queries[0] and all("continue" in query for query in queries[1:])


def test_first_page_carries_continue_and_remaining_count(cluster: Cluster) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a", "b", "c", "d", "e"])
    first = list_page(cluster, secrets_path(ns), limit="2")
    assert names(first) == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 3
    second = list_page(
        cluster, secrets_path(ns), limit="2", **{"continue": first["metadata"]["continue"]}
    )
    assert names(second) == ["c", "d"]
    assert second["metadata"]["remainingItemCount"] == 1
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    last = list_page(
        cluster, secrets_path(ns), limit="2", **{"continue": second["metadata"]["continue"]}
    )
    assert names(last) == ["e"]
    assert "continue" not in last["metadata"] and "remainingItemCount" not in last["metadata"]


def test_a_page_that_holds_the_rest_is_the_last(cluster: Cluster) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a", "b"])
    listed = list_page(cluster, secrets_path(ns), limit="2")
    assert names(listed) == ["a", "b"]
    assert "continue" not in listed["metadata"]


def test_every_page_shows_the_collection_as_at_the_first(cluster: Cluster) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a", "c", "e"])
    first = list_page(cluster, secrets_path(ns), limit="1")
    request(cluster.api_client, "DELETE", f"{secrets_path(ns)}/c")
    make_secrets(cluster, ns, ["b", "d"])
    patch = {"metadata": {"labels": {"late": "yes"}}}
    request(
        cluster.api_client, "PATCH", f"{secrets_path(ns)}/e", patch, "application/merge-patch+json"
    )
    second = list_page(
        cluster, secrets_path(ns), limit="1", **{"continue": first["metadata"]["continue"]}
    )
    assert names(second) == ["c"]
    assert second["metadata"]["remainingItemCount"] == 1  # e; b and d came later
    rest = list_page(cluster, secrets_path(ns), **{"continue": second["metadata"]["continue"]})
    assert names(rest) == ["e"]
    assert "late" not in (rest["items"][0]["metadata"].get("labels") or {})
    versions = {page["metadata"]["resourceVersion"] for page in (first, second, rest)}
    assert len(versions) == 1
    assert names(list_page(cluster, secrets_path(ns))) == ["a", "b", "d", "e"]


def test_continue_with_resource_version_zero_is_a_plain_continue(cluster: Cluster) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a", "b"])
    first = list_page(cluster, secrets_path(ns), limit="1")
    rest = list_page(
        cluster,
        secrets_path(ns),
        resourceVersion="0",
        **{"continue": first["metadata"]["continue"]},
    )
    assert names(rest) == ["b"]


def test_selectors_apply_before_the_limit(cluster: Cluster) -> None:
    ns = cluster.namespace("paging")
    for i in range(6):
        make_secrets(cluster, ns, [f"s-{i}"], odd=str(i % 2 == 1).lower())
    first = list_page(cluster, secrets_path(ns), limit="2", labelSelector="odd=true")
    assert names(first) == ["s-1", "s-3"]
    assert "remainingItemCount" not in first["metadata"]
    found, pages = everything(cluster, secrets_path(ns), 2, labelSelector="odd=true")
    assert (found, pages) == (["s-1", "s-3", "s-5"], 2)


def test_a_full_page_promises_more_even_if_nothing_else_matches(cluster: Cluster) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a", "b"], keep="yes")
    make_secrets(cluster, ns, ["c"], keep="no")
    first = list_page(cluster, secrets_path(ns), limit="2", labelSelector="keep=yes")
    assert names(first) == ["a", "b"] and first["metadata"]["continue"]
    rest = list_page(
        cluster,
        secrets_path(ns),
        limit="2",
        labelSelector="keep=yes",
        **{"continue": first["metadata"]["continue"]},
    )
    assert rest["items"] == [] and "continue" not in rest["metadata"]


def test_pages_across_namespaces_follow_namespace_then_name(cluster: Cluster) -> None:
    label = cluster.unique("mark")
    first_ns, second_ns = cluster.namespace("pa"), cluster.namespace("pb")
    make_secrets(cluster, second_ns, ["x", "a"], mark=label)
    make_secrets(cluster, first_ns, ["y", "b"], mark=label)
    found, _ = everything(cluster, "/api/v1/secrets", 1, labelSelector=f"mark={label}")
    expected = sorted([(first_ns, "b"), (first_ns, "y"), (second_ns, "a"), (second_ns, "x")])
    assert found == [name for _, name in expected]


def test_tables_page_too(cluster: Cluster) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a", "b", "c"])
    first = list_page(cluster, secrets_path(ns), accept=TABLE, limit="2")
    assert first["kind"] == "Table"
    assert [row["cells"][0] for row in first["rows"]] == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 1
    rest = list_page(
        cluster,
        secrets_path(ns),
        accept=TABLE,
        limit="2",
        **{"continue": first["metadata"]["continue"]},
    )
    assert [row["cells"][0] for row in rest["rows"]] == ["c"]
    assert "continue" not in rest["metadata"]


def test_limit_is_ignored_for_resource_version_zero(cluster: Cluster) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a", "b", "c"])

    def whole_list() -> dict[str, Any] | None:
        listed = list_page(cluster, secrets_path(ns), limit="1", resourceVersion="0")
        return listed if len(listed["items"]) == 3 else None  # rv=0 may be served a bit stale

    listed = wait_for(whole_list, what="all three secrets from a list at any version")
    assert "continue" not in listed["metadata"]


@pytest.mark.parametrize("query", [{"limit": "5"}, {"resourceVersionMatch": "Exact"}])
def test_an_explicit_version_reads_exactly_that_version(
    cluster: Cluster, query: dict[str, str]
) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a"])
    then = list_page(cluster, secrets_path(ns))["metadata"]["resourceVersion"]
    make_secrets(cluster, ns, ["b"])
    listed = list_page(cluster, secrets_path(ns), resourceVersion=then, **query)
    assert names(listed) == ["a"]
    assert listed["metadata"]["resourceVersion"] == then


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("not*base64", "illegal base64 data at input byte 3"),
        (
            base64.urlsafe_b64encode(b"hello").decode().rstrip("="),
            "invalid character 'h' looking for beginning of value",
        ),
        (
            token(v="meta.k8s.io/v2", rv=5, start="a"),
            "server does not recognize this encoded version meta.k8s.io/v2",
        ),
        (
            token(v="meta.k8s.io/v1", rv=0, start="a"),
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ),
        (
            token(v="meta.k8s.io/v1", rv=5, start=""),
            "encoded start key empty (version meta.k8s.io/v1)",
        ),
        (token(v="meta.k8s.io/v1", rv=5, start="../other/x"), "../other/x"),
        (
            token(v="meta.k8s.io/v1", rv="5", start="a"),
            "json: cannot unmarshal string into Go struct field continueToken.rv of type int64",
        ),
    ],
    ids=["base64", "json", "version", "rv", "start", "traversal", "type"],
)
def test_a_token_the_server_cannot_read_is_a_bad_request(
    cluster: Cluster, given: str, message: str
) -> None:
    ns = cluster.namespace("paging")
    status = list_error(cluster, secrets_path(ns), limit="1", **{"continue": given})
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert status["message"] == f"invalid continue token: continue key is not valid: {message}"


def test_continue_with_a_resource_version_is_a_bad_request(cluster: Cluster) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a", "b"])
    first = list_page(cluster, secrets_path(ns), limit="1")
    status = list_error(
        cluster,
        secrets_path(ns),
        resourceVersion=first["metadata"]["resourceVersion"],
        **{"continue": first["metadata"]["continue"]},
    )
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert status["message"] == "specifying resource version is not allowed when using continue"


_MATCH = "resourceVersionMatch: Forbidden: resourceVersionMatch"
_UNLESS = f"{_MATCH} is forbidden unless resourceVersion is provided"


@pytest.mark.parametrize(
    ("query", "problems"),
    [
        ({"resourceVersionMatch": "Exact"}, _UNLESS),
        (
            {"resourceVersionMatch": "NotOlderThan", "continue": "x"},
            f"[{_UNLESS}, {_MATCH} is forbidden when continue is provided]",
        ),
        (
            {"resourceVersionMatch": "Newest", "resourceVersion": "1"},
            'resourceVersionMatch: Unsupported value: "Newest": '
            'supported values: "Exact", "NotOlderThan", ""',
        ),
        (
            {"resourceVersionMatch": "Exact", "resourceVersion": "0"},
            f'{_MATCH} "exact" is forbidden for resourceVersion "0"',
        ),
    ],
    ids=["no-version", "continue", "unsupported", "exact-zero"],
)
def test_list_options_are_validated_first(
    cluster: Cluster, query: dict[str, str], problems: str
) -> None:
    ns = cluster.namespace("paging")
    status = list_error(cluster, secrets_path(ns), limit="1", **query)
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["message"] == f'ListOptions.meta.k8s.io "" is invalid: {problems}'


def test_a_limit_that_is_not_a_number_is_a_bad_request(cluster: Cluster) -> None:
    status = list_error(cluster, secrets_path(cluster.namespace("paging")), limit="ten")
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert status["message"] == 'strconv.ParseInt: parsing "ten": invalid syntax'


@pytest.mark.parametrize(
    ("query", "code", "prefix"),
    [({}, 500, ""), ({"limit": "1"}, 400, "invalid resource version: ")],
    ids=["watch-cache", "etcd"],
)
def test_a_resource_version_that_is_not_a_number_is_refused(
    cluster: Cluster, query: dict[str, str], code: int, prefix: str
) -> None:
    path = secrets_path(cluster.namespace("paging"))
    status = list_error(cluster, path, resourceVersion="abc", **query)
    assert status["code"] == code
    assert status["message"] == (
        f'{prefix}resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": '
        "invalid syntax"
    )


def test_a_version_the_server_has_not_reached_is_an_error(
    cluster: Cluster, apiserver: ApiServer
) -> None:
    ahead = str(apiserver.store.resource_version + 1000)
    status = list_error(
        cluster, secrets_path(cluster.namespace("paging")), resourceVersion=ahead, limit="1"
    )
    assert status["code"] == 500
    assert status["message"] == "etcdserver: mvcc: required revision is a future revision"


@pytest.mark.fault_injection
def test_a_token_older_than_the_history_is_gone_with_a_token_to_go_on(
    cluster: Cluster, apiserver: ApiServer
) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a", "b", "c"])
    first = list_page(cluster, secrets_path(ns), limit="1")
    apiserver.set_watch_history(2)
    try:
        make_secrets(cluster, ns, ["d", "e", "f"])
        status = list_error(
            cluster, secrets_path(ns), **{"continue": first["metadata"]["continue"]}
        )
    finally:
        apiserver.set_watch_history(10000)
    assert (status["code"], status["reason"], status["message"]) == (
        410,
        "Expired",
        _CHUNK_CONTINUED,
    )
    rest = list_page(cluster, secrets_path(ns), **{"continue": status["metadata"]["continue"]})
    assert names(rest) == ["b", "c", "d", "e", "f"]
    assert rest["metadata"]["resourceVersion"] == str(apiserver.store.resource_version)


@pytest.mark.fault_injection
@pytest.mark.parametrize("query", [{"limit": "1"}, {"resourceVersionMatch": "Exact"}])
def test_an_exact_version_older_than_the_history_is_gone(
    cluster: Cluster, apiserver: ApiServer, query: dict[str, str]
) -> None:
    ns = cluster.namespace("paging")
    make_secrets(cluster, ns, ["a"])
    then = list_page(cluster, secrets_path(ns))["metadata"]["resourceVersion"]
    apiserver.set_watch_history(1)
    try:
        make_secrets(cluster, ns, ["b", "c"])
        status = list_error(cluster, secrets_path(ns), resourceVersion=then, **query)
    finally:
        apiserver.set_watch_history(10000)
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"] == "The resourceVersion for the provided list is too old."
