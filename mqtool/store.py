"""`mqtool.store`, as documented: the same module as mqtool.engine.store, where the store lives."""

import sys

from mqtool.engine import store as _store

sys.modules[__name__] = _store
