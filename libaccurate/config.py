"""The controller's configuration file (DESIGN.md 6.1): its shape, loading and validation.

Loading checks everything that can be checked from the file alone; the watches are checked
against the API server's resource lists by ``resolve_watches``, which takes those lists as an
argument so that this module stays pure.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class GroupVersionKind:
    """A kind named the way the config file names it; ``group`` is "" for the core group."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class NamingPolicy:
    """A rule for sub-namespace names: under roots matching ``root``, names must match ``match``."""

    root: str
    match: str


@dataclass(frozen=True)
class Config:
    """A validated configuration; the empty config is valid and propagates nothing."""

    label_keys: tuple[str, ...] = ()
    annotation_keys: tuple[str, ...] = ()
    sub_namespace_label_keys: tuple[str, ...] = ()
    sub_namespace_annotation_keys: tuple[str, ...] = ()
    watches: tuple[GroupVersionKind, ...] = ()
    propagate_label_key_excludes: tuple[str, ...] = ()
    propagate_annotation_key_excludes: tuple[str, ...] = ()
    naming_policies: tuple[NamingPolicy, ...] = ()
