"""`mqtool.sparksource`, as documented: the same module as mqtool.pipeline.sparksource."""

import sys

from mqtool.pipeline import sparksource as _sparksource

sys.modules[__name__] = _sparksource
