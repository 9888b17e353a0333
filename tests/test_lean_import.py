"""bench.child.backends.tf.lean_import: the optional packages are refused only while
TensorFlow starts."""

from __future__ import annotations

import sys
import types
from importlib.machinery import ModuleSpec

import pytest

from bench.child.backends.tf.lean_import import _SkipOptional


def _framework(initializing: bool) -> types.ModuleType:
    module = types.ModuleType("tensorflow")
    module.__spec__ = ModuleSpec("tensorflow", None)
    module.__spec__._initializing = initializing  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize("name", ["jax", "jax.numpy", "matplotlib.pyplot", "pandas"])
def test_an_optional_package_is_refused_while_tensorflow_initialises(
        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", _framework(True))
    with pytest.raises(ModuleNotFoundError, match=name):
        _SkipOptional().find_spec(name)


def test_it_imports_as_usual_once_tensorflow_is_up_and_others_never_are_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", _framework(False))
    assert _SkipOptional().find_spec("pandas") is None  # left to the standard finders
    monkeypatch.setitem(sys.modules, "tensorflow", _framework(True))
    assert _SkipOptional().find_spec("numpy") is None
