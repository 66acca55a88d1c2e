"""REST paths of the Kubernetes API, built from a resource's group, version and plural.

Pure string work, so that the pure modules (and the plugin's decisions) can name the objects
they are about without importing the network adapter that requests them.
"""

from __future__ import annotations

from urllib.parse import quote


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
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)
