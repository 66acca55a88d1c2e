"""Small helpers the contract tests share: raw requests with a chosen content type, error
bodies, and waiting on a condition with a deadline."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client as k8s_client

T = TypeVar("T")


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


def wait_for(condition: Callable[[], T | None], timeout: float = 10.0, what: str = "") -> T:
    """Poll ``condition`` until it returns something truthy, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.02)


def kubectl(kubeconfig: Path, *args: str, stdin: Any = None) -> subprocess.CompletedProcess[str]:
    """Run the real kubectl against ``kubeconfig``; ``stdin`` is sent as is if it is text (YAML),
    as JSON otherwise. The caller checks the exit code: failing is often what a test wants."""
    text = stdin if stdin is None or isinstance(stdin, str) else json.dumps(stdin)
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
