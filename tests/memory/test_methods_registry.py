"""The method registry: a paper's baseline that is not implemented says so instead of "unknown"."""

import pytest

from memory.methods import METHODS, NOT_IMPLEMENTED, get_method_class


def test_conditionmem_is_listed_as_not_implemented():
    assert "conditionmem" in NOT_IMPLEMENTED and "conditionmem" not in METHODS
    with pytest.raises(ValueError, match="'ConditionMem' is not implemented: .*no released code"):
        get_method_class("ConditionMem")
    with pytest.raises(ValueError, match="unknown memory method 'nope'"):
        get_method_class("nope")
