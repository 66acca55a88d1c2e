"""Quantities read and print as apimachinery's resource.Quantity does.

Expected values follow k8s.io/apimachinery/pkg/api/resource (quantity_test.go): ParseQuantity
accepts a signed decimal with a binary (Ki..Ei), decimal (n..E) or exponent suffix, keeps nine
decimal places rounding up, and String prints the canonical form.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from libaccurate.quantity import Quantity, QuantityError, canonical, parse, total


@pytest.mark.parametrize(
    ("text", "value", "printed"),
    [
        ("1.5", Fraction(3, 2), "1500m"),
        ("500m", Fraction(1, 2), "500m"),
        ("2Gi", Fraction(2 * 1024**3), "2Gi"),
        ("1.5Gi", Fraction(3 * 1024**3, 2), "1536Mi"),
        ("1000", Fraction(1000), "1k"),
        ("1500", Fraction(1500), "1500"),
        ("1e3", Fraction(1000), "1e3"),
        ("1E3", Fraction(1000), "1e3"),
        ("0.1n", Fraction(1, 10**9), "1n"),
        (".5", Fraction(1, 2), "500m"),
        ("100Mi", Fraction(100 * 1024**2), "100Mi"),
        ("0", Fraction(0), "0"),
        ("2E", Fraction(2 * 10**18), "2E"),
    ],
)
def test_reads_and_prints_like_kubernetes(text: str, value: Fraction, printed: str) -> None:
    quantity = parse(text)
    assert quantity.value == value
    assert canonical(quantity) == printed


@pytest.mark.parametrize("text", ["", " 1", "1 ", "1x", "abc", "1.5.5", "1e", "Gi", "1Ki1"])
def test_refuses_what_kubernetes_refuses(text: str) -> None:
    with pytest.raises(QuantityError, match="quantity"):
        parse(text)


def test_sums_are_exact_and_keep_the_first_notation() -> None:
    cpu = total([parse("1.5"), parse("500m"), parse("0.1")])
    assert cpu.value == Fraction(21, 10)
    assert str(cpu) == "2100m"
    memory = total([parse("1Gi"), parse("512Mi")])
    assert str(memory) == "1536Mi"
    assert total([]) == Quantity(Fraction(0))
