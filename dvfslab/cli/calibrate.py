"""``dvfslab calibrate [--check]``: refit the twin's parameters from the fit readings."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate",
        help="refit the digital twin's parameters from its fit readings (writes the checked-in calibration file)",
        description="Weighted least-squares fit of the simulated AGX Orin's fitted parameters to the real readings "
                    "marked 'fit' in dvfslab.sim.readings (each weighted by its stated uncertainty); writes "
                    "dvfslab/sim/data/agx_orin_64gb_calibration.json with the readings' hashes and residuals. "
                    "--check writes nothing and exits 1 when the checked-in file differs from the fit's output.")
    p.add_argument("--check", action="store_true",
                   help="compare the checked-in file with the fit's output; exit 1 if they differ")
    p.add_argument("--out", metavar="FILE", default=None,
                   help="write (or --check) this file instead of the checked-in one")
    p.set_defaults(func=run)


def run(args) -> int:
    from dvfslab.sim.calibration import check_calibration, write_calibration
    from dvfslab.sim.profiles import ORIN_CALIBRATION

    path = args.out or ORIN_CALIBRATION
    if args.check:
        diffs = check_calibration(path)
        for line in diffs:
            print(f"dvfslab calibrate --check: {path}: {line}")
        if diffs:
            print("dvfslab calibrate --check: the checked-in calibration is not the fit's output; "
                  "run `dvfslab calibrate` and commit the file")
            return 1
        print(f"{path}: matches the fit of the readings")
        return 0
    doc = write_calibration(path)
    fit = doc["fit"]
    print(f"wrote {path}: {len(doc['parameters'])} parameters from {fit['n_readings']} readings "
          f"(chi2 {fit['chi2']:g}, {fit['dof']} degrees of freedom)")
    return 0
