"""The ``{{ }}`` output hook (``environment.htc_text``): the text ``str()`` gives, charged."""

from __future__ import annotations

import pytest
from markupsafe import Markup

from controller.render.budget import BudgetExceeded, Meter, current
from controller.render.environment import TemplateEnvironment
from controller.render.fragments import Fragment
from controller.render.trace import Traced


def test_a_fragment_is_output_as_its_text_without_its_str_method(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A loop over 10,000 fragments outputs each: its ``_text`` is read directly, not
    through a Python call of ``Fragment.__str__``."""
    text = Traced("backend be_x\n", None)
    frag = Fragment({"name": "be_x"}, text)
    hook = TemplateEnvironment().htc_text
    assert hook(frag) is text is str(frag)

    def refuse(self: Fragment) -> str:
        raise AssertionError("Fragment.__str__ called")

    monkeypatch.setattr(Fragment, "__str__", refuse)
    assert hook(frag) is text


class _Sub(Fragment):
    __slots__ = ()

    def __str__(self) -> str:
        return "own text"


@pytest.mark.parametrize(
    ("value", "expected", "same"),
    [
        ("plain", "plain", True),
        (Traced("traced", None), "traced", True),
        (42, "42", False),
        (Markup("<b>"), "<b>", False),
        (None, "None", False),
        (_Sub({"a": 1}, Traced("kept", None)), "own text", False),
    ],
    ids=["str", "traced", "int", "markup", "none", "fragment-subclass"],
)
def test_every_value_gives_what_str_gives(value: object, expected: str, same: bool) -> None:
    """A traced text is kept as it is (it carries its origin); anything else is ``str()``."""
    out = TemplateEnvironment().htc_text(value)
    assert out == expected == str(value)
    assert type(out) is (Traced if type(value) is Traced else str)
    assert (out is value) is same


def test_the_output_is_charged() -> None:
    hook = TemplateEnvironment().htc_text
    meter = Meter(timeout=60.0, max_chars=20)
    token = current().set(meter)
    try:
        hook(Fragment({"n": 1}, Traced("x" * 12, None)))
        hook("y" * 8)
        assert meter.used_chars == 20
        with pytest.raises(BudgetExceeded) as caught:
            hook(Fragment({"n": 1}, Traced("z", None)))
    finally:
        current().reset(token)
    assert (caught.value.budget, caught.value.used) == ("outputBytes", 21)


def test_a_fragments_slots_are_read_without_an_attribute_hook() -> None:
    """``f._exports`` (every export read in generated code) and ``f._text`` (every output)
    take the interpreter's plain slot read: Fragment has no ``__getattr__``. Templates still
    read exports as attributes, through the environment (and the stock sandbox through
    ``__getitem__``)."""
    assert "__getattr__" not in vars(Fragment)
    assert type(Fragment).__getattribute__ is type.__getattribute__
    assert Fragment.__getattribute__ is object.__getattribute__
    frag = Fragment({"name": "be_x", "missing": None}, Traced("backend be_x\n", None))
    env = TemplateEnvironment()
    out = env.from_string("{{ f.name }} {{ f['name'] }} {{ f.missing }} {{ f }}").render(f=frag)
    assert out == "be_x be_x None backend be_x\n"
    with pytest.raises(AttributeError):
        frag.name  # type: ignore[attr-defined]  # noqa: B018  (Python reads f["name"])
    assert frag["name"] == "be_x"
