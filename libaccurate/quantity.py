"""Kubernetes quantities (``1.5``, ``500m``, ``2Gi``, ``1e3``) and resource lists of them,
read, summed, compared and written back exactly as apimachinery's ``resource.Quantity`` and
apiserver's ``quota/v1`` helpers do.

Quota messages and ``status.used`` show quantities in their canonical form (``1.5`` is written
``1500m``, ``1024Mi`` is ``1Gi``), and a refusal lists resources sorted by name; anything that
prints or compares quota numbers must agree with kube-apiserver to the character, so the rules
live here once: parsing and canonical form follow ``apimachinery/pkg/api/resource/quantity.go``
(ParseQuantity, CanonicalizeBytes), sums ``Quantity.Add`` (a zero takes the other's format), and
the list helpers ``apiserver/pkg/quota/v1/resources.go`` (Add, Subtract, Mask, LessThanOrEqual)
and the quota admission's ``prettyPrint``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import FrozenInstanceError
from fractions import Fraction

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

FORMAT_WRONG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
BAD_SUFFIX = "unable to parse quantity's suffix"

_SHAPE = re.compile(r"([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)")
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
# The power of 2 or of 10 each suffix stands for.
BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL_SUFFIXES = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIX = {0: "", **{exponent: suffix for suffix, exponent in BINARY_SUFFIXES.items()}}
NANOS = 10**9  # in one unit


class QuantityError(ValueError):
    """Text that is not a quantity; the message is apimachinery's."""


class Quantity:
    """An exact amount and the format it was written in, which decides how it is printed;
    immutable. Amounts are whole numbers of nanos (``nanos``): parsing rounds a finer one up,
    and so does building one from a finer ``value``. Sums and comparisons work on those
    integers, not on Fractions: a quota review adds and compares a few dozen quantities, and
    Fraction arithmetic was most of what they cost it. ``value`` is the amount in units."""

    __slots__ = ("_value", "format", "nanos")

    nanos: int
    format: str
    _value: Fraction

    def __init__(self, value: Fraction | int, format: str = DECIMAL_SI) -> None:
        _SET_NANOS(self, _whole_nanos(value))
        _SET_FORMAT(self, format)

    @property
    def value(self) -> Fraction:
        """The amount in units, made when first asked: parsed quantities are shared, and
        arithmetic makes many that nobody asks."""
        try:
            return self._value
        except AttributeError:
            value = Fraction(self.nanos, NANOS)
            _SET_VALUE(self, value)
            return value

    def __str__(self) -> str:
        return _canonical(self.nanos, self.format)

    def __repr__(self) -> str:
        return f"Quantity({self.value!r}, {self.format!r})"

    def __add__(self, other: Quantity) -> Quantity:
        # Quantity.Add: a zero takes the format of what is added to it.
        fmt = other.format if self.nanos == 0 else self.format
        return of_nanos(self.nanos + other.nanos, fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        fmt = other.format if self.nanos == 0 else self.format
        return of_nanos(self.nanos - other.nanos, fmt)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        return self.nanos >= other.nanos

    def __eq__(self, other: object) -> bool:
        """Equal amounts are equal whatever their format, as Quantity.Cmp says."""
        return isinstance(other, Quantity) and self.nanos == other.nanos

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Callable[[int, str], Quantity], tuple[int, str]]:
        """Copies and pickles are made from the nanos, as attributes cannot be set."""
        return of_nanos, (self.nanos, self.format)


# The slots' own setters, which the frozen __setattr__ leaves to Quantity's constructors.
_SET_NANOS = vars(Quantity)["nanos"].__set__
_SET_FORMAT = vars(Quantity)["format"].__set__
_SET_VALUE = vars(Quantity)["_value"].__set__


def of_nanos(nanos: int, format: str = DECIMAL_SI) -> Quantity:
    """The quantity of ``nanos`` nanos, made without a Fraction (the arithmetic's constructor)."""
    quantity = object.__new__(Quantity)
    _SET_NANOS(quantity, nanos)
    _SET_FORMAT(quantity, format)
    return quantity


ZERO = of_nanos(0)


def count(number: int) -> Quantity:
    """An object count, as the evaluators make them (``resource.NewQuantity(n, DecimalSI)``)."""
    return of_nanos(number * NANOS)


def parse(text: str | int | float) -> Quantity:
    """A quantity from its text, or from a JSON number (YAML ``cpu: 1.5`` arrives as one).

    Like ParseQuantity: surrounding spaces are ignored, a non-zero amount finer than a nano is
    rounded up (away from zero) to one, and a binary amount below 1 is decimal."""
    if type(text) is str:  # nearly always: a quota review reads a score of stored ones
        return _parse_text(text)
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise QuantityError(FORMAT_WRONG)
    return _parse_text(repr(text) if isinstance(text, float) else str(text))


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Quantity:
    """``parse`` of text; remembered, as the same few quantities are read on every write."""
    text = text.strip()
    shape = _SHAPE.fullmatch(text)
    if not shape:
        raise QuantityError(FORMAT_WRONG)
    number, suffix = shape.groups()
    if number.count(".") > 1:  # parseQuantityString stops at the second dot
        raise QuantityError(FORMAT_WRONG)
    whole, _, fraction = number.lstrip("+-").partition(".")
    mantissa = int(whole + fraction or "0")  # Go reads a lone "." as 0
    scale = 9 - len(fraction)  # the power of ten that makes the mantissa nanos
    if suffix in BINARY_SUFFIXES:
        fmt, mantissa = BINARY_SI, mantissa << BINARY_SUFFIXES[suffix]
    elif suffix in DECIMAL_SUFFIXES:
        fmt, scale = DECIMAL_SI, scale + DECIMAL_SUFFIXES[suffix]
    elif exponent := _EXPONENT.fullmatch(suffix):
        fmt, scale = DECIMAL_EXPONENT, scale + int(exponent.group(1))
    else:
        raise QuantityError(BAD_SUFFIX)
    nanos = mantissa * 10**scale if scale >= 0 else -(-mantissa // 10**-scale)  # rounded up
    if fmt == BINARY_SI and 0 < nanos < NANOS:
        fmt = DECIMAL_SI
    return of_nanos(-nanos if number.startswith("-") else nanos, fmt)


def canonical(text: str | int | float) -> str:
    """How the API server writes a quantity back (``"1.5"`` -> ``"1500m"``)."""
    return str(parse(text))


def round_up(quantity: Quantity, exponent: int) -> Quantity:
    """Quantity.RoundUp: to a whole number of 10**exponent, away from zero (the API server
    rounds every ResourceList to milli-units, -3, and a claim's storage to bytes, 0). Amounts
    are whole nanos, so nothing finer than a nano needs rounding."""
    if exponent <= -9:
        return quantity
    step = 10 ** (exponent + 9)
    whole = -(-abs(quantity.nanos) // step) * step
    return of_nanos(whole if quantity.nanos >= 0 else -whole, quantity.format)


def _whole_nanos(value: Fraction | int) -> int:
    """The amount in nanos, a finer one rounded up (away from zero) as parsing does."""
    nanos, finer = divmod(value.numerator * NANOS, value.denominator)
    return nanos + 1 if finer and nanos >= 0 else nanos  # a floor is away from zero below it


def _canonical(nanos: int, fmt: str) -> str:
    """CanonicalizeBytes: binary only for whole amounts of at least 1024 in magnitude,
    otherwise a mantissa without trailing zeros and an exponent that is a multiple of 3."""
    if fmt == BINARY_SI and (abs(nanos) < 1024 * NANOS or nanos % NANOS):
        fmt = DECIMAL_SI
    if fmt == BINARY_SI:
        mantissa, exponent = nanos // NANOS, 0
        while mantissa % 1024 == 0 and exponent < 60:
            mantissa, exponent = mantissa // 1024, exponent + 10
        return f"{mantissa}{_BINARY_SUFFIX[exponent]}"
    mantissa, exponent = _decimal_parts(nanos)
    if fmt == DECIMAL_EXPONENT or exponent not in _DECIMAL_SUFFIX:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def _decimal_parts(nanos: int) -> tuple[int, int]:
    """The amount as mantissa * 10**exponent, exponent a multiple of 3 and as large as it can
    be with a whole mantissa."""
    if nanos == 0:
        return 0, 0
    mantissa, exponent = nanos, -9
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    shift = exponent % 3
    return mantissa * 10**shift, exponent - shift


# -- resource lists (quota/v1/resources.go) -----------------------------------------------------

ResourceList = Mapping[str, Quantity]


def parse_list(raw: Mapping[str, str | int | float] | None) -> dict[str, Quantity]:
    """A ResourceList as stored (``{"cpu": "1500m"}``) with its quantities read."""
    return {name: parse(text) for name, text in (raw or {}).items()}


def render_list(resources: ResourceList) -> dict[str, str]:
    """A ResourceList as the API server writes it (canonical quantities)."""
    return {name: str(quantity) for name, quantity in sorted(resources.items())}


def add(first: ResourceList, second: ResourceList) -> dict[str, Quantity]:
    """quota.Add: the sum of every resource in either list."""
    result = dict(first)
    for name, quantity in second.items():
        result[name] = result[name] + quantity if name in result else quantity
    return result


def subtract(first: ResourceList, second: ResourceList) -> dict[str, Quantity]:
    """quota.Subtract: ``first`` minus ``second`` for every resource in either list."""
    result = dict(first)
    for name, quantity in second.items():
        result[name] = result.get(name, ZERO) - quantity
    return result


def subtract_non_negative(first: ResourceList, second: ResourceList) -> dict[str, Quantity]:
    """quota.SubtractWithNonNegativeResult: a difference below zero counts as zero."""
    return {
        name: quantity if quantity.nanos >= 0 else of_nanos(0, quantity.format)
        for name, quantity in subtract(first, second).items()
    }


def mask(resources: ResourceList, names: Iterable[str]) -> dict[str, Quantity]:
    """quota.Mask: only the resources named."""
    wanted = set(names)
    return {name: quantity for name, quantity in resources.items() if name in wanted}


def remove_zeros(resources: ResourceList) -> dict[str, Quantity]:
    return {name: quantity for name, quantity in resources.items() if quantity.nanos != 0}


def exceeded(used: ResourceList, hard: ResourceList) -> list[str]:
    """quota.LessThanOrEqual's complement: the resources of ``used`` above their ``hard``
    (a resource ``hard`` does not list is never exceeded), sorted."""
    return sorted(name for name, q in used.items() if name in hard and hard[name] < q)


def equal(first: ResourceList, second: ResourceList) -> bool:
    """quota.Equals: the same resources with the same amounts."""
    return first.keys() == second.keys() and all(first[k] == second[k] for k in first)


def pretty(resources: ResourceList) -> str:
    """How quota admission prints a list in its messages: ``name=quantity`` sorted, by ","."""
    return ",".join(f"{name}={resources[name]}" for name in sorted(resources))
