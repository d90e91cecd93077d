"""Fine-tuning with dvfslab: the Hugging Face ``Trainer`` with clock control and energy measured.

The public face: :func:`finetune` (the whole experiment), :class:`FinetuneResult`,
:class:`FinetuneError`, :class:`EnergyNotMeasuredWarning`, the callback :class:`DvfsCallback`
with its level policies (:class:`LevelPolicy`, :class:`FixedLevel`, :class:`GovernorLevel`,
:class:`OnlineLevel`) and :class:`OnlineDvfsCallback`. Importing it imports ``transformers``
(the callback is a ``TrainerCallback``). The layout is in docs/finetune.md.

It needs the ``finetune`` extra (torch, transformers, datasets, accelerate); without one of
them, importing it raises :class:`FinetuneExtraMissing` (an ``ImportError`` and a
``DvfsError``: the CLI prints it on one line) that says ``pip install 'dvfslab[finetune]'``.
"""

from __future__ import annotations

import importlib.util

from dvfslab.core.errors import DvfsError

FINETUNE_MODULES = ("torch", "transformers", "datasets", "accelerate")


class FinetuneExtraMissing(DvfsError, ModuleNotFoundError):
    """A module of the ``finetune`` extra is not installed."""


def _check_extra() -> None:
    missing = [m for m in FINETUNE_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise FinetuneExtraMissing(f"dvfslab.harness (fine-tuning) needs the finetune extra; missing: "
                                   f"{', '.join(missing)}. Install it: pip install 'dvfslab[finetune]'",
                                   name=missing[0])


_check_extra()

# after the check of the extra: these import transformers
from dvfslab.harness.callback import DvfsCallback  # noqa: E402
from dvfslab.harness.finetune import finetune  # noqa: E402
from dvfslab.harness.online_callback import OnlineDvfsCallback  # noqa: E402
from dvfslab.harness.policy import FixedLevel, GovernorLevel, LevelPolicy, OnlineLevel  # noqa: E402
from dvfslab.harness.types import EnergyNotMeasuredWarning, FinetuneError, FinetuneResult  # noqa: E402

__all__ = [
    "DvfsCallback",
    "EnergyNotMeasuredWarning",
    "FinetuneError",
    "FinetuneExtraMissing",
    "FinetuneResult",
    "FixedLevel",
    "GovernorLevel",
    "LevelPolicy",
    "OnlineDvfsCallback",
    "OnlineLevel",
    "finetune",
]
