"""plugin_utils/_plain: the collection's data filters take dicts and lists, never the template engine's containers."""
import collections
import importlib
import pathlib

import pytest

from ansible_collections.gpupool.vcf.plugins.plugin_utils._plain import plain, plain_arguments, plain_filters

FILTERS = pathlib.Path(__file__).resolve().parents[4] / "plugins" / "filter"
# the filters of scalars and of a failed task's result (a rescue must never fail on its message) take what they get
AS_GIVEN = {"failure", "option_bool"}


class Lazy(collections.abc.Mapping):
    """A mapping that is no dict, rendering each value when asked, as a template engine's container does."""

    def __init__(self, data):
        self.data, self.rendered = data, []

    def __getitem__(self, key):
        self.rendered.append(key)
        return self.data[key]

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)


def test_mappings_and_sequences_become_dicts_and_lists():
    given = Lazy({"a": (1, Lazy({"b": [2, "x"]})), "c": None, "d": "text"})
    out = plain(given)
    assert out == {"a": [1, {"b": [2, "x"]}], "c": None, "d": "text"}
    assert isinstance(out, dict) and isinstance(out["a"], list) and isinstance(out["a"][1], dict)
    assert given.rendered == ["a", "c", "d"]  # each value rendered once


def test_scalars_are_kept_as_they_are():
    marker = object()
    for value in (1, 2.5, True, None, "s", b"b", marker):
        assert plain(value) is value


def test_a_plain_copy_leaves_the_caller_s_data_alone():
    given = {"a": [1, {"b": 2}]}
    out = plain(given)
    out["a"][1]["b"] = 3
    assert given == {"a": [1, {"b": 2}]}


def test_the_filter_gets_plain_arguments_and_keeps_its_name():
    seen = []

    def f(first, second=None):
        """doc"""
        seen.append((type(first), type(second)))
        return first

    wrapped = plain_arguments(f)
    assert wrapped.__wrapped__ is f and wrapped.__name__ == "f" and wrapped.__doc__ == "doc"
    assert wrapped(Lazy({"x": 1}), second=(1,)) == {"x": 1}
    assert seen == [(dict, list)]
    assert plain_filters({"f": f})["f"](Lazy({})) == {}


@pytest.mark.parametrize("path", sorted(FILTERS.glob("*.py")), ids=lambda p: p.stem)
def test_every_data_filter_takes_plain_data(path):
    module = importlib.import_module("ansible_collections.gpupool.vcf.plugins.filter.%s" % path.stem)
    for name, function in module.FilterModule().filters().items():
        wrapped = getattr(function, "__wrapped__", None)
        if path.stem in AS_GIVEN:
            assert wrapped is None, name
        else:
            assert wrapped is not None and wrapped.__module__ == module.__name__, name
