"""Deep copies of API objects, made in C: every write copies its object several times.

Objects here are decoded JSON (dicts, lists, strings, numbers, booleans, None), which
``marshal`` copies exactly (types, key order) several times faster than ``copy.deepcopy``;
anything else it cannot take falls back to ``copy.deepcopy``.
"""

from __future__ import annotations

import copy
import marshal
from typing import Any, TypeVar

T = TypeVar("T")


def clone(obj: T) -> T:
    """An independent deep copy of ``obj``."""
    data: Any = obj  # whatever it holds; marshal says when it cannot take it
    try:
        copied: T = marshal.loads(marshal.dumps(data))
    except ValueError:  # not plain data (a str subclass, an object): copy it the slow way
        return copy.deepcopy(obj)
    return copied
