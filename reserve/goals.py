"""What a planner asks for each species: a target and a weight (``--target``, ``--weight``).

A :class:`Target` is an expected number of occupied cells among the chosen ones
(``"Virtual Thrush=40"``) or a share of the species' expected occupied candidate cells
(``"Virtual Quail=50%"``); a :class:`Weight` scales the species in the plan's objective
(``"Virtual Quail=2"``). :func:`parse_targets` and :func:`parse_weights` are the checks of
the options of those names (:mod:`reserve.options`): they take the flags' ``SPECIES=VALUE``
texts, a TOML list of them, or a TOML table ``{"Virtual Thrush" = 40, "Virtual Quail" =
"50%"}``. :func:`check_named` refuses a species that is not in the run, with the closest
name.

This module imports nothing heavy: the command line checks these options before it loads
the solvers.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reserve.errors import InvalidInputError

__all__ = ["Target", "Weight", "check_named", "closest", "parse_targets", "parse_weights"]


@dataclass(frozen=True)
class Target:
    """One species' target: expected occupied cells among the chosen, or a share.

    Attributes
    ----------
    species : str
        The species, as named by ``--species``.
    amount : float
        Expected occupied cells (``share`` False), or a percentage from 0 to 100 of the
        species' expected occupied candidate cells (``share`` True).
    share : bool
        Whether ``amount`` is a percentage.

    Examples
    --------
    >>> t = Target("Virtual Quail", 50.0, share=True)
    >>> str(t), t.absolute(total=80.0, base=2.0)
    ('Virtual Quail=50%', 42.0)
    """

    species: str
    amount: float
    share: bool = False

    def __str__(self) -> str:
        return f"{self.species}={self.given}"

    @property
    def given(self) -> str:
        """The value as the planner wrote it: ``40`` or ``50%``."""
        return f"{self.amount:g}%" if self.share else f"{self.amount:g}"

    def absolute(self, total: float, base: float) -> float:
        """Expected occupied cells among the chosen that the target asks for.

        Parameters
        ----------
        total : float
            The species' expected occupied cells over the free candidates (the sum of its
            probabilities there).
        base : float
            Its expected occupied cells among the locked-in cells.

        Returns
        -------
        float
            ``amount``; a share: ``amount / 100 * total + base``.
        """
        return self.amount / 100.0 * total + base if self.share else self.amount


@dataclass(frozen=True)
class Weight:
    """One species' weight in the plan's objective (1 by default).

    Examples
    --------
    >>> str(Weight("Virtual Quail", 2.0))
    'Virtual Quail=2'
    """

    species: str
    value: float

    def __str__(self) -> str:
        return f"{self.species}={self.value:g}"


def _pairs(value: Any, name: str, example: str) -> list[tuple[str, Any]]:
    """``(species, value)`` pairs of ``SPECIES=VALUE`` texts, a table, or the objects."""
    if isinstance(value, Mapping):
        return [(str(k), v) for k, v in value.items()]
    items = [value] if isinstance(value, str | Target | Weight) else value
    if not isinstance(items, Iterable):
        raise InvalidInputError(f"{name} must be SPECIES=VALUE texts; received {value!r}")
    out = []
    for item in items:
        if isinstance(item, Target | Weight):
            out.append((item.species, item))
            continue
        species, sep, amount = str(item).rpartition("=")
        if not isinstance(item, str) or not sep or not species.strip() or not amount.strip():
            raise InvalidInputError(
                f"{name} {item!r} must be SPECIES=VALUE; pass e.g. --{name} {example!r}"
            )
        out.append((species, amount))
    return out


def _number(text: Any, name: str, species: str, what: str) -> float:
    """``text`` as a finite number >= 0, or a one-line refusal naming the species."""
    try:
        v = float(text) if not isinstance(text, bool) else math.nan
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or v < 0:
        raise InvalidInputError(f"{name} for {species!r} must be {what}; received {text!r}")
    return v


def _target(species: str, value: Any, name: str) -> Target:
    if isinstance(value, Target):
        return value
    text = str(value).strip() if not isinstance(value, bool) else value
    share = isinstance(text, str) and text.endswith("%")
    amount = _number(
        text[:-1] if share else text,
        name,
        species,
        "a number >= 0 of expected occupied cells, or a share such as 50%",
    )
    if share and amount > 100:
        raise InvalidInputError(
            f"{name} for {species!r} is {text}: a share is at most 100% of the species' "
            "expected occupied candidate cells; pass e.g. 50%"
        )
    return Target(species, amount, share)


def _weight(species: str, value: Any, name: str) -> Weight:
    if isinstance(value, Weight):
        return value
    return Weight(species, _number(value, name, species, "a number >= 0 (default 1)"))


def _parse(
    value: Any, name: str, example: str, make: Callable[[str, Any, str], Any]
) -> tuple[Any, ...]:
    if value is None:
        return ()
    parsed = [make(s.strip(), v, name) for s, v in _pairs(value, name, example)]
    seen = [p.species for p in parsed]
    twice = sorted({s for s in seen if seen.count(s) > 1})
    if twice:
        raise InvalidInputError(f"{name} names {twice} more than once; give each species once")
    return tuple(parsed)


def parse_targets(value: Any, name: str = "target") -> tuple[Target, ...]:
    """Targets from ``SPECIES=N`` / ``SPECIES=P%`` texts, a table, or :class:`Target` s.

    Examples
    --------
    >>> parse_targets(["Virtual Thrush=40", "Virtual Quail=50%"])[1]
    Target(species='Virtual Quail', amount=50.0, share=True)
    >>> parse_targets({"Virtual Thrush": 40})[0].amount
    40.0
    """
    return _parse(value, name, "Virtual Thrush=40", _target)


def parse_weights(value: Any, name: str = "weight") -> tuple[Weight, ...]:
    """Weights from ``SPECIES=W`` texts, a table, or :class:`Weight` s.

    Examples
    --------
    >>> parse_weights("Virtual Quail=2")
    (Weight(species='Virtual Quail', value=2.0),)
    """
    return _parse(value, name, "Virtual Quail=2", _weight)


def closest(name: str, names: Sequence[str]) -> str:
    """``; did you mean 'X'?`` for the name of ``names`` closest to ``name``, else ``''``.

    Examples
    --------
    >>> closest("Virtual Trush", ["Virtual Thrush", "Virtual Quail"])
    "; did you mean 'Virtual Thrush'?"
    """
    match = difflib.get_close_matches(name, list(names), n=1, cutoff=0.5)
    return f"; did you mean {match[0]!r}?" if match else ""


def check_named(goals: Iterable[Target | Weight], species: Sequence[str], name: str) -> None:
    """Refuse a target or weight whose species is not one of the run's ``species``."""
    for goal in goals:
        if goal.species not in species:
            run = ", ".join(repr(s) for s in species)
            raise InvalidInputError(
                f"{name} {str(goal)!r} names a species not in the run (--species {run})"
                f"{closest(goal.species, species)}"
            )
