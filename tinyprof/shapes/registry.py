"""A registry of one formula per layer type, for one quantity (shapes, FLOPs, saved bytes).

Every analysis keeps its formulas in a :class:`FormulaRegistry`; they all behave the same way:
a formula is registered against a class and found for an instance through its class's MRO (so a
subclass inherits its base's formula unless it registers its own), and registering a second
formula for the same class is refused unless ``replace=True`` says it is meant.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator


class MissingFormulaError(LookupError):
    """A layer (or loss) type with no formula for the quantity being computed."""


class FormulaRegistry:
    """``layer type → (formula, options)`` for one quantity, e.g. "FLOP formula".

    ``options`` are keyword settings stored with a formula (e.g. ``whole=True`` for an
    activation formula that accounts for a container's children too).
    """

    def __init__(self, what: str):
        self.what = what
        self._entries: dict[type, tuple[Callable, dict[str, Any]]] = {}

    def register(self, layer_type: type, *, replace: bool = False,
                 **options: Any) -> Callable[[Callable], Callable]:
        """Decorator registering ``formula`` for ``layer_type``.

        Raises ValueError if ``layer_type`` already has a formula here and ``replace`` is False:
        two formulas for one type would otherwise depend on import order.
        """
        if not isinstance(layer_type, type):
            raise TypeError(f"register a {self.what} against a class, got {layer_type!r}")

        def decorate(formula: Callable) -> Callable:
            if not callable(formula):
                raise TypeError(f"a {self.what} must be a function, got {formula!r}")
            old = self._entries.get(layer_type)
            if old is not None and not replace:
                raise ValueError(
                    f"{layer_type.__name__} already has a {self.what} "
                    f"({old[0].__module__}.{old[0].__qualname__}); pass replace=True to "
                    "replace it")
            self._entries[layer_type] = (formula, options)
            return formula

        return decorate

    def unregister(self, layer_type: type) -> None:
        """Forget the formula registered for exactly ``layer_type`` (tests, experiments)."""
        self._entries.pop(layer_type, None)

    def find(self, obj: object) -> tuple[Callable, dict[str, Any]] | None:
        """``(formula, options)`` for ``obj``'s class or its nearest registered base, or None."""
        for cls in type(obj).__mro__:
            if cls in self._entries:
                return self._entries[cls]
        return None

    def __contains__(self, layer_type: type) -> bool:
        return layer_type in self._entries

    def __iter__(self) -> Iterator[type]:
        return iter(self._entries)

    def __repr__(self) -> str:
        names = ", ".join(sorted(t.__name__ for t in self._entries))
        return f"FormulaRegistry({self.what!r}: {names})"


def snake_case(name: str) -> str:
    """``MyLayer`` → ``my_layer`` (for the example code in error messages)."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower()
                   for i, c in enumerate(name))
