"""Small helpers the contract tests share: raw requests with a chosen content type, error
bodies, and objects held by a finalizer that are released after the test."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s_client

from accurate_testbed.cluster import Cluster


def request(
    api_client: Any,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    query: list[tuple[str, str]] | None = None,
    accept: str = "application/json",
) -> Any:
    """Send one request and return the decoded JSON body; raises ApiException on errors."""
    serialized = api_client.param_serialize(
        method=method,
        resource_path=path,
        query_params=query or [],
        header_params={"Content-Type": content_type, "Accept": accept},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api_client.call_api(*serialized)
    response.read()
    if not 200 <= response.status < 300:
        raise k8s_client.ApiException(http_resp=response)
    return json.loads(response.data or b"null")


def error_of(error: k8s_client.ApiException) -> dict[str, Any]:
    """The metav1 Status an API error carried."""
    return dict(json.loads(error.body or "{}"))


# A finalizer of the tests' own, holding an object (and so its namespace) until released.
HOLD = "example.com/hold"


def unless_gone(call: Callable[[], object]) -> None:
    """Run a clean-up call that has nothing left to do when the object is gone already (the
    test released it, or its namespace went first)."""
    try:
        call()
    except k8s_client.ApiException as error:
        if error.status != 404:
            raise


def held_config_map(cluster: Cluster, ns: str, name: str, **metadata: Any) -> Any:
    """Create ConfigMap ``name`` held by ``HOLD``, released after the test whatever happens: on
    a real cluster a forgotten hold keeps its namespace ``Terminating`` for ever."""
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    body = {"metadata": {"name": name, "finalizers": [HOLD], **metadata}}
    created = core.create_namespaced_config_map(ns, body)
    cluster.on_cleanup(lambda: unless_gone(lambda: release(cluster, ns, name)))
    return created


def release(cluster: Cluster, ns: str, name: str) -> None:
    """Drop the finalizers of ConfigMap ``name``, so that it (and its namespace) can go."""
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    core.patch_namespaced_config_map(name, ns, {"metadata": {"finalizers": None}})
