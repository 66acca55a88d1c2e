"""libaccurate.quantity against apimachinery's resource.Quantity (quantity.go, quantity_test.go)
and apiserver's quota/v1 list helpers."""

from __future__ import annotations

import copy
import math
import pickle
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libaccurate import quantity
from libaccurate.quantity import Quantity, QuantityError, canonical, parse

# (text, canonical form) as Quantity.String prints what ParseQuantity read.
CANONICAL = [
    ("1.5", "1500m"),
    ("500m", "500m"),
    ("1000m", "1"),
    ("0.1", "100m"),
    ("2Gi", "2Gi"),
    ("1024Mi", "1Gi"),
    ("1.5Gi", "1536Mi"),
    ("0.5Gi", "512Mi"),
    ("1536", "1536"),
    ("12000", "12k"),
    ("1e3", "1e3"),
    ("1E3", "1e3"),
    ("1.5e3", "1500"),
    ("1e-05", "10e-6"),
    ("1.5m", "1500u"),
    ("0.5n", "1n"),  # rounded up to a nano
    ("1.0000000001", "1000000001n"),
    ("-1.5", "-1500m"),
    (" 1 ", "1"),
    (".", "0"),
    ("1.", "1"),
    ("0", "0"),
    (1.5, "1500m"),  # a JSON number, as YAML's cpu: 1.5 arrives
    (2, "2"),
]


@pytest.mark.parametrize(("text", "expected"), CANONICAL)
def test_canonical_form_is_apimachinerys(text: str | float, expected: str) -> None:
    assert canonical(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", quantity.FORMAT_WRONG),
        ("abc", quantity.FORMAT_WRONG),
        ("1KB", quantity.FORMAT_WRONG),
        ("1..2", quantity.FORMAT_WRONG),
        ("1.5.5", quantity.FORMAT_WRONG),
        ("1Ki2", quantity.BAD_SUFFIX),
    ],
)
def test_bad_text_is_refused_with_apimachinerys_message(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as raised:
        parse(text)
    assert str(raised.value) == message


def test_a_zero_takes_the_format_of_what_is_added() -> None:
    """Quantity.Add: status.used starts at a DecimalSI zero and shows memory in Gi."""
    assert str(quantity.ZERO + parse("1Gi")) == "1Gi"
    assert str(parse("1Gi") + parse("1Gi")) == "2Gi"
    assert str(parse("1") + parse("500m")) == "1500m"


@pytest.mark.parametrize(
    ("text", "exponent", "expected"),
    [("0.0001", -3, "1m"), ("1.0001", -3, "1001m"), ("-0.0001", -3, "-1m"), ("1500m", 0, "2")],
)
def test_round_up_goes_away_from_zero(text: str, exponent: int, expected: str) -> None:
    assert str(quantity.round_up(parse(text), exponent)) == expected


def test_list_helpers_follow_quota_v1() -> None:
    used = quantity.parse_list({"cpu": "1", "pods": "2"})
    requested = quantity.parse_list({"cpu": "500m", "memory": "1Gi"})
    total = quantity.add(used, requested)
    assert quantity.render_list(total) == {"cpu": "1500m", "memory": "1Gi", "pods": "2"}
    hard = quantity.parse_list({"cpu": "1.2", "pods": "2"})
    assert quantity.exceeded(total, hard) == ["cpu"]
    assert quantity.pretty(quantity.mask(total, ["pods", "cpu"])) == "cpu=1500m,pods=2"
    assert quantity.render_list(quantity.subtract_non_negative(used, total)) == {
        "cpu": "0",
        "memory": "0",
        "pods": "0",
    }


amounts = st.integers(min_value=-(10**30), max_value=10**30).map(
    lambda nanos: Fraction(nanos, quantity.NANOS)
)
formats = st.sampled_from([quantity.DECIMAL_SI, quantity.BINARY_SI, quantity.DECIMAL_EXPONENT])


@given(amounts, formats)
def test_the_canonical_form_reads_back_as_the_same_amount(value: Fraction, fmt: str) -> None:
    written = str(Quantity(value, fmt))
    assert parse(written).value == value
    assert canonical(written) == written


@given(amounts, amounts)
def test_sums_are_exact(first: Fraction, second: Fraction) -> None:
    total = Quantity(first) + Quantity(second)
    assert total.value == first + second
    assert (Quantity(first) <= Quantity(second)) == (first <= second)


@given(amounts, amounts)
def test_comparisons_and_differences_follow_the_amounts(first: Fraction, second: Fraction) -> None:
    a, b = Quantity(first), Quantity(second)
    assert (a < b, a <= b, a > b, a >= b, a == b) == (
        first < second,
        first <= second,
        first > second,
        first >= second,
        first == second,
    )
    assert (a - b).value == first - second
    same_in_binary = Quantity(first, quantity.BINARY_SI)
    assert (same_in_binary, hash(same_in_binary)) == (a, hash(a))


def test_an_amount_finer_than_a_nano_is_rounded_up_as_parsing_does() -> None:
    assert Quantity(Fraction(1, 3)).nanos == 333333334
    assert Quantity(Fraction(-1, 3)) == parse("-333333334n")
    assert quantity.round_up(parse("1n"), -9) == parse("1n")


@given(st.fractions(), st.integers())
def test_any_amount_is_held_in_whole_nanos_away_from_zero(value: Fraction, whole: int) -> None:
    away = math.ceil(abs(value) * quantity.NANOS)
    assert Quantity(value).nanos == (away if value >= 0 else -away)
    assert Quantity(whole).value == whole


def test_a_quantity_cannot_change_but_copies_and_pickles_are_equal() -> None:
    """Parsed quantities are shared by every reader of the same text, so none may change."""
    amount = parse("1.5Gi")
    with pytest.raises(AttributeError):
        amount.nanos = 1
    with pytest.raises(AttributeError):
        del amount.format
    for copied in (copy.copy(amount), copy.deepcopy(amount), pickle.loads(pickle.dumps(amount))):
        assert (copied, copied.format, str(copied)) == (amount, quantity.BINARY_SI, "1536Mi")
    assert repr(amount) == "Quantity(Fraction(1610612736, 1), 'BinarySI')"
