"""Kubernetes resource quantities (``1.5``, ``500m``, ``2Gi``, ``1e3``): read, add, compare, print.

ResourceQuota and every ResourceList use this syntax, and a quota that refused ``cpu: 1.5``
where ResourceQuota accepts it (HNC's did) would surprise everyone; so parsing follows
apimachinery's ``ParseQuantity`` and printing its canonical form (``1.5`` prints ``1500m``,
``1000`` prints ``1k``, ``1.5Gi`` prints ``1536Mi``), so that the numbers in our messages read
like kube-apiserver's own. Values are exact fractions, rounded up to the nano as Kubernetes
rounds them, so that sums never drift.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Literal, NamedTuple

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_NUMBER = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(.*)", re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
# How apimachinery's own error message describes the syntax.
_RULE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_BINARY_SUFFIX = {bits: suffix for suffix, bits in _BINARY.items()}
_NANO = Fraction(1, 10**9)


class QuantityError(ValueError):
    """Not a quantity Kubernetes would accept; the message quotes it."""


class Quantity(NamedTuple):
    """An exact amount and the notation it prints in (the one it was written in)."""

    value: Fraction
    format: Format = "DecimalSI"

    def __add__(self, other: object) -> Quantity:
        """The sum, in this quantity's notation (as apimachinery's ``Add`` keeps the receiver's)."""
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity(self.value + other.value, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.value - other.value, self.format)

    def __str__(self) -> str:
        return canonical(self)


ZERO = Quantity(Fraction(0))


def parse(text: str) -> Quantity:
    """Read a quantity as ``resource.ParseQuantity`` does; raises QuantityError."""
    found = _NUMBER.fullmatch(text)
    if found is None:
        raise QuantityError(f"quantity {text!r} must match the regular expression {_RULE}")
    sign, digits, suffix = found.groups()
    number = Fraction(digits if not digits.endswith(".") else digits[:-1])
    fmt: Format
    if suffix in _BINARY:
        fmt, scale = "BinarySI", Fraction(2) ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        fmt, scale = "DecimalSI", Fraction(10) ** _DECIMAL[suffix]
    elif (exponent := _EXPONENT.fullmatch(suffix)) is not None:
        fmt, scale = "DecimalExponent", Fraction(10) ** int(exponent.group(1))
    else:
        raise QuantityError(f"quantity {text!r} has an unknown suffix {suffix!r}")
    value = _round_up_to_nano(number * scale)
    return Quantity(-value if sign == "-" else value, fmt)


def _round_up_to_nano(value: Fraction) -> Fraction:
    """Kubernetes keeps nine decimal places and rounds what is finer away from zero."""
    nanos = value / _NANO
    if nanos.denominator == 1:
        return value
    return Fraction(math.ceil(nanos)) * _NANO


def canonical(quantity: Quantity) -> str:
    """The quantity as apimachinery's ``String`` prints it."""
    value = quantity.value
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if quantity.format == "BinarySI" and magnitude >= 1024 and magnitude.denominator == 1:
        return sign + _binary(int(magnitude))
    return sign + _decimal(magnitude, quantity.format == "DecimalExponent")


def _binary(value: int) -> str:
    bits = 60
    while bits and value % (1 << bits):
        bits -= 10
    return f"{value >> bits}{_BINARY_SUFFIX.get(bits, '')}"


def _decimal(value: Fraction, exponent_notation: bool) -> str:
    """Mantissa and a power of ten that is a multiple of three, the largest that keeps the
    mantissa whole (``1500``, ``1k``, ``1500m``)."""
    exponent = 18
    while exponent > -9 and (value / Fraction(10) ** exponent).denominator != 1:
        exponent -= 3
    mantissa = value / Fraction(10) ** exponent
    whole = math.ceil(mantissa)
    if exponent_notation:
        return f"{whole}e{exponent}" if exponent else str(whole)
    return f"{whole}{_DECIMAL_SUFFIX[exponent]}"


def total(quantities: list[Quantity]) -> Quantity:
    """The sum of ``quantities`` in the notation of the first (zero when there is none)."""
    if not quantities:
        return ZERO
    return Quantity(sum((q.value for q in quantities), Fraction(0)), quantities[0].format)
