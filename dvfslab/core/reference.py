"""The paper's published figures: the one place every comparison reads them from.

"Energy-Efficient GPU DVFS for Fine-Tuning of SLMs on Resource-constrained Embedded Devices"
(2026), measured on a Jetson AGX Orin 64GB: GPU clock swept over its 11 levels while BERT and
Pythia models fine-tune on GLUE tasks; energy = CPU+GPU rails x time; the learned decision tree
(MLG) evaluated on six unseen workloads against MAXN (nvpmodel mode 0, the default GPU
governor). The paper table in notebook 04 (:func:`dvfslab.evaluation.replay.paper_comparison`),
the twin's findings (:mod:`dvfslab.evaluation.findings`) and the ensemble's bands
(:mod:`dvfslab.pipeline.ensemble`) quote these constants, never their own copies.
"""

from __future__ import annotations

TITLE = ("Energy-Efficient GPU DVFS for Fine-Tuning of SLMs on Resource-constrained Embedded Devices (2026), "
         "Jetson AGX Orin 64GB")

#: where the energy minimum lies on the AGX Orin's level table (MHz), lowest and highest
OPTIMAL_LEVELS_MHZ: tuple[float, float] = (510.0, 816.0)
#: leave-one-out CV accuracy of the tree the paper chose
LOOCV_ACCURACY = 0.62
#: MLG's energy saving against MAXN on the six unseen workloads: mean and max (%)
MLG_MEAN_SAVING_PCT = 13.11
MLG_MAX_SAVING_PCT = 26.73
#: the workload of the max saving
MLG_MAX_SAVING_WORKLOAD = "BERT-base, MNLI"
#: models above this many million parameters saved more than MLG_GT70M_SAVING_PCT_MIN (%)
SIZE_SPLIT_M = 70.0
MLG_GT70M_SAVING_PCT_MIN = 22.0
#: MLG ahead of the fixed-frequency governor (FFG), in points of saving
MLG_MINUS_FFG_PTS = 0.9
#: the GPU utilization (%) the printed tree splits at
TREE_UTIL_SPLIT_PCT = 22.0


def optimal_range_text() -> str:
    """``"510–816"`` (MHz)."""
    lo, hi = OPTIMAL_LEVELS_MHZ
    return f"{lo:g}–{hi:g}"


def in_optimal_range(level_mhz: float) -> bool:
    """Whether a level lies in the paper's range of energy-optimal levels."""
    lo, hi = OPTIMAL_LEVELS_MHZ
    return lo <= float(level_mhz) <= hi


def gt70m_text() -> str:
    """``"> 22"`` (%)."""
    return f"> {MLG_GT70M_SAVING_PCT_MIN:g}"


def as_dict() -> dict:
    """The figures as the ensemble's ``summary.json`` block states them."""
    return {"mlg_saving_pct": MLG_MEAN_SAVING_PCT, "mlg_max_saving_pct": MLG_MAX_SAVING_PCT,
            "mlg_minus_ffg_pts": MLG_MINUS_FFG_PTS, "gt70m_mlg_saving_pct": gt70m_text(),
            "optimal_levels_mhz": list(OPTIMAL_LEVELS_MHZ)}
