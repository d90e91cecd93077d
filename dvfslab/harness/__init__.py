"""Fine-tuning with dvfslab: the Hugging Face ``Trainer`` with clock control and energy measured.

The public face: :func:`finetune` (the whole experiment), :class:`FinetuneResult`,
:class:`FinetuneError`, :class:`EnergyNotMeasuredWarning`, the callback :class:`DvfsCallback`
with its level policies (:class:`LevelPolicy`, :class:`FixedLevel`, :class:`GovernorLevel`,
:class:`OnlineLevel`) and :class:`OnlineDvfsCallback`. Importing it imports ``transformers``
(the callback is a ``TrainerCallback``). The layout is in docs/finetune.md.
"""

from __future__ import annotations

from dvfslab.harness.callback import DvfsCallback
from dvfslab.harness.finetune import finetune
from dvfslab.harness.online_callback import OnlineDvfsCallback
from dvfslab.harness.policy import FixedLevel, GovernorLevel, LevelPolicy, OnlineLevel
from dvfslab.harness.types import EnergyNotMeasuredWarning, FinetuneError, FinetuneResult

__all__ = [
    "DvfsCallback",
    "EnergyNotMeasuredWarning",
    "FinetuneError",
    "FinetuneResult",
    "FixedLevel",
    "GovernorLevel",
    "LevelPolicy",
    "OnlineDvfsCallback",
    "OnlineLevel",
    "finetune",
]
