"""Kubernetes resource quantities (``250m``, ``1.5``, ``128Mi``, ``1e9``) as exact numbers (pure).

The grammar is resource.Quantity's: a signed decimal, then a binary suffix (Ki … Ei), a decimal
suffix (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (``e3``, ``E-2``).
"""

from __future__ import annotations

import re
from fractions import Fraction

from cloudzones import errors

_QUANTITY = re.compile(r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                       r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE](?P<exponent>[+-]?[0-9]+))?")
_FACTORS = {"": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18), "Ki": Fraction(2**10), "Mi": Fraction(2**20),
            "Gi": Fraction(2**30), "Ti": Fraction(2**40), "Pi": Fraction(2**50), "Ei": Fraction(2**60)}


_DIGITS = re.compile(r"[0-9]{1,18}")


def digits(text: str) -> int | None:
    """The number ``text`` writes in 1 to 18 plain ASCII digits (``"042"`` → 42), else None.

    ``int()`` also takes ``" 1"``, ``"1_0"``, ``"+1"`` and other scripts' digits, and past 4,300 digits raises
    a ValueError that would escape as a traceback: counts read from input text go through here instead.
    """
    return int(text) if _DIGITS.fullmatch(text) else None


class InvalidQuantity(errors.CloudZonesError, ValueError):
    """Not a Kubernetes quantity."""


def parse(value: object, where: str = "quantity") -> Fraction:
    """The exact value of a quantity (a string, or a number as YAML may give it)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidQuantity(f"{where}: {value!r:.60} is not a quantity")
    text = str(value).strip()
    match = _QUANTITY.fullmatch(text)
    if match is None or len(text) > 64:
        raise InvalidQuantity(f"{where}: {text[:60]!r} is not a quantity (e.g. 250m, 2, 128Mi, 1Gi)")
    number = Fraction(match["number"])
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if abs(exponent) > 30:
            raise InvalidQuantity(f"{where}: {text!r} is out of range")
        return number * Fraction(10) ** exponent
    return number * _FACTORS[match["suffix"] or ""]


def millicores(value: object, where: str = "cpu") -> int:
    """A CPU quantity in thousandths of a core, rounded up as the scheduler does."""
    return -(-parse(value, where) * 1000 // 1)


def whole(value: object, where: str = "memory") -> int:
    """A quantity rounded up to a whole number (bytes of memory)."""
    return -(-parse(value, where) // 1)
