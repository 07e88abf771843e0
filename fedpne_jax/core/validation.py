"""Checks of user-facing values, shared by every configuration: a ValueError naming the parameter,
raised on the host before anything is traced or compiled.

NumPy integer and floating scalars are accepted wherever Python ones are (a value read from an
array is as good as a literal); booleans are refused where a number is meant.
"""
from __future__ import annotations

import math

from objectives.validation import SEED_MAX as SEED_MAX
from objectives.validation import is_int as is_int
from objectives.validation import is_real as is_real

# Seeds are int32 everywhere (keys, seed indices, objective seeds): an index or base seed is in
# [0, SEED_MAX], and a count of seeds at most SEED_MAX + 1.  The number rules are the objectives
# layer's (objectives.validation), so that both packages judge a value alike.


def is_seed(value) -> bool:
    return is_int(value) and 0 <= value <= SEED_MAX


def is_seed_count(value) -> bool:
    return is_int(value) and 1 <= value <= SEED_MAX + 1


def check_int(name: str, value, low: int, high: int | None = None) -> None:
    """``value`` is an integer in [low, high] (high None: no upper bound)."""
    if not is_int(value) or value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def check_real(name: str, value, low=None, high=None, low_open: bool = True, high_open: bool = True,
               magnitude: float | None = None) -> None:
    """``value`` is a finite real number in the stated interval (open or closed at each end), and at
    most ``magnitude`` in absolute value when given (it must survive float32 arithmetic)."""
    if not is_real(value) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (value >= high if high_open else value > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value!r}")
    if magnitude is not None and abs(value) > magnitude:
        raise ValueError(f"{name} must be at most {magnitude:g} in magnitude (it becomes a float32), got {value!r}")
