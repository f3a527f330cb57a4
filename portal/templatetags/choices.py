"""``{{ value|choice_label:"fabric" }}``: the label of an enum value of the scenario document.

Labels are defined once, with their values, in :mod:`engine.schema.enums`; a template never spells one of its own.
The argument names a choice set (``fabric``, ``routing``: ``CHOICE_SETS``) or a field of the document
(``cluster.fabric``: :mod:`engine.schema.fields`), in which case a missing value shows the field's default.
"""

from __future__ import annotations

from typing import Any

from django import template

from engine.schema.enums import CHOICE_SETS
from engine.schema.fields import BY_PATH

register = template.Library()


@register.filter
def choice_label(value: Any, name: str) -> str:
    """The label of ``value`` in the named choice set or document field; an unknown value as it is."""
    declared = BY_PATH.get(name)
    if declared is None:
        return CHOICE_SETS[name].label(value)
    assert declared.choices is not None, name
    if value in (None, "") and not declared.default_by:
        value = declared.default
    return declared.choices.label(value)
