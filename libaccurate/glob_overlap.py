"""Whether two glob patterns select a common key, and the shortest such key as an example.

Two globs overlap when some key matches both (with Go's ``path.Match``, as ``globs`` has it).
That is not the intersection of two regular expressions read the usual way: after a ``*``, Go
keeps the first place where the next run of terms fits and never goes back
(docs/design-notes.md, "Config"). So each pattern is run here as the scan Go makes, one
character at a time, with every candidate start of the current run still in progress; the two
scans are explored side by side, breadth first, over one character of each class of
characters the patterns cannot tell apart. The search ends because a scan has finitely many
states.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from libaccurate.globs import CharClass, Term, parse_glob

# Characters a label or annotation key is usually made of, preferred in the example key.
_PLAIN = "abcdefghijklmnopqrstuvwxyz0123456789-._/ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LAST_CODE_POINT = 0x10FFFF


class _Scan(NamedTuple):
    """Where Go's scan of one pattern stands: in chunk number ``chunk``, with the lengths of the
    candidate matches of that chunk in progress, and whether a new candidate may still start
    (after a ``*``, until a ``/`` is passed). ``chunk`` past the last one: the pattern is
    used up."""

    chunk: int
    partial: frozenset[int]
    open: bool


# Both scans, and whether a character was read yet.
_Node = tuple[_Scan, _Scan, bool]


class _Pattern:
    """One pattern's chunks, and the steps of Go's scan over them."""

    def __init__(self, pattern: str) -> None:
        self.chunks = parse_glob(pattern)

    def start(self, index: int = 0) -> _Scan:
        star = index < len(self.chunks) and self.chunks[index].star
        return _Scan(index, frozenset({0}), star)

    def _tail(self, index: int) -> bool:
        """A trailing ``*``: the rest of the key must hold no ``/``."""
        return self._last(index) and not self.chunks[index].terms

    def _last(self, index: int) -> bool:
        return index == len(self.chunks) - 1

    def step(self, scan: _Scan, char: str) -> _Scan | None:
        """The scan after one more character, or None when no key going on this way matches."""
        if scan.chunk == len(self.chunks):
            return None
        if self._tail(scan.chunk):
            return None if char == "/" else scan
        terms = self.chunks[scan.chunk].terms
        partial = {k + 1 for k in scan.partial if k < len(terms) and _fits(terms[k], char)}
        still_open = scan.open and char != "/"
        if still_open:
            partial.add(0)
        if len(terms) in partial and not self._last(scan.chunk):
            # The earliest candidate is the first to be complete: Go keeps it.
            return self.start(scan.chunk + 1)
        if not partial:
            return None
        return _Scan(scan.chunk, frozenset(partial), still_open)

    def accepts(self, scan: _Scan) -> bool:
        """Whether the key read so far, ending here, matches."""
        if scan.chunk == len(self.chunks) or self._tail(scan.chunk):
            return True
        return self._last(scan.chunk) and len(self.chunks[scan.chunk].terms) in scan.partial

    def terms(self) -> Iterable[Term]:
        return (term for chunk in self.chunks for term in chunk.terms)


def _fits(term: Term, char: str) -> bool:
    if term is None:
        return char != "/"
    if isinstance(term, CharClass):
        return term.matches(char)
    return term == char


def common_key(first: str, second: str) -> str | None:
    """The shortest key (never empty: no label or annotation key is) that matches both
    patterns, preferring plain characters, or None when no key does; raises GlobError when a
    pattern is malformed."""
    patterns = (_Pattern(first), _Pattern(second))
    alphabet = _representatives(term for pattern in patterns for term in pattern.terms())
    begin: _Node = (patterns[0].start(), patterns[1].start(), False)
    came_from: dict[_Node, tuple[_Node, str] | None] = {begin: None}
    queue = deque([begin])
    while queue:
        node = queue.popleft()
        one, other, some = node
        if some and patterns[0].accepts(one) and patterns[1].accepts(other):
            return _spelled(came_from, node)
        for char in alphabet:
            after_one, after_other = patterns[0].step(one, char), patterns[1].step(other, char)
            if after_one is None or after_other is None:
                continue
            after: _Node = (after_one, after_other, True)
            if after not in came_from:
                came_from[after] = (node, char)
                queue.append(after)
    return None


def _spelled(came_from: dict[_Node, tuple[_Node, str] | None], node: _Node) -> str:
    chars = []
    step = came_from[node]
    while step is not None:
        node, char = step
        chars.append(char)
        step = came_from[node]
    return "".join(reversed(chars))


def _representatives(terms: Iterable[Term]) -> tuple[str, ...]:
    """One character of every class that no term (nor ``/``, which ``*`` and ``?`` never
    match) tells apart: the code points are cut where a literal or a class range starts or
    ends, and each piece is represented by one of its characters, a plain one if it has one."""
    cuts = {0, ord("/"), ord("/") + 1}
    for term in terms:
        bounds = [(term, term)] if isinstance(term, str) else []
        if isinstance(term, CharClass):
            bounds = list(term.ranges)
        for lo, hi in bounds:
            cuts.update((ord(lo), ord(hi) + 1))
    edges = sorted(cut for cut in cuts if cut <= _LAST_CODE_POINT)
    pieces = zip(edges, [*edges[1:], _LAST_CODE_POINT + 1], strict=True)
    chosen = [_pick(lo, hi) for lo, hi in pieces]
    return tuple(sorted(chosen, key=_plainness))


def _pick(lo: int, hi: int) -> str:
    """A character in ``[lo, hi)``, a plain one when there is one."""
    plain = [char for char in _PLAIN if lo <= ord(char) < hi]
    return plain[0] if plain else chr(lo)


def _plainness(char: str) -> tuple[int, str]:
    return (_PLAIN.index(char) if char in _PLAIN else len(_PLAIN), char)
