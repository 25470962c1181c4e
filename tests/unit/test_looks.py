"""How modes look (harness/core/looks.py): an immutable value."""

from __future__ import annotations

import pytest

from harness.core.looks import EMPTY, Look, Looks, derived_colour


def test_a_looks_ranks_known_modes_by_order_then_the_rest_by_name_native_first():
    looks = Looks({"b": Look(2, "#000002"), "a": Look(1, "")})
    assert sorted(["zz", "native", "b", "aa", "a"], key=looks.rank) == ["a", "b", "native", "aa", "zz"]
    assert looks.colour("b") == "#000002"
    assert looks.colour("a") == derived_colour("a") == EMPTY.colour("a")     # declared none: derived
    assert sorted(["x", "native", "a"], key=EMPTY.rank) == ["native", "a", "x"]


def test_a_looks_is_immutable_and_merges_into_a_new_one():
    a = Looks({"x": Look(1, "#111111")})
    b = Looks({"x": Look(9, "#999999"), "y": Look(5, "")})
    with pytest.raises(AttributeError):
        a._by = {}                                                   # type: ignore[misc]
    with pytest.raises(TypeError):
        a["x"] = Look(3, "")                                         # type: ignore[index]
    m = a.merged(b)
    assert m == {"x": Look(1, "#111111"), "y": Look(5, "")}          # the first word on a name wins
    assert a == {"x": Look(1, "#111111")} and len(b) == 2            # neither changed
    assert hash(m) == hash(Looks(dict(m)))


def test_recorded_looks_skip_what_is_malformed():
    looks = Looks.recorded({"x": {"order": 3, "colour": "#333333"}, "y": {"order": 4},
                            "bad": {"order": "1"}, "flag": {"order": True}, "z": [1], 7: {"order": 1},
                            "c": {"order": 2, "colour": 5}})
    assert looks == {"x": Look(3, "#333333"), "y": Look(4, ""), "c": Look(2, "")}
    assert Looks.recorded(None) == Looks.recorded([1, 2]) == EMPTY
    assert Looks.recorded(looks.recordable()) == looks
