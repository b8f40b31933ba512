"""Strict checks shared by the typed ``mr_search.*`` config subtrees: typed values, enums, unknown keys."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")

_HINTS = {
    "bool": "use true or false (unquoted)",
    "int": "use a whole number",
    "float": "use a finite number",
    "str": "use a string",
}


def check_fields(instance: Any, section: str, choices: Mapping[str, Sequence[str]] | None = None) -> None:
    """Checks each field of a frozen config dataclass against its annotation (``'false'`` is no bool); ints to float."""
    choices = choices or {}
    for field in fields(instance):
        value = getattr(instance, field.name)
        annotation = str(field.type).replace(" ", "")
        optional = annotation.endswith("|None")
        kind = annotation.removesuffix("|None")
        name = f"{section}.{field.name}"
        if value is None:
            if optional:
                continue
            raise ValueError(f"{name} is null; {_hint(kind, field.name, choices)}")
        if kind == "bool":
            valid = isinstance(value, bool)
        elif kind == "int":
            valid = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "float":
            valid = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        elif kind == "str":
            valid = isinstance(value, str) and (field.name not in choices or value in choices[field.name])
        else:  # pragma: no cover - a new field type needs a rule here
            raise TypeError(f"{name}: no check for annotation {field.type!r}")
        if not valid:
            shown = f"{value!r} ({type(value).__name__})"
            raise ValueError(f"{name}={shown} is not valid; {_hint(kind, field.name, choices)}" + _null(optional))
        if kind == "float" and not isinstance(value, float):
            object.__setattr__(instance, field.name, float(value))


def _hint(kind: str, name: str, choices: Mapping[str, Sequence[str]]) -> str:
    if name in choices:
        return f"choose one of {list(choices[name])}"
    return _HINTS[kind]


def _null(optional: bool) -> str:
    return " or null" if optional else ""


def from_mapping(cls: type[T], config: Any, section: str) -> T:
    """Builds a config dataclass from its Hydra subtree (dict or OmegaConf node; None: defaults); unknown keys raise."""
    if config is None:
        return cls()
    if not isinstance(config, Mapping):
        try:  # an OmegaConf DictConfig is not a Mapping subclass
            from omegaconf import DictConfig, OmegaConf

            if isinstance(config, DictConfig):
                config = OmegaConf.to_container(config, resolve=True)
        except ImportError:  # pragma: no cover - omegaconf ships with verl
            pass
    if not isinstance(config, Mapping):
        raise ValueError(f"{section} must be a mapping of options, got {type(config).__name__}")
    valid = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(str(key) for key in set(config) - set(valid))
    if unknown:
        raise ValueError(f"{section}: unknown key(s) {unknown}; valid keys are {valid}")
    return cls(**dict(config))


def subtree(config: Any, name: str) -> Any:
    """``mr_search.<name>`` of the training config (an OmegaConf node, a dict, anything with ``get``), or None."""
    parent = config.get("mr_search") if hasattr(config, "get") else None
    return parent.get(name) if hasattr(parent, "get") else None
