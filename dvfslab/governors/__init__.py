"""Governors: policies that choose the level (GPU clock or power limit) of a fine-tuning run.

Every governor is an estimator (:mod:`dvfslab.governors.base`): typed constructor parameters,
``fit(data) -> self``, ``decide(workload, probe=None) -> Decision``; the selection rule is one
:class:`~dvfslab.governors.objective.Selector` (default :class:`Objective`, the least energy); the registry names them (:mod:`dvfslab.governors.registry`); one JSON format
saves any of them (:mod:`dvfslab.governors.files`). This face re-exports the board-side names:
importing it imports neither pandas nor numpy nor scikit-learn (fitting imports what it needs:
:mod:`~dvfslab.governors.curvefit`, :mod:`~dvfslab.governors.treefit`,
:mod:`~dvfslab.governors.ucurve`).
"""

from dvfslab.governors.base import (
           Decision,
           Governor,
           Probe,
           ProbeSession,
           ProbeStep,
           ProbingGovernor,
)
from dvfslab.governors.curve import CurveGovernor
from dvfslab.governors.curvemodel import CurveModel
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.files import load_governor, save_governor
from dvfslab.governors.io import decide, load_policy
from dvfslab.governors.objective import (
           LEAST_ENERGY,
           LeastTime,
           Objective,
           Selector,
           SlowdownLimit,
           ZeusCost,
)
from dvfslab.governors.online import OnlineGovernor
from dvfslab.governors.profiled import ProfiledGovernor
from dvfslab.governors.registry import build, governor_class, make, names
from dvfslab.governors.search import SearchGovernor
from dvfslab.governors.static import FixedGovernor, MaxnGovernor, OracleGovernor
from dvfslab.governors.tree import PaperTreeGovernor, TreeGovernor, paper_tree
from dvfslab.governors.voi import VoiGovernor
from dvfslab.governors.zeus import ZeusGovernor
from dvfslab.governors.zeus_jit import ZeusJitGovernor, ZeusSimGovernor

__all__ = ["LEAST_ENERGY", "CurveGovernor", "CurveModel", "Decision", "FixedGovernor", "Governor", "GovernorError",
           "LeastTime", "MaxnGovernor", "Objective", "OnlineGovernor", "OracleGovernor", "PaperTreeGovernor", "Probe",
           "ProbeSession", "ProbeStep", "ProbingGovernor", "ProfiledGovernor", "SearchGovernor", "Selector",
           "SlowdownLimit", "TreeGovernor", "VoiGovernor", "ZeusCost", "ZeusGovernor", "ZeusJitGovernor",
           "ZeusSimGovernor", "build", "decide", "governor_class", "load_governor", "load_policy", "make", "names",
           "paper_tree", "save_governor"]
