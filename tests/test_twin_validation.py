"""The twin against real AGX Orin readings that set none of its parameters (docs/calibration.md).

Measured values are copied from public tegrastats lines and forum stress figures
(:mod:`dvfslab.sim.validation` names the sources); the tolerances are the stated ones.
"""

from __future__ import annotations

import pytest

from dvfslab.sim.profiles import AGX_ORIN_64GB as ORIN
from dvfslab.sim.validation import FIT_READINGS, VALIDATION_READINGS, validation_table

ROWS = {row["reading"]: row for row in validation_table(ORIN)}


@pytest.mark.parametrize("reading", [r.reading_id for r in VALIDATION_READINGS])
def test_twin_is_within_the_stated_tolerance_of_each_real_reading(reading):
    row = ROWS[reading]
    assert row["within"], (f"{reading} ({row['rail']}, {row['state']}): twin {row['twin_w']} W vs measured "
                           f"{row['measured_w']} W = {row['error_pct']:+.1f} %, tolerance ±{row['tolerance_pct']} %")


def test_at_least_eight_validation_readings_none_of_them_used_to_fit():
    assert len(VALIDATION_READINGS) >= 8
    # different tegrastats lines (source + board state), not only different ids; two different
    # idle lines may read the same value on a rail (VDDQ: 301 mW in both)
    fit = {(src, state, rail) for _id, src, state, rail, _watts, _param in FIT_READINGS}
    assert not fit & {(r.source, r.state, r.rail) for r in VALIDATION_READINGS}
    assert not {f[0] for f in FIT_READINGS} & {r.reading_id for r in VALIDATION_READINGS}


def test_the_fit_readings_are_what_the_profile_says():
    """The idle floors are the fit line's readings rounded to 10 mW (2399, 400, 4032, 301 mW)."""
    assert ORIN.soc_idle_w == pytest.approx(2.399, abs=0.005)
    assert ORIN.cpu_idle_w == pytest.approx(0.400, abs=0.005)
    assert ORIN.other_rails_w["VIN_SYS_5V0"] == pytest.approx(4.032, abs=0.005)
    assert ORIN.other_rails_w["VDDQ_VDD2_1V8AO"] == pytest.approx(0.301, abs=0.005)


def test_the_errors_are_reported_honestly_not_all_zero():
    """The table is a check, not a fit: some readings are far off (the CPU rail at partial load)."""
    errors = [abs(row["error_pct"]) for row in ROWS.values()]
    assert max(errors) > 20.0 and min(errors) < 5.0
