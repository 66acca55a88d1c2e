"""Small helpers the contract tests share: raw requests with a chosen content type, error
bodies, and objects held by the finalizer test clean-ups let go of (accurate_testbed.leftovers)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client as k8s_client

from accurate_testbed.cluster import Cluster
from accurate_testbed.leftovers import HOLD


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


def held_config_map(cluster: Cluster, ns: str, name: str, **metadata: Any) -> Any:
    """Create ConfigMap ``name`` held by ``HOLD``; the test's clean-up lets go of it (on a real
    cluster a forgotten hold would keep its namespace ``Terminating`` for ever)."""
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    body = {"metadata": {"name": name, "finalizers": [HOLD], **metadata}}
    return core.create_namespaced_config_map(ns, body)


def release(cluster: Cluster, ns: str, name: str) -> None:
    """Drop the finalizers of ConfigMap ``name``, so that it (and its namespace) can go."""
    core: Any = k8s_client.CoreV1Api(cluster.api_client)
    core.patch_namespaced_config_map(name, ns, {"metadata": {"finalizers": None}})
