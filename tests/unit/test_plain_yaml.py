"""The kubeconfig reader that spares ``list`` PyYAML's import (issue 18) answers as PyYAML's safe
loader does, or declines: on the kubeconfigs real tools write, on any document PyYAML itself
writes, and on those documents broken at random."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libaccurate.network.plain_yaml import NotPlain, load

# The loader kubeconfig.py falls back to.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# What kubectl, kind and the cloud CLIs write, as they write it (go-yaml folds long plain
# scalars over lines and does not indent a sequence under its key); and a hand-made one.
KIND = b"""apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMvakNDQWVhZ0F3SUJBZ0
    server: https://127.0.0.1:41023
  name: kind-kind
contexts:
- context:
    cluster: kind-kind
    user: kind-kind
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSURJVENDQWdtZ0F3SUJBZ0
    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBcS9
"""
GKE = b"""apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    server: https://34.79.12.200
  name: gke_acme-prod_europe-west1_main
contexts:
- context:
    cluster: gke_acme-prod_europe-west1_main
    namespace: team-a
    user: gke_acme-prod_europe-west1_main
  name: gke_acme-prod_europe-west1_main
current-context: gke_acme-prod_europe-west1_main
kind: Config
preferences: {}
users:
- name: gke_acme-prod_europe-west1_main
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      installHint: Install gke-gcloud-auth-plugin for use with kubectl by following
        https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin
      provideClusterInfo: true
"""
EKS = b"""apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    server: https://5E1D0CEXAMPLEA591B746AFC5AB30262.yl4.eu-west-1.eks.amazonaws.com
  name: arn:aws:eks:eu-west-1:111122223333:cluster/main
contexts:
- context:
    cluster: arn:aws:eks:eu-west-1:111122223333:cluster/main
    user: arn:aws:eks:eu-west-1:111122223333:cluster/main
  name: arn:aws:eks:eu-west-1:111122223333:cluster/main
current-context: arn:aws:eks:eu-west-1:111122223333:cluster/main
kind: Config
preferences: {}
users:
- name: arn:aws:eks:eu-west-1:111122223333:cluster/main
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - --region
      - eu-west-1
      - eks
      - get-token
      - --cluster-name
      - main
      - --output
      - json
      command: aws
      env:
      - name: AWS_PROFILE
        value: prod
      interactiveMode: IfAvailable
      provideClusterInfo: false
"""
HAND_MADE = b"""---
# the team's cluster
apiVersion: v1
kind: Config
current-context: "team"

clusters:
  - name: team
    cluster:
      server: 'https://kube.example.com:6443'
      insecure-skip-tls-verify: true
      tls-server-name: "kube.internal"
users:
  - name: me
    user:
      token: 932793f739309013f209731289aae8bb
      tokenFile:
contexts:
  - name: team
    context: {cluster: team, user: me}
"""
# A cluster reached through a tunnel or a forwarded port, as `kubectl config set-cluster
# --server https://127.0.0.1:16443 --tls-server-name 10.96.0.1` writes it.
TUNNEL = b"""apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    server: https://127.0.0.1:16443
    tls-server-name: 10.96.0.1
  name: tunnel
contexts:
- context:
    cluster: tunnel
    user: tunnel
  name: tunnel
current-context: tunnel
kind: Config
preferences: {}
users:
- name: tunnel
  user:
    token: 932793f739309013f209731289aae8bb
"""
REAL = {"kind": KIND, "gke": GKE, "eks": EKS, "tunnel": TUNNEL}

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**12),
    st.sampled_from(
        [
            "",
            "~",
            "null",
            "NULL",
            "yes",
            "No",
            "ON",
            "off",
            "y",
            "0",
            "07",
            "08",
            "0x1F",
            "0b101",
            "1_000",
            "1:20",
            "1.5",
            ".5",
            "127.0.0.1",
            "1.2.",
            "1..2",
            "..5",
            "-1.2.3",
            "1:2.3.4",
            "2001-12-14 21:59:43.10.5",
            "-.inf",
            ".NaN",
            "1e5",
            "2001-12-14",
            "2001-12-14 21:59:43.10",
            "-",
            "--flag",
            "-x",
            "+",
            "+1",
            "- a",
            "a: b",
            "a:b",
            "a #b",
            "a#b",
            "#a",
            "it's",
            'say "hi"',
            "back\\slash",
            "tab\there",
            "é",
            "<<",
            "=",
            "&a",
            "*a",
            "!a",
            "%a",
            "@a",
            "`a",
            "|",
            ">",
            "?",
            "?a",
            ":a",
            "[a]",
            "{a}",
            "{}",
            "[]",
            "a,b",
            " lead",
            "trail ",
            "two  spaces",
            "line\nbreak",
            "932793f7",
            "https://127.0.0.1:6443",
            "kind-kind",
            "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
        ]
    ),
    st.text("ab -:#'\"0x.\\", max_size=12),
    st.text("0123456789.:_-+eE", max_size=10),
    st.lists(st.sampled_from(["word", "longer-word", "https://example.com/a#b"]), max_size=12).map(
        " ".join
    ),
)
KEYS = st.one_of(
    st.sampled_from(["name", "cluster", "user", "server", "args", "a b", "yes", "1", "<<", "?"]),
    st.text("abc-_:", min_size=1, max_size=6),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=20,
)
STYLES = st.fixed_dictionaries(
    {
        "default_flow_style": st.sampled_from([False, None]),
        "indent": st.sampled_from([2, 4]),
        "width": st.sampled_from([20, 80, 10**6]),
        "sort_keys": st.booleans(),
        "explicit_start": st.booleans(),
    }
)
# Simple kubeconfig-like values: what the reader must read itself, not decline.
# (No word of YAML 1.1's booleans or nulls starts with one of these letters.)
PLAIN_WORDS = st.builds(
    str.__add__, st.sampled_from("abcdhkz"), st.text("abcdefghijklmnopqrstuvwxyz0123456789./_-")
)
KUBECONFIG_LIKE = st.dictionaries(
    PLAIN_WORDS,
    st.recursive(
        PLAIN_WORDS | st.booleans(),
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=4),
            st.dictionaries(PLAIN_WORDS, inner, min_size=1, max_size=4),
        ),
        max_leaves=20,
    ),
    min_size=1,
)


def typed(value: Any) -> Any:
    """``value`` with each part's type beside it, so that 1 and True, or "1" and 1, differ."""
    if isinstance(value, dict):
        return ("dict", [(typed(key), typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [typed(item) for item in value])
    return (type(value).__name__, value)


def agrees_or_declines(data: bytes) -> bool:
    """The reader's answer is PyYAML's; where PyYAML fails, the reader declined. Returns
    whether the reader answered."""
    try:
        expected: Any = ("value", typed(yaml.load(data, Loader=LOADER)))
    except yaml.YAMLError:
        expected = ("error",)
    try:
        got = ("value", typed(load(data)))
    except NotPlain:
        return False
    assert got == expected, data.decode(errors="replace")
    return True


@pytest.mark.parametrize("name", sorted(REAL))
def test_the_kubeconfigs_tools_write_are_read_without_pyyaml(name: str) -> None:
    assert typed(load(REAL[name])) == typed(yaml.safe_load(REAL[name]))


def test_a_folded_scalar_is_one_line_as_in_pyyaml() -> None:
    user = load(GKE)["users"][0]["user"]["exec"]
    assert user["installHint"] == (
        "Install gke-gcloud-auth-plugin for use with kubectl by following "
        "https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl"
        "#install_plugin"
    )


def test_a_hand_made_kubeconfig_with_comments_and_flow_style_goes_to_pyyaml() -> None:
    with pytest.raises(NotPlain):
        load(HAND_MADE)
    without_flow = HAND_MADE.replace(
        b"context: {cluster: team, user: me}", b"context:\n      cluster: team\n      user: me"
    )
    assert typed(load(without_flow)) == typed(yaml.safe_load(without_flow))


@pytest.mark.parametrize(
    "text",
    [
        b"a: &x 1\nb: *x\n",
        b"a: !!str 1\n",
        b"a: |\n  text\n",
        b"a: >\n  text\n",
        b"a:\tb\n",
        b"a: b\r\n",
        b"a: \xc3\xa9\n",
        b"a: b # note\n",
        b"a: [b, c]\n",
        b'a: "esc\\n"\n',
        b"a: 1.5\n",
        b"a: 0x1F\n",
        b"a: 2001-12-14\n",
        b"a: b\n---\nc: d\n",
        b"%YAML 1.1\n---\na: b\n",
        b"a: b\n  c: d\n",
        b"yes: b\n",
        b"".join(b" " * depth + b"a:\n" for depth in range(2000)),
    ],
)
def test_what_it_does_not_read_goes_to_pyyaml(text: bytes) -> None:
    with pytest.raises(NotPlain):
        load(text)


@pytest.mark.parametrize(
    "text",
    [
        b"a:\n- b\n  c: d\n",
        b"a:\n  - b\n  c: d\n",
        b"- a\nb: c\n",
        b"a: b\nc\n",
        b"a:\n    b: 1\n  c: 2\n",
        b"-\n- a\n",
        b"- - a\n  - b\n- c\n",
        b"-   a: 1\n    b: 2\n",
        b"a :\n",
        b"a: b  \nc: 'd'   \n",
        b": a\n",
        b"a: b\n  c\n\n  d\n",
        b"a: b\n  # c\n  d\n",
        b"a: b\n  - c\n",
        b"  ---\na: b\n",
        b"a: ''\nb: \"\"\nc: 'it''s'\n",
        b"a: 2001-12-14\n  21:59:43.10\n",
        b"a: 932793f739309013f209731289aae8bb\nb: 1234-5\nc: -12\nd: 0o17\n",
    ],
)
def test_edges_are_declined_or_read_as_pyyaml_reads_them(text: bytes) -> None:
    agrees_or_declines(text)


@given(DOCUMENTS, STYLES)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_whatever_pyyaml_writes_is_read_as_pyyaml_reads_it(
    document: Any, style: dict[str, Any]
) -> None:
    agrees_or_declines(yaml.safe_dump(document, **style).encode())


@given(KUBECONFIG_LIKE, STYLES)
@settings(max_examples=100, deadline=None)
def test_simple_documents_in_block_style_are_never_declined(
    document: Any, style: dict[str, Any]
) -> None:
    text = yaml.safe_dump(document, **{**style, "default_flow_style": False}).encode()
    assert agrees_or_declines(text), text.decode()


@given(DOCUMENTS, STYLES, st.data())
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_broken_documents_are_declined_or_read_as_pyyaml_reads_them(
    document: Any, style: dict[str, Any], data: st.DataObject
) -> None:
    text = bytearray(yaml.safe_dump(document, **style).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        change = data.draw(st.sampled_from(["insert", "delete", "duplicate line"]))
        if change == "insert":
            text[at:at] = data.draw(st.sampled_from([b" ", b"  ", b"\n", b"- ", b": ", b"#", b"'"]))
        elif change == "delete":
            del text[at : at + data.draw(st.integers(1, 3))]
        else:
            start = text.rfind(b"\n", 0, at) + 1
            end = text.find(b"\n", at)
            text[start:start] = text[start : end + 1 if end >= 0 else len(text)]
    agrees_or_declines(bytes(text))
