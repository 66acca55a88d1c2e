"""REST paths of the Kubernetes API, built from a resource's group, version and plural.

Pure string work, so that the pure modules (and the plugin's decisions) can name the objects
they are about without importing the network adapter that requests them.
"""

from __future__ import annotations

import re

# What ``quote(..., safe="")`` leaves as it is; every Kubernetes name is made of these.
_UNQUOTED = re.compile(r"[A-Za-z0-9_.~-]*")


def resource_path(
    group: str,
    version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a collection or an object; ``group`` "" is the core group. Names are
    percent-encoded, so that a name typed by a user can never reach another path."""
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    parts = [prefix]
    if namespace:
        parts.append(f"namespaces/{_quoted(namespace)}")
    parts.append(plural)
    if name:
        parts.append(_quoted(name))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


def _quoted(name: str) -> str:
    """``quote(name, safe="")``; urllib.parse, with ipaddress, is imported only for a name that
    needs quoting (5 % of a ``kubectl accurate list``, whose names never do)."""
    if _UNQUOTED.fullmatch(name):
        return name
    from urllib.parse import quote

    return quote(name, safe="")
