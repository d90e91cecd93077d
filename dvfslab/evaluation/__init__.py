"""The evaluation of governors over a sweep: replay, cross-validation, model selection, the
recommendation, slowdown limits.

Above the governors (it fits and replays them) and the facts of :mod:`dvfslab.analysis` (the
sweep, the feature table, the steps). Its modules are imported by name (they pull in
scikit-learn): :mod:`~dvfslab.evaluation.replay` (a governor's level, energy, time, saving,
slowdown, regret on every workload; probing charged; intervals), :mod:`~dvfslab.evaluation.probes`
(the physical probe model of a dataset), :mod:`~dvfslab.evaluation.govcv` (every
governor on the same CV folds), :mod:`~dvfslab.evaluation.selection` (which classifier predicts
the optimal level: LOOCV / leave-one-model-out), :mod:`~dvfslab.evaluation.recommend` (the
governor to use), :mod:`~dvfslab.evaluation.limits` (a slowdown limit and its cost),
:mod:`~dvfslab.evaluation.probing` (probing governors: regret split, live on a board),
:mod:`~dvfslab.evaluation.findings` (the twin's findings beside the paper's),
:mod:`~dvfslab.evaluation.failures` (a governor that fails badly on a dataset, named with why),
:mod:`~dvfslab.evaluation.recipe` (the evaluation recipe in one function, ``evaluate_dataset``:
notebooks 04 and 05, the benchmarks and the twin's ensemble call it),
:mod:`~dvfslab.evaluation.recipe_text` (its words and tables, as notebook 04 shows them) and
:mod:`~dvfslab.evaluation.beyond` (what notebook 05 adds to the recipe: the CV table of every
scheme, a slowdown limit, the probing governors' split, its words and summary.json section).
Definitions: docs/method.md.
"""
