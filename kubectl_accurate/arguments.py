"""The words the commands take as arguments, apart from the code that acts on them, so that
click can check a command line (and print help) without loading that code."""

from __future__ import annotations

from libaccurate.constants import TYPE_ROOT, TYPE_TEMPLATE

NO_TYPE = "none"
TYPES = (TYPE_ROOT, TYPE_TEMPLATE, NO_TYPE)
