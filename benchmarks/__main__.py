"""``python -m benchmarks quick`` (about 3 minutes on 2 cores) or ``python -m benchmarks full`` (30 minutes on
2 cores, timed in one run: ``benchmarks/results/full_summary.md``); ``python -m benchmarks scale [options]``
runs the scale-out section alone (:mod:`benchmarks.scale`: sparse text features).

Runs the speed, utility and rates benchmarks and writes, under ``benchmarks/results/``: one markdown
table and one JSON file per benchmark (and per utility dataset), PNG plots when matplotlib is
installed, and ``{mode}_summary.md`` with the machine, the speed ratios, the performance-goal check,
the rates, the utility rows at epsilon = 1 and the sparse benchmark (``sparse.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from . import ledger, rates, scale, sparse, speed, utility
from .machine import machine_info

MODES = {
    "quick": dict(
        speed_sizes=(10**4, 10**5, 10**6), speed_entries=("DPLogisticRegression [snowball]",), repeats=1,
        utility_datasets=("breast_cancer", "digits_binary", "diabetes", "synthetic_logistic_1e4"),
        algorithms=("auto",), seeds=10, rate_sizes=(10**3, 10**4, 10**5), rate_seeds=5,
        growth_sizes=(8000, 32000, 128000, 512000), growth_seeds=10,
        ledger_histories=("default DPLogisticRegression()", "Gaussian + randomized response"),
    ),
    "full": dict(
        speed_sizes=(10**4, 10**5, 10**6), speed_entries=tuple(speed.SPEED_ENTRIES), repeats=3,
        utility_datasets=tuple(utility.DATASETS), algorithms=("auto", "snowball", "phased_sgd"), seeds=10,
        rate_sizes=(10**3, 10**4, 10**5, 10**6), rate_seeds=10,
        growth_sizes=(8000, 32000, 128000, 512000, 2048000), growth_seeds=30,
        ledger_histories=tuple(ledger.HISTORIES),
    ),
}


def _epsilon_one_rows(table: str) -> str:
    return "\n".join(line for line in table.splitlines() if line.startswith("|") and
                     (line.split("|")[2].strip() in ("ε", "---", "—", "1")))


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["scale"]:
        scale.main(argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=sorted(MODES))
    args = parser.parse_args(argv)
    config = MODES[args.mode]
    results = utility.RESULTS
    results.mkdir(exist_ok=True)
    started = time.perf_counter()
    info = machine_info()
    summary = [f"# Benchmark summary ({args.mode})", "", "Machine: " + json.dumps(info), ""]

    speed_records = speed.run(config["speed_sizes"], config["speed_entries"], config["repeats"])
    slope_by_model = speed.slopes(speed_records)
    goal = speed.goal_check(speed_records, slope_by_model)
    speed_table = speed.table(speed_records, slope_by_model)
    (results / f"speed_{args.mode}.md").write_text(speed_table + "\n")
    (results / f"speed_{args.mode}.json").write_text(json.dumps(
        {"machine": info, "records": speed_records, "slopes": slope_by_model, "goal": goal}, indent=1))
    print(speed_table, "\ngoal:", goal, flush=True)
    summary += ["## Speed and memory (d = 100)", "", speed_table, "", f"Performance goal: {goal}", ""]

    rate_records = rates.run(config["rate_sizes"], config["rate_seeds"])
    medians, rate_slopes = rates.summary(rate_records)
    rate_table = rates.table(medians, rate_slopes)
    (results / f"rates_{args.mode}.md").write_text(rate_table + "\n")
    (results / f"rates_{args.mode}.json").write_text(json.dumps({"records": rate_records, "slopes": rate_slopes}, indent=1))
    print(rate_table, flush=True)
    summary += ["## Rates (epsilon = 1, synthetic logistic, d = 10)", "", rate_table, ""]

    growth_medians, growth_slopes = rates.growth_rates(config["growth_sizes"], config["growth_seeds"])
    growth_table = rates.growth_table(growth_medians, growth_slopes)
    (results / f"growth_rates_{args.mode}.md").write_text(growth_table + "\n")
    print(growth_table, flush=True)
    summary += ["## Rates under kappa-growth ('epoch_growth', kappa-power regression, epsilon = 1)", "",
                growth_table, ""]

    # the full run's tables are utility_<name>.*; the quick run's do not overwrite them
    suffix = "" if args.mode == "full" else f"_{args.mode}"
    summary += [f"## Utility at epsilon = 1 (all epsilons in utility_*{suffix}.md)", ""]
    for name in config["utility_datasets"]:
        dataset = utility.DATASETS[name]
        records = utility.run(dataset, utility.EPSILONS, config["algorithms"], config["seeds"])
        table = utility.write(name, records, dataset.task, config["seeds"], suffix)
        utility.plot(name, records, dataset.task, suffix)
        print(f"\n### {name}\n\n{table}", flush=True)
        summary += [f"### {name} ({dataset.task}, {config['seeds']} seeds)", "", _epsilon_one_rows(table), ""]

    sparse_table = sparse.run(args.mode)  # writes sparse_{mode}.{md,json}
    print(f"\n### sparse\n\n{sparse_table}", flush=True)
    summary += ["## Sparse high-dimensional logistic regression (l1 FTRL against the l2 solvers)", "",
                sparse_table, ""]

    ledger_page = ledger.run(config["ledger_histories"])  # the full run's is ledger.md
    (results / ("ledger.md" if args.mode == "full" else f"ledger_{args.mode}.md")).write_text(ledger_page)
    ledger_table = "\n".join(line for line in ledger_page.splitlines() if line.startswith("|"))
    summary += ["## The ledger's cost per fit (charge after 10, 100, 1000 recorded fits)", "", ledger_table, ""]

    minutes = (time.perf_counter() - started) / 60
    summary += [f"Total run time: {minutes:.1f} min."]
    (results / f"{args.mode}_summary.md").write_text("\n".join(summary) + "\n")
    print(f"\nwrote {results}/{args.mode}_summary.md in {minutes:.1f} min")


if __name__ == "__main__":
    np.seterr(over="ignore")
    main()
