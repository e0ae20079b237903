"""Power of the black-box privacy audits against a 2x noise error (issue 18).

``python -m benchmarks.audit_power [--quick] [--only NAME ...] [--seeds S] [--factors F ...]
[--trials N] [--more-seeds]`` runs every audit of
:data:`benchmarks.audits.AUDITS` at ``S`` independent audit seeds (20 by default; ``--quick``:
4 seeds, the audits of the default test suite only) and writes
``benchmarks/results/audit_power{,_quick}.{md,json}``: one row per audit with the mechanism, the
neighbours, the trials, the claimed epsilon, the median honest lower bound, the fraction of honest
audits within the claim, the fraction of audits catching the noise divided by 2 (and by the
audit's larger ``factor`` where 2 cannot be seen), the measured tightness of the release and the
wall time. A first table, :func:`ideal_power`, is what the best threshold test can certify for an
exactly ``mu``-GDP mechanism: the target the audits are measured against.

Every audit is one :func:`skdpsco.audit.audit_mechanism` call with ``random_state=seed``; the
honest and the weakened audit of one seed use the same trial seeds. Run on one core
(``OMP_NUM_THREADS=1``): about 3.5 hours for the full table on a shared core (the estimator paths
about 2.5 of them; ``svm_one_vs_rest_laplace`` alone 34 minutes), so run it in parts with ``--only``,
in parallel processes where there are cores: each run merges its rows into the results under a lock.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from skdpsco.accounting import gaussian_noise_multiplier
from skdpsco.audit import epsilon_lower_bound

from .audits import AUDIT_DELTA, AUDITS, Audit, run_audit, weakened
from .machine import machine_info

RESULTS = Path(__file__).parent / "results"

N_SEEDS = 20
"""Independent audit seeds per row (issue 18: power is the fraction of at least 20 seeds)."""

QUICK_SEEDS = 4

TIGHTNESS_TRIALS = 500
"""Honest runs per dataset for the tightness column (a diagnostic, not an audit)."""


# -- what a perfect audit can certify ------------------------------------------------------------


def ideal_power(epsilon: float, delta: float, ratio: float, n_trials: int, n_seeds: int = N_SEEDS) -> tuple[float, float]:
    """Power and median lower bound of the audit on an *exactly* ``mu``-GDP Gaussian shift.

    ``mu = 1 / gaussian_noise_multiplier(epsilon, delta)`` is the Gaussian mechanism that spends
    exactly ``epsilon`` at ``delta``; the weakened mechanism has shift ``ratio * mu`` (``ratio = 2``:
    the noise halved). The statistics are drawn directly (``N(0, 1)`` against ``N(ratio mu, 1)``,
    the likelihood-ratio statistic of the pair) and bounded by :func:`skdpsco.audit.epsilon_lower_bound`
    as every audit is. A mechanism whose release reaches only a fraction ``r`` of its claimed
    ``mu`` against the chosen neighbours behaves like ``ratio = 2 r`` when its noise is halved.

    Returns
    -------
    (power, median_lower_bound) : tuple of float
        Fraction of ``n_seeds`` audits whose bound exceeds ``epsilon``, and the median bound.
    """
    mu = 1.0 / gaussian_noise_multiplier(epsilon, delta)
    bounds = []
    for seed in range(n_seeds):
        rng = np.random.default_rng([seed, n_trials])
        result = epsilon_lower_bound(
            rng.normal(0.0, 1.0, n_trials), rng.normal(ratio * mu, 1.0, n_trials), delta, random_state=seed
        )
        bounds.append(result.epsilon_lower_bound)
    return float(np.mean(np.asarray(bounds) > epsilon)), float(np.median(bounds))


IDEAL_GRID = dict(
    cells=[(1e-5, 1.0), (1e-5, 3.0), (1e-2, 1.0), (1e-2, 2.0)],
    ratios=(2.0, 1.6, 1.4),
    trials=(2000, 5000, 20_000),
)


def ideal_table(n_seeds: int) -> list:
    """:func:`ideal_power` over :data:`IDEAL_GRID`, one record per cell."""
    return [
        dict(delta=delta, epsilon=epsilon, ratio=ratio, n_trials=n,
             **dict(zip(("power", "median"), ideal_power(epsilon, delta, ratio, n, n_seeds))))
        for delta, epsilon in IDEAL_GRID["cells"] for ratio in IDEAL_GRID["ratios"] for n in IDEAL_GRID["trials"]
    ]


def ideal_markdown(records: list) -> str:
    """Markdown of :func:`ideal_table`: power (median lower bound) by trials per dataset."""
    trials = sorted({r["n_trials"] for r in records})
    rows = ["| delta | claimed ε | shift / claimed mu | " + " | ".join(f"N = {n}" for n in trials) + " |",
            "|" + "---|" * (3 + len(trials))]
    cells = {}
    for r in records:
        cells.setdefault((r["delta"], r["epsilon"], r["ratio"]), {})[r["n_trials"]] = f"{r['power']:.2f} ({r['median']:.2f})"
    for (delta, epsilon, ratio), by_n in cells.items():
        rows.append(f"| {delta:g} | {epsilon:g} | {ratio:g} | " + " | ".join(by_n[n] for n in trials) + " |")
    return "\n".join(rows)


# -- one audit at many seeds ---------------------------------------------------------------------


def tightness(audit: Audit, n_trials: int = TIGHTNESS_TRIALS) -> float:
    """Measured shift of the honest statistic over its standard deviation, as a fraction of the
    ``mu`` whose Gaussian spends the claimed epsilon at the audit's delta: 1 for a release that
    reaches its accounted sensitivity. Gaussian mechanisms only (``nan`` otherwise)."""
    s = audit.setup
    if audit.knob != "gaussian" or s.delta == 0:
        return float("nan")
    statistic = s.statistic or float
    seeds = np.random.SeedSequence([7, n_trials]).generate_state(2 * n_trials)
    with weakened(audit.knob, 1.0):
        values = [
            np.array([statistic(s.run(d, int(seed))) for seed in part])
            for d, part in ((s.dataset_0, seeds[:n_trials]), (s.dataset_1, seeds[n_trials:]))
        ]
    spread = np.sqrt((values[0].var() + values[1].var()) / 2)
    mu_claimed = 1.0 / gaussian_noise_multiplier(s.claimed_epsilon, s.delta)
    return float(abs(values[1].mean() - values[0].mean()) / spread / mu_claimed)


def bound_summary(claimed: float, honest: list, weakened: dict) -> dict:
    """A row's columns from its bounds: ``honest`` one per seed, ``weakened`` the same by factor
    (keys as ``'2'``)."""
    return dict(
        n_seeds=len(honest), honest_median=statistics.median(honest), honest_max=max(honest),
        honest_within=float(np.mean(np.asarray(honest) <= claimed)),
        power={f: float(np.mean(np.asarray(bounds) > claimed)) for f, bounds in weakened.items()},
        weakened_median={f: statistics.median(bounds) for f, bounds in weakened.items()},
        honest_bounds=honest, weakened_bounds=weakened,
    )


def measure(audit: Audit, n_seeds: int, factors=(), n_trials: int | None = None, first_seed: int = 0) -> dict:
    """Honest and weakened audits of ``audit`` at seeds ``first_seed .. first_seed + n_seeds - 1``:
    weakened by the audit's factor, by 2 (unless ``audit.measure_halved`` is off) and by each of
    ``factors``, at ``n_trials`` trials per dataset (default ``audit.n_trials``)."""
    started = time.perf_counter()
    claimed = audit.setup.claimed_epsilon
    n_trials = n_trials or audit.n_trials
    factors = sorted({float(audit.factor)} | ({2.0} if audit.measure_halved else set()) | {float(f) for f in factors})
    honest, lower = [], {f: [] for f in factors}
    for seed in range(first_seed, first_seed + n_seeds):
        honest.append(run_audit(audit, seed, n_trials=n_trials).epsilon_lower_bound)
        for factor in factors:
            lower[factor].append(run_audit(audit, seed, factor, n_trials).epsilon_lower_bound)
    record = dict(
        name=audit.name, mechanism=audit.mechanism, neighbours=audit.neighbours, n_trials=n_trials,
        claimed_epsilon=claimed, delta=audit.setup.delta, knob=audit.knob, factor=audit.factor,
        slow=audit.slow, note=audit.note, **bound_summary(claimed, honest, {f"{f:g}": lower[f] for f in factors}),
    )
    record["tightness"] = tightness(audit)
    record["seconds"] = time.perf_counter() - started
    return record


def extended(row: dict, record: dict) -> dict:
    """``row`` with the seeds of ``record`` appended (the next seeds of the same audit, at the same
    trials and factors: :func:`measure` with ``first_seed = row['n_seeds']``); its tightness is kept."""
    if record["n_trials"] != row["n_trials"] or record["weakened_bounds"].keys() != row["weakened_bounds"].keys():
        raise ValueError(f"{row['name']}: the seeds to append were run at other trials or factors")
    weakened = {f: row["weakened_bounds"][f] + record["weakened_bounds"][f] for f in row["weakened_bounds"]}
    return {**row, **bound_summary(row["claimed_epsilon"], row["honest_bounds"] + record["honest_bounds"], weakened),
            "seconds": row["seconds"] + record["seconds"]}


def table(records: list, n_seeds: int = N_SEEDS) -> str:
    """One markdown row per audit (the trials column also gives a row's seeds where they are not ``n_seeds``)."""
    rows = [
        "| audit | mechanism | neighbours | trials | δ | claimed ε | honest median (max) | honest within | "
        "caught noise/2 | caught noise/f | release / claimed mu | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        extra = "; ".join(f"{power:.2f} (f = {f})" for f, power in r["power"].items() if f != "2") or "—"
        halved = f"{r['power']['2']:.2f}" if "2" in r["power"] else "not measured"
        tight = "—" if np.isnan(r["tightness"]) else f"{r['tightness']:.2f}"
        seeds = "" if r["n_seeds"] == n_seeds else f" ({r['n_seeds']} seeds)"
        rows.append(
            f"| {r['name']} | {r['mechanism']} | {r['neighbours']} | {r['n_trials']}{seeds} | {r['delta']:g} | "
            f"{r['claimed_epsilon']:.3f} | {r['honest_median']:.3f} ({r['honest_max']:.3f}) | "
            f"{r['honest_within']:.2f} | {halved} | {extra} | {tight} | {r['seconds']:.0f} |"
        )
    return "\n".join(rows)


def missing(records: list, quick: bool) -> str:
    """The catalogue's audits of this mode that no row measures (rows are added with ``--only``)."""
    measured = {r["name"] for r in records}
    names = [name for name, a in AUDITS.items() if name not in measured and not (quick and a.slow)]
    if not names:
        return "Every audit of the catalogue is measured."
    return (f"Not measured in this file ({len(names)} of the catalogue's audits; `--only NAME` adds a row): "
            + ", ".join(f"`{name}`" for name in names) + ".")


def notes(records: list) -> str:
    return "\n".join(f"* **{r['name']}**: {r['note']}" for r in records if r["note"])


def report(records: list, ideal: str, n_seeds: int, minutes: float, quick: bool) -> str:
    """The markdown file."""
    return "\n".join([
        f"# Power of the black-box privacy audits against a 2x noise error{' (quick)' if quick else ''}",
        "",
        f"`python -m benchmarks.audit_power{' --quick' if quick else ''}`: {n_seeds} independent audit seeds per "
        f"row unless the trials column says otherwise, {minutes:.0f} min on one core in all (the wall column: each row). Audits at δ = {AUDIT_DELTA:g} "
        "unless stated (pure-DP rows: δ = 0).",
        "",
        "## What a perfect audit can certify",
        "",
        "Power (median lower bound) of the audit on an exactly μ-GDP Gaussian shift whose μ spends the claimed ε "
        "at δ, with the shift multiplied by the ratio (2: the noise halved), N trials per dataset, "
        f"{n_seeds} seeds (`ideal_power`).",
        "",
        ideal,
        "",
        "## The audits",
        "",
        "Honest: the lower bound of the unmodified mechanism (must stay within the claim at every seed). "
        "Caught: the fraction of seeds whose bound exceeds the claim with the noise divided by 2 "
        "(and by the audit's factor f where noise / 2 cannot be seen by any audit with these neighbours, "
        "see the notes). Release / claimed mu: the honest statistic's shift over its spread "
        f"({TIGHTNESS_TRIALS} runs per dataset, about ±0.1), as a fraction of the μ that spends the claimed ε "
        "(Gaussian mechanisms; noise / 2 doubles it).",
        "",
        table(records, n_seeds),
        "",
        missing(records, quick),
        "",
        "## Notes",
        "",
        notes(records),
        "",
    ])


def write_results(stem: Path, measured: dict, ideal_records: list, ideal_seconds: float, n_seeds: int,
                  quick: bool, merge: bool) -> float:
    """Write the rows ``measured`` (merged into the existing ones if ``merge``) to ``stem``'s ``.md`` and ``.json``.

    The existing results are re-read under an exclusive lock just before writing, so several
    ``--only`` runs in parallel processes (one core each) add their rows without overwriting each
    other's. Returns the minutes of all rows.
    """
    lock_path = Path(tempfile.gettempdir()) / f"skdpsco-{stem.name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = stem.with_suffix(".json")
        previous = json.loads(path.read_text())["audits"] if merge and path.exists() else []
        records = {r["name"]: r for r in previous} | measured
        ordered = [records[name] for name in AUDITS if name in records]
        minutes = (ideal_seconds + sum(r["seconds"] for r in ordered)) / 60
        stem.with_suffix(".md").write_text(report(ordered, ideal_markdown(ideal_records), n_seeds, minutes, quick))
        path.write_text(json.dumps(
            {"machine": machine_info(), "n_seeds": n_seeds, "minutes": minutes, "ideal_seconds": ideal_seconds,
             "ideal": ideal_records, "audits": ordered}, indent=1))
    return minutes


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 seeds, default-suite audits only")
    parser.add_argument("--only", nargs="*", help="audit names: rerun these rows and merge them into the "
                        "existing results (same mode)")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--factors", nargs="*", type=float, default=(),
                        help="further noise divisors measured besides the audit's factor and 2")
    parser.add_argument("--trials", type=int, default=None,
                        help="trials per dataset instead of each audit's n_trials (recorded in its row)")
    parser.add_argument("--more-seeds", action="store_true",
                        help="with --only: run the next --seeds seeds of each row, at its trials and factors, and append them")
    args = parser.parse_args(argv)
    n_seeds = args.seeds or (QUICK_SEEDS if args.quick else N_SEEDS)
    names = args.only or [name for name, a in AUDITS.items() if not (args.quick and a.slow)]
    stem = RESULTS / f"audit_power{'_quick' if args.quick else ''}"
    RESULTS.mkdir(exist_ok=True)
    previous = json.loads(stem.with_suffix(".json").read_text()) if args.only and stem.with_suffix(".json").exists() else None
    started = time.perf_counter()
    file_seeds = n_seeds if previous is None else previous["n_seeds"]  # a merged row keeps its own (table)
    if previous is None:
        ideal_records = ideal_table(n_seeds)
        ideal_seconds = time.perf_counter() - started
    else:
        ideal_records = previous["ideal"]
        ideal_seconds = previous.get("ideal_seconds", 60 * previous["minutes"] - sum(r["seconds"] for r in previous["audits"]))
    print(ideal_markdown(ideal_records), flush=True)
    measured = {}
    for name in names:
        if args.more_seeds:
            row = next(r for r in previous["audits"] if r["name"] == name)
            record = extended(row, measure(AUDITS[name], n_seeds, [float(f) for f in row["power"]], row["n_trials"],
                                           first_seed=row["n_seeds"]))
        else:
            record = measure(AUDITS[name], n_seeds, args.factors, args.trials)
        measured[name] = record
        print(f"{name}: honest median {record['honest_median']:.3f} / claim {record['claimed_epsilon']:.3f}, "
              f"within {record['honest_within']:.2f}, power {record['power']}, tightness {record['tightness']:.2f}, "
              f"{record['seconds']:.0f} s", flush=True)
    minutes = write_results(stem, measured, ideal_records, ideal_seconds, file_seeds, args.quick, merge=bool(args.only))
    print(f"this run {(time.perf_counter() - started) / 60:.1f} min; all rows {minutes:.1f} min", flush=True)


if __name__ == "__main__":
    main()
