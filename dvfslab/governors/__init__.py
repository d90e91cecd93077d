"""Governors: policies that choose the GPU level of a fine-tuning run.

Board side (no pandas, no analysis; what ``dvfslab govern`` loads): the :class:`Governor`
protocol, :func:`load_policy` and :func:`decide`, and the governors themselves. Analysis side
(fitting from a sweep, the registry's builders, limit reports): :mod:`dvfslab.governors.fit`,
:mod:`dvfslab.governors.curvefit`, and :mod:`dvfslab.governors.online` (replay part).
"""

from dvfslab.governors.base import (
           GOVERNORS,
           Governor,
           GovernorContext,
           build_governors,
           register_governor,
)
from dvfslab.governors.curve import CurveGovernor, CurveModel
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.io import decide, load_policy
from dvfslab.governors.limits import SlowdownGuard, constrain
from dvfslab.governors.static import (
           FixedGovernor,
           MaxnGovernor,
           OracleGovernor,
           load_fixed,
           save_fixed,
)
from dvfslab.governors.tree import TreeGovernor, paper_tree

__all__ = ["GOVERNORS", "CurveGovernor", "CurveModel", "FixedGovernor", "Governor", "GovernorContext",
           "GovernorError", "MaxnGovernor", "OracleGovernor", "SlowdownGuard", "TreeGovernor",
           "build_governors", "constrain", "decide", "load_fixed", "load_policy", "paper_tree",
           "register_governor", "save_fixed"]
