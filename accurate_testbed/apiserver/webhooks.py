"""Admission webhooks of the in-memory API server, dispatched the way kube-apiserver does it.

The product's webhook configurations (rules, selectors, matchConditions, failurePolicy, timeouts)
decide which writes reach the controller and what a user reads when one is refused, so this
follows the webhook dispatcher of k8s.io/apiserver: the same matching order, the same
AdmissionReview v1 body, the same checks of the answer and the same Status bodies for denials
and failed calls.

Where it differs, it says so instead of silently doing something else:
- ``clientConfig.service`` cannot be reached from a test process: such a call fails (so
  failurePolicy decides) with a message saying to register the webhook with a ``url``.
- Only AdmissionReview v1 is sent; a webhook whose ``admissionReviewVersions`` lacks v1 fails.
- ``reinvocationPolicy`` is accepted and ignored: each mutating webhook is called once, in order,
  which is what happens on a cluster where no later admission plugin changes the object.
- matchConditions run on the CEL C++ runtime (``cel-expr-python``) with the optional-types and
  strings extensions; Kubernetes' own CEL libraries (``authorizer``, quantity, url, ``isSorted``)
  are missing, so an expression using them is refused when the configuration is registered.
- v1 only allows sideEffects ``None`` and ``NoneOnDryRun`` (checked at registration), so every
  webhook is called for dry-run requests too, with ``dryRun: true`` in the review.
- matchPolicy ``Equivalent`` also matches other groups/versions of the same resource; every kind
  served here has one served version in one group, so it behaves exactly like ``Exact``.
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import importlib
import json
import ssl
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol
from urllib.parse import urlsplit

from accurate_testbed.apiserver.errors import (
    ApiError,
    forbidden,
    internal_error,
    invalid,
    not_found,
)
from accurate_testbed.apiserver.patching import PatchError, json_patch
from accurate_testbed.apiserver.uids import new_uid
from accurate_testbed.apiserver.webhook_transport import (
    Address,
    Closed,
    Connection,
    KeptConnections,
    ProtocolError,
)
from libaccurate.validation import FieldError, validate_dns1123_subdomain

ADMISSION_GROUP = "admissionregistration.k8s.io"
REVIEW_API_VERSION = "admission.k8s.io/v1"
# Admission never applies to the objects that configure admission, or a bad webhook could lock
# everyone out of fixing it.
_EXEMPT_KINDS = frozenset(
    {
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)
_NAMESPACES = ("", "v1", "namespaces")
_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_SCOPES = ("*", "Cluster", "Namespaced")
_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_FAILURE_POLICIES = ("Fail", "Ignore")
_MATCH_POLICIES = ("Equivalent", "Exact")
_REINVOCATION_POLICIES = ("IfNeeded", "Never")
_REVIEW_VERSIONS = ("v1", "v1beta1")
_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "In", "NotIn")
_DEFAULT_TIMEOUT_SECONDS = 10


class AdmissionDenied(ApiError):
    """A write refused by admission; ``status`` is the Status body kube-apiserver would send."""

    @classmethod
    def from_status(cls, status: dict[str, Any]) -> AdmissionDenied:
        reason = status.get("reason", "")
        denied = cls(status["code"], reason, status["message"], status.get("details"))
        denied.status = status
        return denied


@dataclass
class AdmissionRequest:
    """One write as admission sees it.

    ``namespace`` is what kube-apiserver puts there: the object's namespace, or for a Namespace
    addressed by name (UPDATE, DELETE: ``/api/v1/namespaces/NAME``) its own name; empty for
    other cluster-scoped objects and for a Namespace CREATE. ``obj`` is None for DELETE,
    ``old_obj`` None for CREATE.
    """

    operation: str
    kind: dict[str, str]
    resource: dict[str, str]
    sub_resource: str | None
    name: str
    namespace: str | None
    obj: dict[str, Any] | None
    old_obj: dict[str, Any] | None
    user_info: dict[str, Any]
    dry_run: bool
    options: dict[str, Any] | None


class CallFailure(Exception):
    """ErrCallingWebhook: the webhook gave no usable answer, so its failurePolicy decides."""


class _ConditionError(Exception):
    """A matchCondition that could not be evaluated to a bool."""


@dataclass(frozen=True, eq=False)
class _Condition:
    expression: str
    program: Any


class Endpoint(Protocol):
    """Where a webhook is called (admission and CRD conversion webhooks alike)."""

    @property
    def url(self) -> str | None: ...

    @property
    def service(self) -> Mapping[str, Any] | None: ...

    @property
    def ca_bundle(self) -> str: ...

    @property
    def timeout_seconds(self) -> int: ...


@dataclass(frozen=True, eq=False)
class Webhook:
    """One entry of ``webhooks`` in a configuration, with the API defaults filled in."""

    name: str
    mutating: bool
    url: str | None
    service: Mapping[str, Any] | None
    ca_bundle: str
    rules: tuple[Mapping[str, Any], ...]
    failure_policy: str
    namespace_selector: Mapping[str, Any]
    object_selector: Mapping[str, Any]
    timeout_seconds: int
    review_versions: tuple[str, ...]
    match_conditions: tuple[_Condition, ...]

    def should_call(
        self, request: AdmissionRequest, namespace_labels: Mapping[str, str] | None
    ) -> bool:
        """Whether this webhook gets the request, in kube-apiserver's order of checks.

        A namespace that cannot be found only matters once a rule matched, and matchConditions
        are evaluated last, so a cheap non-match never costs a CEL evaluation or an error.
        """
        labels = _selector_namespace_labels(request, namespace_labels)
        by_namespace = _namespace_selector_applies(self.namespace_selector, request)
        if (
            by_namespace
            and labels is not None
            and not selector_matches(self.namespace_selector, labels)
        ):
            return False
        if not _object_selected(self.object_selector, request):
            return False
        if not any(rule_matches(rule, request) for rule in self.rules):
            return False
        if by_namespace and labels is None:
            status = not_found("", "namespaces", request.namespace or "").status
            raise AdmissionDenied.from_status(status)
        return self._conditions_hold(request)

    def _conditions_hold(self, request: AdmissionRequest) -> bool:
        """Any false condition skips the webhook; otherwise errors go by failurePolicy."""
        activation = {
            "object": request.obj,
            "oldObject": request.old_obj,
            "request": _request_attributes(request),
        }
        errors = []
        for condition in self.match_conditions:
            try:
                if not _evaluate(condition, activation):
                    return False
            except _ConditionError as error:
                errors.append(str(error))
        if not errors:
            return True
        if self.failure_policy == "Ignore":
            return False
        why = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        group, plural = request.resource["group"], request.resource["resource"]
        raise AdmissionDenied.from_status(forbidden(group, plural, request.name, why).status)


@dataclass(frozen=True)
class WebhookConfigurations:
    """All registered webhooks, in the order kube-apiserver calls them."""

    mutating: tuple[Webhook, ...] = ()
    validating: tuple[Webhook, ...] = ()

    @classmethod
    def from_objects(
        cls, mutating: Iterable[dict[str, Any]], validating: Iterable[dict[str, Any]]
    ) -> WebhookConfigurations:
        """Read Mutating/ValidatingWebhookConfiguration objects (JSON form).

        Raises the 422 Invalid ApiError the real server answers for a configuration it would
        not store, so the server can call this on create and update to refuse bad ones.
        """

        def webhooks(objects: Iterable[dict[str, Any]], is_mutating: bool) -> tuple[Webhook, ...]:
            ordered = sorted(objects, key=lambda obj: obj.get("metadata", {}).get("name", ""))
            return tuple(hook for obj in ordered for hook in _parse(obj, is_mutating))

        return cls(webhooks(mutating, True), webhooks(validating, False))


def admit(
    configurations: WebhookConfigurations,
    request: AdmissionRequest,
    namespace_labels: Mapping[str, str] | None,
    *,
    warnings: list[str] | None = None,
) -> dict[str, Any] | None:
    """Run the mutating webhooks in order, then the validating ones; return the final object.

    kube-apiserver validates the object between the two phases; callers that do so use
    ``mutate`` and ``validate`` instead. ``namespace_labels`` are the labels of the request's
    namespace (None when it does not exist); a Namespace's own labels are taken from the
    request. Warnings the webhooks send are appended to ``warnings`` (for the ``Warning``
    response headers), also when the request is refused. Raises AdmissionDenied; returns None
    for DELETE.
    """
    obj = mutate(configurations, request, namespace_labels, warnings=warnings)
    validate(configurations, replace(request, obj=obj), namespace_labels, warnings=warnings)
    return None if request.operation == "DELETE" else obj


def mutate(
    configurations: WebhookConfigurations,
    request: AdmissionRequest,
    namespace_labels: Mapping[str, str] | None,
    *,
    warnings: list[str] | None = None,
) -> dict[str, Any] | None:
    """The mutating phase: each matching webhook sees the previous ones' patches."""
    if _exempt(request):
        return request.obj
    sink: list[str] = [] if warnings is None else warnings
    for webhook in configurations.mutating:
        if webhook.should_call(request, namespace_labels):
            request = replace(request, obj=_mutate(webhook, request, sink))
    return request.obj


def validate(
    configurations: WebhookConfigurations,
    request: AdmissionRequest,
    namespace_labels: Mapping[str, str] | None,
    *,
    warnings: list[str] | None = None,
) -> None:
    """The validating phase, on the object as it will be stored; raises AdmissionDenied."""
    if _exempt(request):
        return
    chosen = [
        hook for hook in configurations.validating if hook.should_call(request, namespace_labels)
    ]
    _validate(chosen, request, [] if warnings is None else warnings)


def _exempt(request: AdmissionRequest) -> bool:
    """Webhook configurations are never sent to webhooks, so a bad hook cannot lock itself in."""
    return request.kind["group"] == ADMISSION_GROUP and request.kind["kind"] in _EXEMPT_KINDS


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: a null or empty selector selects everything."""
    selector = selector or {}
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_requirement_holds(term, labels) for term in selector.get("matchExpressions") or [])


def _requirement_holds(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = term["key"], term["operator"], term.get("values") or []
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    return (key in labels) == (operator == "Exists")


def rule_matches(rule: Mapping[str, Any], request: AdmissionRequest) -> bool:
    """One RuleWithOperations against the request's operation and resource.

    ``*`` matches main resources only; ``*/*`` everything; ``pods/*`` a resource and all its
    subresources; ``pods/status`` one subresource.
    """
    resource = request.resource
    return (
        _scope_matches(rule.get("scope", "*"), request)
        and _listed(rule.get("operations"), request.operation)
        and _listed(rule.get("apiGroups"), resource["group"])
        and _listed(rule.get("apiVersions"), resource["version"])
        and any(
            _resource_matches(entry, resource["resource"], request.sub_resource or "")
            for entry in rule.get("resources") or []
        )
    )


def _listed(items: Iterable[str] | None, requested: str) -> bool:
    return any(item in ("*", requested) for item in items or ())


def _resource_matches(entry: str, resource: str, sub_resource: str) -> bool:
    name, _, sub = entry.partition("/")
    return name in ("*", resource) and sub in ("*", sub_resource)


def _is_namespace(request: AdmissionRequest) -> bool:
    resource = request.resource
    return (resource["group"], resource["version"], resource["resource"]) == _NAMESPACES


def _scope_matches(scope: str, request: AdmissionRequest) -> bool:
    """A Namespace is cluster-scoped even though kube-apiserver sets its name as namespace."""
    if scope == "*":
        return True
    cluster_scoped = _is_namespace(request) or not request.namespace
    return cluster_scoped == (scope == "Cluster")


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return (obj or {}).get("metadata", {}).get("labels") or {}


def _selector_namespace_labels(
    request: AdmissionRequest, namespace_labels: Mapping[str, str] | None
) -> Mapping[str, str] | None:
    """A Namespace written is matched on its new labels, one deleted on its stored labels."""
    if _is_namespace(request) and not request.sub_resource:
        written = request.operation in ("CREATE", "UPDATE")
        return _labels(request.obj if written else request.old_obj)
    return namespace_labels


def _namespace_selector_applies(selector: Mapping[str, Any], request: AdmissionRequest) -> bool:
    """Cluster-scoped objects other than Namespaces are never excluded by namespaceSelector."""
    cluster_scoped = not request.namespace and not _is_namespace(request)
    return not cluster_scoped and _has_terms(selector)


def _has_terms(selector: Mapping[str, Any]) -> bool:
    return bool(selector.get("matchLabels") or selector.get("matchExpressions"))


def _object_selected(selector: Mapping[str, Any], request: AdmissionRequest) -> bool:
    """objectSelector matches when either the new or the old object matches."""
    if not _has_terms(selector):
        return True
    return any(
        obj is not None and selector_matches(selector, _labels(obj))
        for obj in (request.obj, request.old_obj)
    )


def _request_attributes(request: AdmissionRequest) -> dict[str, Any]:
    """The AdmissionRequest fields, as sent in the review and seen by CEL as ``request``."""
    attributes: dict[str, Any] = {
        "kind": request.kind,
        "resource": request.resource,
        "requestKind": request.kind,
        "requestResource": request.resource,
        "operation": request.operation,
        "userInfo": request.user_info,
        "dryRun": request.dry_run,
        "options": request.options,
    }
    if request.sub_resource:
        attributes["subResource"] = attributes["requestSubResource"] = request.sub_resource
    if request.name:
        attributes["name"] = request.name
    if request.namespace:
        attributes["namespace"] = request.namespace
    return attributes


def _review(request: AdmissionRequest, uid: str) -> dict[str, Any]:
    body = {"uid": uid, **_request_attributes(request)}
    body.update(object=request.obj, oldObject=request.old_obj)
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "request": body}


# --- calling a webhook -------------------------------------------------------------------------


def _mutate(
    webhook: Webhook, request: AdmissionRequest, warnings: list[str]
) -> dict[str, Any] | None:
    """The object after this webhook's patch; a patch that cannot apply fails the request."""
    operations = _dispatch(webhook, request, warnings)
    if not operations:
        return request.obj
    try:
        return json_patch(request.obj, operations)
    except PatchError as error:
        raise _internal_error(str(error)) from error


def _validate(webhooks: list[Webhook], request: AdmissionRequest, warnings: list[str]) -> None:
    """Validating webhooks are called in parallel; the first refusal in their order wins.

    A single one is called on the request's own thread: starting a thread for it would add to
    every admitted write a cost that kube-apiserver, starting a goroutine, does not have.
    """

    def outcome(webhook: Webhook) -> AdmissionDenied | None:
        try:
            _dispatch(webhook, request, warnings)
        except AdmissionDenied as denied:
            return denied
        return None

    if len(webhooks) <= 1:
        outcomes = [outcome(webhook) for webhook in webhooks]
    else:
        with ThreadPoolExecutor(max_workers=len(webhooks)) as pool:
            outcomes = list(pool.map(outcome, webhooks))
    refusals = [denied for denied in outcomes if denied is not None]
    if refusals:
        raise refusals[0]


def _dispatch(
    webhook: Webhook, request: AdmissionRequest, warnings: list[str]
) -> list[dict[str, Any]]:
    """The webhook's patch operations (none when failing open); raises when failing closed."""
    try:
        return _call(webhook, request, warnings)
    except CallFailure as failure:
        if webhook.failure_policy == "Ignore":
            return []
        raise _internal_error(f'failed calling webhook "{webhook.name}": {failure}') from failure


def _call(webhook: Webhook, request: AdmissionRequest, warnings: list[str]) -> list[dict[str, Any]]:
    if "v1" not in webhook.review_versions:
        raise CallFailure(
            "could not create admission objects: the in-memory API server sends only "
            "admission.k8s.io/v1 AdmissionReviews; add v1 to admissionReviewVersions"
        )
    uid = new_uid()
    response = _verify(uid, webhook.mutating, post(webhook, _review(request, uid)))
    warnings.extend(response.get("warnings") or [])
    if not response.get("allowed"):
        status = _rejection(webhook.name, response.get("status"))
        raise AdmissionDenied.from_status(status)
    return _patch_operations(webhook, response, request) if webhook.mutating else []


def post(webhook: Endpoint, review: dict[str, Any]) -> dict[str, Any]:
    """POST the review over HTTPS; every transport problem is a CallFailure.

    timeoutSeconds bounds the connection and each read; for a webhook that answers in one piece,
    as admission webhooks do, that is the whole call. A connection kept alive from an earlier
    call is used first; when the webhook had closed it while idle, the call is made once more on
    a new connection, as Go's transport does for a request it never got to send.
    """
    timeout = webhook.timeout_seconds
    if webhook.url is None:
        service = webhook.service or {}
        target = (
            f"https://{service.get('name')}.{service.get('namespace')}.svc:"
            f"{service.get('port', 443)}{service.get('path', '')}?timeout={timeout}s"
        )
        raise CallFailure(
            f'failed to call webhook: Post "{target}": the in-memory API server cannot reach '
            "Services; register the webhook with clientConfig.url"
        )
    target = f"{webhook.url}?timeout={timeout}s"
    parts = urlsplit(target)
    key = (parts.hostname or "", parts.port or 443, webhook.ca_bundle)
    body = json.dumps(review, separators=(",", ":")).encode()  # compact, as Go encodes it
    kept = _CONNECTIONS.take(key, timeout)
    if kept is not None:
        try:
            return _exchange(kept, key, parts, body)
        except _IDLE_CLOSED:
            kept.close()
        except (OSError, ProtocolError) as error:
            kept.close()
            reason = _transport_error(error, parts)
            raise CallFailure(f'failed to call webhook: Post "{target}": {reason}') from error
    try:
        context = _tls_context(webhook.ca_bundle)
    except (ValueError, ssl.SSLError) as error:
        reason = f"could not get REST client: unable to load root certificates: {error}"
        raise CallFailure(reason) from error
    try:
        connection = Connection(parts.hostname or "", parts.port or 443, context, timeout)
        return _exchange(connection, key, parts, body)
    except (OSError, ProtocolError) as error:
        reason = _transport_error(error, parts)
        raise CallFailure(f'failed to call webhook: Post "{target}": {reason}') from error


# What a webhook closing a connection while it sat idle looks like on the next call.
_IDLE_CLOSED = (
    Closed,
    BrokenPipeError,
    ConnectionResetError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)
_CONNECTIONS = KeptConnections()


def _exchange(connection: Connection, key: Address, parts: Any, body: bytes) -> dict[str, Any]:
    """One POST and its answer; the connection is kept for the next call unless it closes."""
    try:
        code, payload = connection.post(f"{parts.path or '/'}?{parts.query}", body)
    except BaseException:
        connection.close()
        raise
    _CONNECTIONS.give_back(key, connection)
    return _decode_reply(code, payload)


def _tls_context(ca_bundle: str) -> ssl.SSLContext:
    """Trust the caBundle when there is one, the system roots otherwise, as client-go does."""
    if not ca_bundle:
        return ssl.create_default_context()
    return ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())


def _transport_error(error: BaseException, parts: Any) -> str:
    """Word transport errors as Go's net/http does, so messages look like a real cluster's."""
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"tls: failed to verify certificate: {error.verify_message}"
    if isinstance(error, ConnectionRefusedError):
        return f"dial tcp {parts.hostname}:{parts.port}: connect: connection refused"
    if isinstance(error, TimeoutError):
        return "context deadline exceeded"
    return str(error) or type(error).__name__


def _decode_reply(code: int, payload: bytes) -> dict[str, Any]:
    if not 200 <= code < 300:
        raise CallFailure(f"failed to call webhook: {_error_message(code, payload)}")
    try:
        body = json.loads(payload)
    except ValueError as error:
        reason = f"couldn't get version/kind; json parse error: {error}"
        raise CallFailure(f"failed to call webhook: {reason}") from error
    if not isinstance(body, dict):
        raise CallFailure("failed to call webhook: the response body is not a JSON object")
    return body


def _error_message(code: int, payload: bytes) -> str:
    """client-go's text for a non-2xx answer: the Status message when the body is a Status."""
    try:
        body = json.loads(payload)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return f"the server responded with the status code {code} but did not return more information"


def _verify(uid: str, mutating: bool, review: dict[str, Any]) -> dict[str, Any]:
    """VerifyAdmissionResponse: the checks that make an answer unusable (a call failure)."""

    def invalid_response(why: str) -> CallFailure:
        return CallFailure(f"received invalid webhook response: {why}")

    response = review.get("response")
    if not isinstance(response, dict):
        raise invalid_response("webhook response was absent")
    if response.get("uid") != uid:
        raise invalid_response(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    if (review.get("apiVersion"), review.get("kind")) != (REVIEW_API_VERSION, "AdmissionReview"):
        got = f"{review.get('apiVersion', '')}, Kind={review.get('kind', '')}"
        raise invalid_response(
            f"expected webhook response of {REVIEW_API_VERSION}, Kind=AdmissionReview, got {got}"
        )
    patch, patch_type = response.get("patch"), response.get("patchType")
    if not mutating and patch:
        raise invalid_response("validating webhook may not return response.patch")
    if not mutating and patch_type is not None:
        raise invalid_response("validating webhook may not return response.patchType")
    if patch and patch_type is None:
        raise invalid_response("webhook returned response.patch but not response.patchType")
    if not patch and patch_type is not None:
        raise invalid_response("webhook returned response.patchType but not response.patch")
    return response


def _patch_operations(
    webhook: Webhook, response: Mapping[str, Any], request: AdmissionRequest
) -> list[dict[str, Any]]:
    if not response.get("patch"):
        return []
    try:
        operations = json.loads(base64.b64decode(response["patch"], validate=True))
    except (binascii.Error, ValueError) as error:
        reason = f"received undecodable patch in webhook response: {error}"
        raise CallFailure(reason) from error
    if not isinstance(operations, list):
        raise CallFailure("received undecodable patch in webhook response: not a JSON array")
    if not operations:
        return []
    if request.obj is None:
        raise _internal_error(
            f'admission webhook "{webhook.name}" attempted to modify the object, which is not '
            "supported for this operation"
        )
    if response.get("patchType") != "JSONPatch":
        raise CallFailure(f'unsupported patch type "{response.get("patchType")}"')
    return operations


# --- statuses ----------------------------------------------------------------------------------


def _internal_error(message: str) -> AdmissionDenied:
    """apierrors.NewInternalError: what a webhook failing closed turns the request into."""
    return AdmissionDenied.from_status(internal_error(message).status)


def _rejection(webhook_name: str, result: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Status for ``allowed: false``, as kube-apiserver's webhook ToStatusErr makes it.

    The webhook's own Status is sent back with three repairs: a code below 400 (or none)
    becomes 400, so a refusal never reads as success; an empty or ``Success`` status becomes
    ``Failure``; the message says which webhook refused. Reason and details stay the webhook's
    (absent when it sent none), and nothing else is added: no resource prefix, whatever the
    code, and the same for mutating and validating webhooks.
    """
    sent = dict(result or {})
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1"}
    status["metadata"] = copy.deepcopy(sent.get("metadata") or {})
    code = sent.get("code") or 0
    status["status"] = (
        sent.get("status") if sent.get("status") not in (None, "", "Success") else "Failure"
    )
    denied_by = f'admission webhook "{webhook_name}" denied the request'
    explanation = sent.get("message") or sent.get("reason")
    status["message"] = (
        f"{denied_by}: {explanation}" if explanation else f"{denied_by} without explanation"
    )
    if sent.get("reason"):
        status["reason"] = sent["reason"]
    if sent.get("details"):
        status["details"] = copy.deepcopy(sent["details"])
    status["code"] = code if code >= 400 else 400
    return status


# --- CEL ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _cel_environment() -> tuple[Any, Any]:
    """The CEL module and an environment declaring what matchConditions may use."""
    cel = importlib.import_module("cel_expr_python.cel")
    optional = importlib.import_module("cel_expr_python.ext.ext_optional")
    strings = importlib.import_module("cel_expr_python.ext.ext_strings")
    variables = {name: cel.Type.DYN for name in ("object", "oldObject", "request")}
    extensions = [optional.ExtOptional(), strings.ExtStrings()]
    return cel, cel.NewEnv(variables=variables, extensions=extensions)


@functools.lru_cache(maxsize=512)
def _compile(expression: str) -> Any:
    """A checked CEL program; ValueError says why the expression cannot be used."""
    try:
        cel, environment = _cel_environment()
    except ModuleNotFoundError as error:
        raise ValueError(
            "matchConditions need the CEL runtime cel-expr-python (Python 3.11+), "
            "which is not installed"
        ) from error
    try:
        program = environment.compile(expression)
    except RuntimeError as error:
        reason = str(error).removeprefix("INVALID_ARGUMENT: ")
        if "'authorizer" in reason:
            reason += " (the in-memory API server has no CEL authorizer)"
        raise ValueError(f"compilation failed: {reason}") from error
    if not any(program.return_type() == allowed for allowed in (cel.Type.BOOL, cel.Type.DYN)):
        raise ValueError(f"must evaluate to bool, not {program.return_type().name().lower()}")
    return program


def _evaluate(condition: _Condition, activation: Mapping[str, Any]) -> bool:
    cel, _ = _cel_environment()
    try:
        value = condition.program.eval(data=activation)
    except RuntimeError as error:
        detail: Any = error
    else:
        if value.type() == cel.Type.BOOL:
            return bool(value.value())
        is_error = value.type() == cel.Type.ERROR
        detail = value.value() if is_error else f"must evaluate to bool, got {value.type().name()}"
    raise _ConditionError(f"expression '{condition.expression}' resulted in error: {detail}")


# --- reading configurations --------------------------------------------------------------------


class _Issues(list[FieldError]):
    """The field errors of one configuration, collected so all of them are reported at once."""

    def choice(self, spec: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...]) -> Any:
        value = spec.get(key)
        if value is None:
            self.append(_required(f"{path}.{key}", f"must specify one of {', '.join(allowed)}"))
        elif value not in allowed:
            self.append(_unsupported(f"{path}.{key}", value, allowed))
        return value

    def require(self, spec: Mapping[str, Any], keys: Iterable[str], path: str) -> None:
        self.extend(_required(f"{path}.{key}") for key in keys if not spec.get(key))


def _unsupported(path: str, value: Any, allowed: Iterable[str]) -> FieldError:
    supported = ", ".join(f'"{choice}"' for choice in allowed)
    return FieldError(path, value, f"supported values: {supported}", "FieldValueNotSupported")


def _required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, None, detail, "FieldValueRequired")


def _forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, None, detail, "FieldValueForbidden")


def _duplicate(path: str, value: Any) -> FieldError:
    return FieldError(path, value, "", "FieldValueDuplicate")


def _parse(obj: Mapping[str, Any], mutating: bool) -> list[Webhook]:
    kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
    name = obj.get("metadata", {}).get("name", "")
    issues = _Issues()
    webhooks, seen = [], set()
    for index, spec in enumerate(obj.get("webhooks") or []):
        path = f"webhooks[{index}]"
        if spec.get("name") in seen:
            issues.append(_duplicate(f"{path}.name", spec.get("name")))
        seen.add(spec.get("name"))
        webhooks.append(_parse_webhook(spec, mutating, path, issues))
    if issues:
        raise invalid(ADMISSION_GROUP, kind, name, list(issues))
    return webhooks


def _parse_webhook(spec: Mapping[str, Any], mutating: bool, path: str, issues: _Issues) -> Webhook:
    """One webhook with the v1 defaults applied; problems go to ``issues``."""
    defaulted = {
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "timeoutSeconds": _DEFAULT_TIMEOUT_SECONDS,
        **({"reinvocationPolicy": "Never"} if mutating else {}),
        **spec,
    }
    _check_name(defaulted.get("name"), f"{path}.name", issues)
    issues.choice(defaulted, "sideEffects", path, _SIDE_EFFECTS)
    issues.choice(defaulted, "failurePolicy", path, _FAILURE_POLICIES)
    issues.choice(defaulted, "matchPolicy", path, _MATCH_POLICIES)
    if mutating:
        issues.choice(defaulted, "reinvocationPolicy", path, _REINVOCATION_POLICIES)
    timeout = defaulted["timeoutSeconds"]
    if not isinstance(timeout, int) or not 1 <= timeout <= 30:
        detail = "the timeout value must be between 1 and 30 seconds"
        issues.append(FieldError(f"{path}.timeoutSeconds", timeout, detail))
    versions = tuple(defaulted.get("admissionReviewVersions") or ())
    if not any(version in _REVIEW_VERSIONS for version in versions):
        detail = f"must specify one of {', '.join(_REVIEW_VERSIONS)}"
        issues.append(_required(f"{path}.admissionReviewVersions", detail))
    client = defaulted.get("clientConfig") or {}
    _check_client_config(client, f"{path}.clientConfig", issues)
    rules = tuple(defaulted.get("rules") or ())
    for index, rule in enumerate(rules):
        _check_rule(rule, f"{path}.rules[{index}]", issues)
    selectors = {}
    for key in ("namespaceSelector", "objectSelector"):
        selectors[key] = defaulted.get(key) or {}
        _check_selector(selectors[key], f"{path}.{key}", issues)
    return Webhook(
        name=defaulted.get("name", ""),
        mutating=mutating,
        url=client.get("url"),
        service=client.get("service"),
        ca_bundle=client.get("caBundle", ""),
        rules=rules,
        failure_policy=defaulted["failurePolicy"],
        namespace_selector=selectors["namespaceSelector"],
        object_selector=selectors["objectSelector"],
        timeout_seconds=timeout,
        review_versions=versions,
        match_conditions=_conditions(defaulted.get("matchConditions") or [], path, issues),
    )


def _check_name(name: Any, path: str, issues: _Issues) -> None:
    """Webhook names are fully qualified, so two vendors' webhooks cannot collide."""
    if not name:
        issues.append(_required(path))
        return
    problems = validate_dns1123_subdomain(name, path)
    if not problems and name.count(".") < 2:
        detail = "should be a domain with at least three segments separated by dots"
        problems.append(FieldError(path, name, detail))
    issues.extend(problems)


def _check_client_config(client: Mapping[str, Any], path: str, issues: _Issues) -> None:
    url, service = client.get("url"), client.get("service")
    if (url is None) == (service is None):
        issues.append(_required(path, "exactly one of url or service is required"))
    elif url is not None:
        for problem in _url_problems(url):
            issues.append(FieldError(f"{path}.url", url, problem))
    else:
        issues.require(service or {}, ("namespace", "name"), f"{path}.service")
    try:
        base64.b64decode(client.get("caBundle", ""), validate=True)
    except (binascii.Error, ValueError):
        issues.append(FieldError(f"{path}.caBundle", "<bytes>", "must be base64 encoded"))


def _url_problems(url: str) -> list[str]:
    parts = urlsplit(url)
    checks: list[tuple[bool, str]] = [
        (parts.scheme != "https", "'https' is the only allowed URL scheme"),
        (not parts.hostname, "host must be specified"),
        (bool(parts.username or parts.password), "user information is not permitted in the URL"),
        (bool(parts.fragment), "fragments are not permitted in the URL"),
        (bool(parts.query), "query parameters are not permitted in the URL"),
    ]
    return [problem for failed, problem in checks if failed]


def _check_rule(rule: Mapping[str, Any], path: str, issues: _Issues) -> None:
    issues.require(rule, ("operations", "apiGroups", "apiVersions", "resources"), path)
    for index, operation in enumerate(rule.get("operations") or []):
        if operation not in _OPERATIONS:
            issues.append(_unsupported(f"{path}.operations[{index}]", operation, _OPERATIONS))
    if "scope" in rule:
        issues.choice(rule, "scope", path, _SCOPES)


def _check_selector(selector: Mapping[str, Any], path: str, issues: _Issues) -> None:
    for index, term in enumerate(selector.get("matchExpressions") or []):
        where = f"{path}.matchExpressions[{index}]"
        operator, values = term.get("operator"), term.get("values") or []
        issues.require(term, ("key",), where)
        if operator not in _SELECTOR_OPERATORS:
            detail = "not a valid selector operator"
            issues.append(FieldError(f"{where}.operator", operator, detail))
        elif operator in ("In", "NotIn") and not values:
            detail = "must be specified when `operator` is 'In' or 'NotIn'"
            issues.append(_required(f"{where}.values", detail))
        elif operator in ("Exists", "DoesNotExist") and values:
            detail = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            issues.append(_forbidden(f"{where}.values", detail))


def _conditions(
    specs: list[Mapping[str, Any]], path: str, issues: _Issues
) -> tuple[_Condition, ...]:
    conditions, seen = [], set()
    for index, spec in enumerate(specs):
        where = f"{path}.matchConditions[{index}]"
        issues.require(spec, ("name", "expression"), where)
        if spec.get("name") in seen:
            issues.append(_duplicate(f"{where}.name", spec.get("name")))
        seen.add(spec.get("name"))
        expression = spec.get("expression") or ""
        if not expression:
            continue
        try:
            conditions.append(_Condition(expression, _compile(expression)))
        except ValueError as error:
            issues.append(FieldError(f"{where}.expression", expression, str(error)))
    return tuple(conditions)
