"""The webhook server over real HTTPS, driven with the requests kube-apiserver sends.

AdmissionReview and ConversionReview envelopes in and out, 400 for malformed requests while the
server keeps serving, certificate rotation without a restart, and live reads where the
controller's cache lags. The rules themselves are tested in tests/unit/test_admission.py and end
to end in tests/e2e/test_webhook_*.py.
"""

from __future__ import annotations

import base64
import email.utils
import http.client
import json
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pytest
import trustme
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.certificates import write_serving_pair
from accurate_testbed.cluster import Cluster
from controller.certs import CertificateError
from controller.reviews import MAX_BODY, MAX_DEPTH
from controller.webhook import (
    CONVERT_PATH,
    LEGACY_PATHS,
    MUTATE_SUBNAMESPACE_PATH,
    PATHS,
    VALIDATE_NAMESPACE_PATH,
    VALIDATE_QUOTA_STATUS_PATH,
    VALIDATE_SUBNAMESPACE_PATH,
    WebhookServer,
)
from libaccurate.constants import (
    ANNOTATION_V1_CONDITIONS,
    ANNOTATION_V1_OBSERVED_GENERATION,
    FINALIZER,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
    TYPE_ROOT,
    TYPE_TEMPLATE,
)
from libaccurate.forest import Forest
from tests.e2e.webhooks import LiveNamespaces, connect

NAMESPACE_KIND = {"group": "", "version": "v1", "kind": "Namespace"}
SUBNAMESPACE_KIND = {"group": "accurate.cybozu.com", "version": "v2", "kind": "SubNamespace"}
# What kube-apiserver sends to the v1 paths of an older install (their rules name v1).
V1_SUBNAMESPACE_KIND = {**SUBNAMESPACE_KIND, "version": "v1"}
QUOTA_KIND = {"group": "", "version": "v1", "kind": "ResourceQuota"}


class FixedForest:
    """A cache that has not caught up: it shows only the namespaces it was given."""

    def __init__(self, *namespaces: dict[str, Any]) -> None:
        self._forest = Forest.build(namespaces)

    def reading(self) -> AbstractContextManager[Forest]:
        return nullcontext(self._forest)


class Client:
    """Talks to the server the way kube-apiserver does: POST JSON over TLS to 127.0.0.1."""

    def __init__(self, server: WebhookServer, ca: trustme.CA) -> None:
        self.server = server
        self.ca = ca

    def connection(
        self, ca: trustme.CA | None = None, host: str = "127.0.0.1"
    ) -> http.client.HTTPSConnection:
        context = ssl.create_default_context(cadata=(ca or self.ca).cert_pem.bytes().decode())
        return http.client.HTTPSConnection(host, self.server.port, context=context, timeout=10)

    def post(self, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        connection = self.connection()
        try:
            connection.request(
                "POST", f"{path}?timeout=5s", raw, {"Content-Type": "application/json"}
            )
            reply = connection.getresponse()
            return reply.status, json.loads(reply.read())
        finally:
            connection.close()

    def review(self, path: str, review: dict[str, Any]) -> dict[str, Any]:
        code, body = self.post(path, review)
        assert code == 200, body
        assert body["apiVersion"] == "admission.k8s.io/v1"
        assert body["kind"] == "AdmissionReview"
        assert body["response"]["uid"] == review["request"]["uid"]
        return dict(body["response"])

    def convert(self, objects: list[dict[str, Any]], to: str) -> dict[str, Any]:
        request = {"uid": str(uuid.uuid4()), "desiredAPIVersion": to, "objects": objects}
        code, body = self.post(CONVERT_PATH, conversion_review(request))
        assert code == 200, body
        assert body["kind"] == "ConversionReview"
        assert body["response"]["uid"] == request["uid"]
        return dict(body["response"])


def admission_review(
    kind: dict[str, str],
    operation: str,
    obj: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": {**kind, "resource": kind["kind"].lower() + "s"},
        "operation": operation,
        "userInfo": {"username": "tester"},
        "object": obj,
        "oldObject": old,
    }
    if namespace:
        request["namespace"] = namespace
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def conversion_review(request: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request}


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def subnamespace(name: str, home: str | None = None, **spec: Any) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": home} if home else {})}
    return {
        "apiVersion": "accurate.cybozu.com/v2",
        "kind": "SubNamespace",
        "metadata": metadata,
        "spec": spec,
    }


@pytest.fixture
def tmp_certs(tmp_path: Path, webhook_ca: trustme.CA) -> Path:
    write_serving_pair(webhook_ca, tmp_path / "certs")
    return tmp_path / "certs"


@pytest.fixture
def observed() -> list[tuple[str, bool, float]]:
    return []


@pytest.fixture
def start(
    cluster: Cluster,
    tmp_certs: Path,
    webhook_ca: trustme.CA,
    observed: list[tuple[str, bool, float]],
) -> Iterator[Any]:
    """Start a server on a free port; the namespaces come live from the cluster by default."""
    servers: list[WebhookServer] = []

    def run(
        namespaces: Any = None, allow_cascading_deletion: bool = False, addr: str = "127.0.0.1:0"
    ) -> Client:
        kube = connect(cluster)
        server = WebhookServer(
            addr,
            tmp_certs,
            namespaces or LiveNamespaces(kube),
            kube,
            (),
            allow_cascading_deletion,
            lambda *call: observed.append(call),
        )
        server.start()
        servers.append(server)
        return Client(server, webhook_ca)

    yield run
    for server in servers:
        server.stop()


@pytest.fixture
def client(start: Any) -> Client:
    return start()


def test_allows_a_plain_namespace_and_echoes_the_uid(
    client: Client, observed: list[tuple[str, bool, float]]
) -> None:
    response = client.review(
        VALIDATE_NAMESPACE_PATH, admission_review(NAMESPACE_KIND, "CREATE", namespace("plain"))
    )

    assert response["allowed"] is True
    assert "patch" not in response
    assert [(path, allowed) for path, allowed, _ in observed] == [(VALIDATE_NAMESPACE_PATH, True)]


def test_denies_with_403_and_the_rules_message(
    client: Client, observed: list[tuple[str, bool, float]]
) -> None:
    selfish = namespace("selfish", **{LABEL_PARENT: "selfish"})

    response = client.review(
        VALIDATE_NAMESPACE_PATH, admission_review(NAMESPACE_KIND, "CREATE", selfish)
    )

    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["reason"] == "Forbidden"
    assert "circular reference is not permitted" in response["status"]["message"]
    assert "selfish" in response["status"]["message"]
    assert observed[-1][:2] == (VALIDATE_NAMESPACE_PATH, False)


def test_the_mutating_hook_adds_the_finalizer_as_a_json_patch(client: Client) -> None:
    created = subnamespace("child", "root", labels={"team": "a"})

    response = client.review(
        MUTATE_SUBNAMESPACE_PATH, admission_review(SUBNAMESPACE_KIND, "CREATE", created, None)
    )

    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert patch == [{"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}]


def test_the_mutating_hook_leaves_updates_alone(client: Client) -> None:
    """Users must be able to remove the finalizer with an update (ACCEPTANCE D2)."""
    old = subnamespace("child", "root")
    old["metadata"]["finalizers"] = [FINALIZER]

    response = client.review(
        MUTATE_SUBNAMESPACE_PATH,
        admission_review(SUBNAMESPACE_KIND, "UPDATE", subnamespace("child", "root"), old),
    )

    assert response["allowed"] is True
    assert "patch" not in response


def test_a_subnamespace_takes_its_namespace_from_the_request(
    cluster: Cluster, client: Client
) -> None:
    """kube-apiserver fills metadata.namespace in from the path; a review may carry it only in
    request.namespace."""
    root = cluster.namespace("root", labels={LABEL_TYPE: TYPE_ROOT})
    plain = cluster.namespace("plain")

    allowed = client.review(
        VALIDATE_SUBNAMESPACE_PATH,
        admission_review(SUBNAMESPACE_KIND, "CREATE", subnamespace("a"), namespace=root),
    )
    denied = client.review(
        VALIDATE_SUBNAMESPACE_PATH,
        admission_review(SUBNAMESPACE_KIND, "CREATE", subnamespace("a"), namespace=plain),
    )

    assert allowed["allowed"] is True
    assert denied["allowed"] is False
    assert f"namespace {plain} is neither a root nor a sub namespace" in denied["status"]["message"]


def _good() -> dict[str, Any]:
    return admission_review(NAMESPACE_KIND, "CREATE", namespace("fine"))


_REMOVE = object()


def _altered(path: str, value: Any = _REMOVE) -> dict[str, Any]:
    """A good review with the field at the dotted ``path`` set to ``value``, or removed."""
    review = _good()
    *parents, last = path.split(".")
    target = review
    for key in parents:
        target = target[key]
    if value is _REMOVE:
        del target[last]
    else:
        target[last] = value
    return review


MALFORMED = {
    "not JSON": (b'{"apiVersion": ', "not valid JSON"),
    "a JSON list": (b"[]", "expected an admission.k8s.io/v1 AdmissionReview, got a JSON list"),
    "another apiVersion": (
        _altered("apiVersion", "admission.k8s.io/v1beta1"),
        "got apiVersion='admission.k8s.io/v1beta1'",
    ),
    "another kind": (_altered("kind", "ConversionReview"), "kind='ConversionReview'"),
    "no request": (_altered("request"), "AdmissionReview.request is required"),
    "no uid": (_altered("request.uid"), "request.uid is required and must be a non-empty string"),
    "an unknown operation": (
        _altered("request.operation", "CONNECT"),
        "request.operation must be one of CREATE, UPDATE, DELETE",
    ),
    "a Deployment": (
        _altered("request.kind", {"group": "apps", "version": "v1", "kind": "Deployment"}),
        "this webhook reviews Namespace objects, not apps/v1/Deployment",
    ),
    "no object on CREATE": (
        _altered("request.object", None),
        "request.object is required for CREATE",
    ),
    "no metadata": (_altered("request.object", {"kind": "Namespace"}), "request.object.metadata"),
    "no name": (
        _altered("request.object", {"metadata": {"labels": {}}}),
        "request.object.metadata.name is required",
    ),
    "no oldObject on DELETE": (
        admission_review(NAMESPACE_KIND, "DELETE", None, None),
        "request.oldObject is required for DELETE",
    ),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_malformed_reviews_get_400_and_the_server_keeps_serving(
    client: Client, observed: list[tuple[str, bool, float]], case: str
) -> None:
    body, message = MALFORMED[case]

    code, answer = client.post(VALIDATE_NAMESPACE_PATH, body)

    assert code == 400
    assert answer["kind"] == "Status"
    assert answer["code"] == 400
    assert message in answer["message"]
    assert observed[-1][:2] == (VALIDATE_NAMESPACE_PATH, False)
    assert client.review(VALIDATE_NAMESPACE_PATH, _good())["allowed"] is True


def test_a_subnamespace_review_needs_its_namespace(client: Client) -> None:
    code, answer = client.post(
        VALIDATE_SUBNAMESPACE_PATH,
        admission_review(SUBNAMESPACE_KIND, "CREATE", subnamespace("a")),
    )

    assert code == 400
    assert "request.namespace is required" in answer["message"]


def test_unknown_paths_are_404(client: Client) -> None:
    code, answer = client.post("/validate-v1-pod", _good())

    assert code == 404
    assert VALIDATE_NAMESPACE_PATH in answer["message"]


def test_a_request_without_a_body_length_is_refused(client: Client) -> None:
    connection = client.connection()
    connection.putrequest("POST", VALIDATE_NAMESPACE_PATH)
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    connection.send(b"0\r\n\r\n")

    reply = connection.getresponse()

    assert reply.status == 411
    assert "Content-Length" in json.loads(reply.read())["message"]
    connection.close()


APPLICATION_JSON = "application/json"


def test_one_connection_carries_many_reviews_until_the_client_closes_it(client: Client) -> None:
    """As kube-apiserver keeps its connection to a webhook: each answer is whole, with its
    length and the current date, and the connection stays open until a request says
    ``Connection: close``."""
    connection = client.connection()
    raw = json.dumps(_good()).encode()
    for _ in range(3):
        connection.request("POST", VALIDATE_NAMESPACE_PATH, raw, {"Content-Type": APPLICATION_JSON})
        reply = connection.getresponse()
        assert reply.status == 200
        assert reply.getheader("Content-Type") == APPLICATION_JSON
        sent = email.utils.parsedate_to_datetime(reply.getheader("Date") or "")
        assert abs(sent.timestamp() - time.time()) < 5
        assert json.loads(reply.read())["response"]["allowed"] is True
        assert not reply.will_close
    connection.request("POST", VALIDATE_NAMESPACE_PATH, raw, {"Connection": "close"})
    reply = connection.getresponse()
    assert reply.status == 200
    assert reply.getheader("Connection") == "close"
    reply.read()
    assert connection.sock is None
    connection.close()


# Conversion

V1_OBJECT = {
    "apiVersion": "accurate.cybozu.com/v1",
    "kind": "SubNamespace",
    "metadata": {
        "name": "sub",
        "namespace": "root",
        "generation": 3,
        "annotations": {
            "keep": "me",
            ANNOTATION_V1_OBSERVED_GENERATION: "3",
            ANNOTATION_V1_CONDITIONS: json.dumps(
                [
                    {
                        "type": "Stalled",
                        "status": "True",
                        "reason": "Conflict",
                        "message": "namespace exists",
                        "lastTransitionTime": "2024-01-02T03:04:05Z",
                    }
                ],
                separators=(",", ":"),
            ),
        },
    },
    "spec": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
    "status": "conflict",
}

V2_OBJECT = {
    "apiVersion": "accurate.cybozu.com/v2",
    "kind": "SubNamespace",
    "metadata": {"name": "sub", "namespace": "root", "generation": 2, "labels": {"a": "b"}},
    "spec": {"labels": {"team": "a"}},
    "status": {
        "observedGeneration": 2,
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "Pending",
                "message": "copies <pending> & more",
                "lastTransitionTime": "2024-01-02T03:04:05Z",
            }
        ],
    },
}


def test_v1_to_v2_and_back_is_lossless(client: Client) -> None:
    to_v2 = client.convert([V1_OBJECT], "accurate.cybozu.com/v2")
    (v2,) = to_v2["convertedObjects"]
    back = client.convert([v2], "accurate.cybozu.com/v1")

    assert to_v2["result"]["status"] == "Success"
    assert v2["apiVersion"] == "accurate.cybozu.com/v2"
    assert v2["status"]["observedGeneration"] == 3
    assert v2["status"]["conditions"][0]["reason"] == "Conflict"
    assert v2["metadata"]["annotations"] == {"keep": "me"}
    assert back["convertedObjects"] == [V1_OBJECT]


def test_v2_to_v1_and_back_is_lossless(client: Client) -> None:
    to_v1 = client.convert([V2_OBJECT], "accurate.cybozu.com/v1")
    (v1,) = to_v1["convertedObjects"]
    back = client.convert([v1], "accurate.cybozu.com/v2")

    assert v1["apiVersion"] == "accurate.cybozu.com/v1"
    assert (
        "\\u003cpending\\u003e \\u0026 more"
        in v1["metadata"]["annotations"][ANNOTATION_V1_CONDITIONS]
    )
    assert back["convertedObjects"] == [V2_OBJECT]


def test_v2alpha1_converts_to_v2(client: Client) -> None:
    v2alpha1 = {**V2_OBJECT, "apiVersion": "accurate.cybozu.com/v2alpha1"}

    response = client.convert([v2alpha1], "accurate.cybozu.com/v2")

    assert response["convertedObjects"] == [V2_OBJECT]


def test_an_object_that_cannot_be_converted_fails_the_conversion(
    client: Client, observed: list[tuple[str, bool, float]]
) -> None:
    broken = json.loads(json.dumps(V1_OBJECT))
    broken["metadata"]["annotations"][ANNOTATION_V1_OBSERVED_GENERATION] = "three"

    response = client.convert([V2_OBJECT, broken], "accurate.cybozu.com/v2")

    assert response["result"]["status"] == "Failure"
    assert ANNOTATION_V1_OBSERVED_GENERATION in response["result"]["message"]
    assert "convertedObjects" not in response
    assert observed[-1][:2] == (CONVERT_PATH, False)


@pytest.mark.parametrize(
    "body, message",
    [
        (_good(), "expected an apiextensions.k8s.io/v1 ConversionReview"),
        (conversion_review({"uid": "u", "objects": []}), "request.desiredAPIVersion is required"),
        (
            conversion_review({"uid": "u", "desiredAPIVersion": "accurate.cybozu.com/v2"}),
            "request.objects is required and must be a list",
        ),
        (
            conversion_review(
                {"uid": "u", "desiredAPIVersion": "accurate.cybozu.com/v2", "objects": [1]}
            ),
            "request.objects must be a list of objects",
        ),
    ],
    ids=["an AdmissionReview", "no desired version", "no objects", "objects not objects"],
)
def test_malformed_conversion_reviews_get_400(client: Client, body: Any, message: str) -> None:
    code, answer = client.post(CONVERT_PATH, body)

    assert code == 400
    assert message in answer["message"]


# Certificates


def _served_by(client: Client, ca: trustme.CA) -> bool:
    """Whether a new connection trusting only ``ca`` completes the TLS handshake."""
    connection = client.connection(ca)
    try:
        connection.connect()
    except ssl.SSLCertVerificationError:
        return False
    finally:
        connection.close()
    return True


def test_new_connections_use_a_rotated_certificate(client: Client, tmp_certs: Path) -> None:
    renewed = trustme.CA()
    kept_alive = client.connection()
    kept_alive.connect()

    write_serving_pair(renewed, tmp_certs)

    assert _served_by(client, renewed)
    assert not _served_by(client, client.ca)
    kept_alive.request("POST", VALIDATE_NAMESPACE_PATH, json.dumps(_good()).encode())
    assert kept_alive.getresponse().status == 200
    kept_alive.close()


def test_a_half_rotated_pair_keeps_the_previous_certificate(
    client: Client, tmp_certs: Path
) -> None:
    """A new certificate next to the old key cannot be used; the old pair serves until the
    key arrives too."""
    renewed_ca = trustme.CA()
    renewed = renewed_ca.issue_cert("127.0.0.1")
    (tmp_certs / "tls.crt").write_bytes(renewed.cert_chain_pems[0].bytes())

    assert _served_by(client, client.ca)
    assert client.review(VALIDATE_NAMESPACE_PATH, _good())["allowed"] is True
    (tmp_certs / "tls.key").write_bytes(renewed.private_key_pem.bytes())
    assert _served_by(client, renewed_ca)


def test_an_empty_host_serves_on_every_interface(start: Any) -> None:
    """ ":9443", the default, listens on IPv6 and IPv4 as the Go controller does."""
    client = start(addr=":0")
    hosts = ["127.0.0.1", "::1"] if socket.has_dualstack_ipv6() else ["127.0.0.1"]
    for host in hosts:
        connection = client.connection(host=host)
        connection.connect()
        connection.close()


def test_start_fails_clearly_without_a_certificate(cluster: Cluster, tmp_path: Path) -> None:
    kube = connect(cluster)
    server = WebhookServer("127.0.0.1:0", tmp_path, LiveNamespaces(kube), kube, (), False)

    with pytest.raises(CertificateError, match=f"{tmp_path}/tls.crt.*No such file"):
        server.start()


def test_start_fails_clearly_on_a_busy_port(
    cluster: Cluster, client: Client, tmp_certs: Path
) -> None:
    kube = connect(cluster)
    busy = f"127.0.0.1:{client.server.port}"
    server = WebhookServer(busy, tmp_certs, LiveNamespaces(kube), kube, (), False)

    with pytest.raises(OSError, match=f"cannot serve webhooks on {busy}: Address already in use"):
        server.start()


# Reading what the cache lacks


def test_a_parent_missing_from_the_cache_is_read_live(cluster: Cluster, start: Any) -> None:
    root = cluster.namespace("root", labels={LABEL_TYPE: TYPE_ROOT})
    client = start(FixedForest())
    child = namespace("child", **{LABEL_PARENT: root})

    response = client.review(
        VALIDATE_NAMESPACE_PATH, admission_review(NAMESPACE_KIND, "CREATE", child)
    )

    assert response["allowed"] is True


def test_a_parent_missing_everywhere_is_missing(cluster: Cluster, start: Any) -> None:
    client = start(FixedForest())
    nowhere = cluster.unique("nowhere")
    child = namespace("child", **{LABEL_PARENT: nowhere})

    response = client.review(
        VALIDATE_NAMESPACE_PATH, admission_review(NAMESPACE_KIND, "CREATE", child)
    )

    assert response["allowed"] is False
    assert f"parent namespace does not exist: {nowhere}" in response["status"]["message"]


def test_children_missing_from_the_cache_still_block_a_deletion(
    cluster: Cluster, start: Any
) -> None:
    root = cluster.namespace("root", labels={LABEL_TYPE: TYPE_ROOT})
    child = cluster.namespace("child", labels={LABEL_PARENT: root})
    stale = namespace(root, **{LABEL_TYPE: TYPE_ROOT})
    client = start(FixedForest(stale))

    response = client.review(
        VALIDATE_NAMESPACE_PATH, admission_review(NAMESPACE_KIND, "DELETE", None, stale)
    )

    assert response["allowed"] is False
    assert child in response["status"]["message"]


def test_children_gone_from_the_cluster_do_not_block_a_deletion(
    cluster: Cluster, start: Any
) -> None:
    template = cluster.namespace("template", labels={LABEL_TYPE: TYPE_TEMPLATE})
    old = namespace(template, **{LABEL_TYPE: TYPE_TEMPLATE})
    client = start(FixedForest(old, namespace("gone", **{LABEL_TEMPLATE: template})))

    response = client.review(
        VALIDATE_NAMESPACE_PATH, admission_review(NAMESPACE_KIND, "DELETE", None, old)
    )

    assert response["allowed"] is True


def test_what_live_reads_correct_is_not_left_in_the_cache(cluster: Cluster, start: Any) -> None:
    template = cluster.namespace("template", labels={LABEL_TYPE: TYPE_TEMPLATE})
    old = namespace(template, **{LABEL_TYPE: TYPE_TEMPLATE})
    cache = FixedForest(old, namespace("gone", **{LABEL_TEMPLATE: template}))
    client = start(cache)

    response = client.review(
        VALIDATE_NAMESPACE_PATH, admission_review(NAMESPACE_KIND, "DELETE", None, old)
    )

    assert response["allowed"] is True
    with cache.reading() as forest:
        assert sorted(forest.nodes) == sorted([template, "gone"])
        assert forest.instances(template) == ("gone",)


@pytest.mark.fault_injection
def test_a_failing_api_server_refuses_rather_than_guesses(apiserver: ApiServer, start: Any) -> None:
    client = start(FixedForest())
    child = namespace("child", **{LABEL_PARENT: "root"})
    apiserver.fail(503, path="/api/v1/namespaces/root$", method="GET", message="etcd is down")

    response = client.review(
        VALIDATE_NAMESPACE_PATH, admission_review(NAMESPACE_KIND, "CREATE", child)
    )

    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert "cannot check the request against the cluster" in response["status"]["message"]
    assert "etcd is down" in response["status"]["message"]


# Paths of every Go release


def _path_cases(cluster: Cluster) -> dict[str, tuple[dict[str, Any], Any]]:
    """For each current path: a review, and a check of the answer that only its handler gives."""
    plain = cluster.namespace("plain")
    v1_sub = {**subnamespace("a", plain), "apiVersion": "accurate.cybozu.com/v1"}
    conversion = conversion_review(
        {"uid": "u", "desiredAPIVersion": "accurate.cybozu.com/v2", "objects": [V1_OBJECT]}
    )

    def finalizer_patch(answer: dict[str, Any]) -> bool:
        patch = json.loads(base64.b64decode(answer["response"]["patch"]))
        return bool(patch[0]["value"] == [FINALIZER])

    return {
        VALIDATE_NAMESPACE_PATH: (
            admission_review(NAMESPACE_KIND, "CREATE", namespace("o", **{LABEL_PARENT: "o"})),
            lambda answer: "circular reference" in answer["response"]["status"]["message"],
        ),
        MUTATE_SUBNAMESPACE_PATH: (
            admission_review(V1_SUBNAMESPACE_KIND, "CREATE", v1_sub),
            finalizer_patch,
        ),
        VALIDATE_SUBNAMESPACE_PATH: (
            admission_review(V1_SUBNAMESPACE_KIND, "CREATE", v1_sub),
            lambda answer: (
                "neither a root nor a sub namespace" in answer["response"]["status"]["message"]
            ),
        ),
        CONVERT_PATH: (
            conversion,
            lambda answer: answer["response"]["convertedObjects"][0]["status"]["conditions"],
        ),
        # Without the HRQ CRD there is nothing to enforce; the other handlers refuse the kind.
        VALIDATE_QUOTA_STATUS_PATH: (
            admission_review(QUOTA_KIND, "UPDATE", subnamespace("q", plain), subnamespace("q")),
            lambda answer: answer["response"]["allowed"] is True,
        ),
    }


@pytest.mark.parametrize("path", [*PATHS, *LEGACY_PATHS])
def test_every_path_a_go_release_registered_is_served_by_its_handler(
    cluster: Cluster, client: Client, observed: list[tuple[str, bool, float]], path: str
) -> None:
    """Webhook configurations of older Go installs keep working after the swap (issue 13)."""
    handler_path = LEGACY_PATHS.get(path, path)
    review, answered_by_the_handler = _path_cases(cluster)[handler_path]

    code, answer = client.post(path, review)

    assert code == 200, answer
    assert answered_by_the_handler(answer)
    assert observed[-1][0] == handler_path


# Hostile input: whatever arrives, an answer of 200 or 400, and the server keeps serving


def _nested(depth: int) -> bytes:
    return b'{"apiVersion": ' + b"[" * depth + b"]" * depth + b"}"


def test_a_body_nested_too_deep_is_refused_before_decoding(client: Client) -> None:
    code, answer = client.post(VALIDATE_NAMESPACE_PATH, _nested(5000))

    assert code == 400
    assert f"nests 5001 levels deep, more than {MAX_DEPTH}" in answer["message"]
    assert client.review(VALIDATE_NAMESPACE_PATH, _good())["allowed"] is True


def test_brackets_inside_strings_do_not_count_as_nesting(client: Client) -> None:
    review = _good()
    review["request"]["object"]["metadata"]["labels"] = {"a": "[" * 5000, "b": '\\"{{{'}

    assert client.review(VALIDATE_NAMESPACE_PATH, review)["allowed"] is True


def test_a_string_left_open_is_scanned_once(client: Client) -> None:
    """Escaped quotes after an opening one and no closing one: a scan that tried every quote
    as a string's start would read this body a million times over, and never answer."""
    code, answer = client.post(VALIDATE_NAMESPACE_PATH, b'"' + b'\\"' * 500_000)

    assert code == 400
    assert "not valid JSON" in answer["message"]


def test_a_body_nested_to_the_limit_is_decoded(client: Client) -> None:
    code, answer = client.post(VALIDATE_NAMESPACE_PATH, _nested(MAX_DEPTH - 1))

    assert code == 400
    assert "expected an admission.k8s.io/v1 AdmissionReview" in answer["message"]


def test_a_body_over_the_size_limit_is_refused_unread(client: Client) -> None:
    connection = client.connection()
    connection.putrequest("POST", VALIDATE_NAMESPACE_PATH)
    connection.putheader("Content-Length", str(MAX_BODY + 1))
    connection.endheaders()

    reply = connection.getresponse()

    assert reply.status == 400
    assert f"{MAX_BODY + 1} bytes, more than {MAX_BODY}" in json.loads(reply.read())["message"]
    assert reply.getheader("Connection") == "close"
    connection.close()
    assert client.review(VALIDATE_NAMESPACE_PATH, _good())["allowed"] is True


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("request.object.metadata.labels", ["a"], "request.object.metadata.labels must be a map"),
        ("request.object.metadata.labels", {"a": 1}, "request.object.metadata.labels must be"),
        ("request.object.metadata.annotations", "x", "request.object.metadata.annotations"),
        ("request.object.metadata.finalizers", "x", "request.object.metadata.finalizers"),
        ("request.object.metadata.name", 7, "request.object.metadata.name is required"),
        ("request.object.spec", [], "request.object.spec must be an object"),
        ("request.uid", "", "request.uid is required"),
    ],
)
def test_fields_of_the_wrong_type_get_400_naming_them(
    client: Client, where: str, value: Any, message: str
) -> None:
    code, answer = client.post(VALIDATE_NAMESPACE_PATH, _altered(where, value))

    assert code == 400
    assert message in answer["message"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
# Where reviews carry what the handlers read; the fuzz replaces or removes some of them.
ENVELOPE = [("apiVersion",), ("kind",), ("request",), ("request", "uid")]
ADMISSION_FIELDS = [
    *ENVELOPE,
    ("request", "kind"),
    ("request", "operation"),
    ("request", "namespace"),
    *(
        ("request", obj, *field)
        for obj in ("object", "oldObject")
        for field in (
            (),
            ("metadata",),
            ("metadata", "name"),
            ("metadata", "namespace"),
            ("metadata", "labels"),
            ("metadata", "labels", LABEL_PARENT),
            ("metadata", "annotations"),
            ("metadata", "finalizers"),
            ("spec",),
            ("spec", "labels"),
        )
    ),
]
CONVERSION_FIELDS = [
    *ENVELOPE,
    ("request", "desiredAPIVersion"),
    ("request", "objects"),
    *(
        ("request", "objects", 0, *field)
        for field in ((), ("metadata",), ("metadata", "annotations"), ("status",), ("spec",))
    ),
]
KINDS = {
    VALIDATE_NAMESPACE_PATH: NAMESPACE_KIND,
    MUTATE_SUBNAMESPACE_PATH: SUBNAMESPACE_KIND,
    VALIDATE_SUBNAMESPACE_PATH: V1_SUBNAMESPACE_KIND,
    VALIDATE_QUOTA_STATUS_PATH: QUOTA_KIND,
}
OPERATIONS = st.sampled_from(["CREATE", "UPDATE", "DELETE"])
# One server serves every example: it keeps no state between requests.
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, Any]:
    """A path and a review close to what it expects, with some fields replaced by any JSON
    value or removed."""
    path = draw(st.sampled_from([*PATHS, *LEGACY_PATHS]))
    handler_path = LEGACY_PATHS.get(path, path)
    labels = {LABEL_PARENT: draw(st.sampled_from(["root", "fuzz", "", "a/b"]))}
    fields: list[tuple[Any, ...]]
    if handler_path == CONVERT_PATH:
        objects = [json.loads(json.dumps(draw(st.sampled_from([V1_OBJECT, V2_OBJECT]))))]
        desired = draw(st.sampled_from(["accurate.cybozu.com/v1", "accurate.cybozu.com/v2", ""]))
        review = conversion_review({"uid": "u", "desiredAPIVersion": desired, "objects": objects})
        fields = CONVERSION_FIELDS
    else:
        kind = KINDS[handler_path]
        obj = namespace("fuzz") if kind is NAMESPACE_KIND else subnamespace("fuzz")
        obj["metadata"]["labels"] = labels
        review = admission_review(kind, draw(OPERATIONS), obj, json.loads(json.dumps(obj)))
        review["request"]["namespace"] = "root"
        fields = ADMISSION_FIELDS
    for where in draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3)):
        _replace(review, where, draw(st.none() | JSON))
    return path, review


def _replace(review: Any, where: tuple[Any, ...], value: Any) -> None:
    """Set (or, for None, remove) the field at ``where`` if its parent is there."""
    *parents, last = where
    target = review
    for key in parents:
        target = _child(target, key)
    if isinstance(target, dict):
        if value is None:
            target.pop(last, None)
        else:
            target[last] = value
    elif _child(target, last) is not None:
        target[last] = value


def _child(parent: Any, key: Any) -> Any:
    if isinstance(parent, dict):
        return parent.get(key)
    if isinstance(parent, list) and isinstance(key, int) and key < len(parent):
        return parent[key]
    return None


BODIES = st.one_of(
    st.binary(max_size=200),
    JSON.map(lambda value: json.dumps(value).encode()),
)


@settings(FUZZ, max_examples=300)
@given(request=requests())
def test_fuzzed_reviews_get_200_or_400_and_the_server_keeps_serving(
    client: Client, request: tuple[str, Any]
) -> None:
    path, review = request
    _assert_answered(client, path, json.dumps(review).encode())


@settings(FUZZ, max_examples=100)
@given(path=st.sampled_from([*PATHS, *LEGACY_PATHS]), body=BODIES)
def test_fuzzed_bodies_get_400_and_the_server_keeps_serving(
    client: Client, path: str, body: bytes
) -> None:
    _assert_answered(client, path, body)


def _assert_answered(client: Client, path: str, body: bytes) -> None:
    """A 200 with a review for the request, or a 400 with a reason; then a good review is
    still answered."""
    code, answer = client.post(path, body)

    assert code in (200, 400), answer
    if code == 200:
        assert answer["response"]["uid"] == json.loads(body)["request"]["uid"]
    else:
        assert answer["kind"] == "Status" and answer["message"]
    assert client.review(VALIDATE_NAMESPACE_PATH, _good())["allowed"] is True
