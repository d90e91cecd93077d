"""The columns that hold the answer a governor must never see: one list, read by the governors'
guard (:meth:`dvfslab.governors.base.Governor.decide` refuses a row that carries one) and by the
replay, which strips them (:func:`dvfslab.analysis.features.governor_row`).

They are the feature table's columns derived from the measured optimum (the optimal level, its
index, energy and time, the oracle's saving, whether the curve is U-shaped, the paper's label),
the measured run's totals at the baseline (they give the run's true length and the saving's
denominator) and the job's true length (``job_steps``: a governor plans with ``plan_job_units``,
the length it could know). ``n_levels`` (how many levels were swept) is not: a probing governor
is given the levels anyway. Plain Python: the board side imports it.
"""

ANSWER_COLUMNS: tuple[str, ...] = ("opt_level", "opt_level_idx", "opt_energy_j", "opt_time_s", "oracle_saving_pct",
                                   "u_shaped", "paper_label", "baseline_energy_j", "baseline_time_s", "job_steps")
