# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's filters take plain data: mappings as dicts, sequences as lists.

ansible-core 2.19 hands a filter the mappings and lists of its arguments as lazy containers of its
template engine, each holding the variables it renders from. Copying one (``copy.deepcopy``, which
the pure code does to keep a caller's inputs intact) copies that context too: a role's inputs cost
0.6 s to copy where the data they hold takes microseconds. ``plain`` renders such a value once into
dicts and lists; strings, numbers and the rest are kept as they are. On older ansible-core the
containers are plain already and the copy is as cheap as the data.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
from collections.abc import Mapping


def plain(value):
    """``value`` with every mapping a dict and every list or tuple a list, rendered once."""
    if isinstance(value, Mapping):
        return dict((key, plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def plain_arguments(function):
    """The filter ``function`` called with its arguments as plain data."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*[plain(a) for a in args], **dict((k, plain(v)) for k, v in kwargs.items()))
    return wrapper


def plain_filters(filters):
    """A FilterModule's ``filters()`` mapping with each filter taking plain data."""
    return dict((name, plain_arguments(function)) for name, function in filters.items())
