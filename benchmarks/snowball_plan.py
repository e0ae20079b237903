"""Snowball's planning time in a fit's first call, each configuration in a fresh process.

``python -m benchmarks.snowball_plan [--n N] [--d D]`` writes ``benchmarks/results/snowball_plan.md``
(and ``.json``). For ``DPLogisticRegression(algorithm='snowball')`` and ``'snowball_constant'`` at
epsilon 0.3 and 1, in a new interpreter (no conversion or plan cached yet), it fits isotropic rows
(:func:`benchmarks.engine.make_rows`) twice and prints: the seconds spent inside the solver's
``plan`` over all the calls the fit's privacy calibration makes (wall and CPU time, and their count:
the CPU time is the steadier on a shared machine), the first fit's
wall time and the second's (the same estimator again: every plan and conversion cached), and the
plan chosen (``kappa``, ``T``) and sha256 digests of the fit's plan (batch sizes, steps, rho, noise)
and model, so that a change of the planning code can be checked to leave them unchanged. A plan
builds its arrays when they are first read (:class:`skdpsco.solvers.snowball.SnowballPlan`): the
run plan's, about 20 ms at ``T = 10^6``, are then counted in the fit's time, not in ``plan``'s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from .utility import RESULTS

CONFIGS = [(algorithm, epsilon) for algorithm in ("snowball", "snowball_constant") for epsilon in (0.3, 1.0)]


def measure(n: int, d: int, algorithm: str, epsilon: float) -> dict:
    """One configuration's record, measured in this process (call it in a fresh one)."""
    from skdpsco import DPLogisticRegression, PrivacyAccountant
    from skdpsco.solvers import SnowballSGD

    from .engine import make_rows

    X, labels, _ = make_rows(n, d, badly_scaled=False)
    planned = {"seconds": 0.0, "cpu_seconds": 0.0, "calls": 0, "last": None}
    plan = SnowballSGD.plan

    def timed_plan(self, problem):
        start, cpu_start = time.perf_counter(), time.process_time()
        try:
            planned["last"] = plan(self, problem)
            return planned["last"]
        finally:
            planned["seconds"] += time.perf_counter() - start
            planned["cpu_seconds"] += time.process_time() - cpu_start
            planned["calls"] += 1

    SnowballSGD.plan = timed_plan

    def fit():
        start = time.perf_counter()
        model = DPLogisticRegression(epsilon=epsilon, algorithm=algorithm, classes=[0, 1], random_state=0,
                                     accountant=PrivacyAccountant()).fit(X, labels)
        return model, time.perf_counter() - start

    model, first = fit()
    first_plan = dict(planned)
    last = first_plan["last"]
    _, second = fit()
    info = model.solver_info_ if hasattr(model, "solver_info_") else {}
    return {
        "n": n, "d": d, "algorithm": algorithm, "epsilon": epsilon,
        "plan_s": first_plan["seconds"], "plan_cpu_s": first_plan["cpu_seconds"], "plan_calls": first_plan["calls"],
        "first_fit_s": first, "second_fit_s": second,
        "kappa": info.get("noise_multiplier"), "n_steps": info.get("n_steps"),
        "epsilon_spent": float(model.epsilon_),
        # digests of the fit's plan and model: equal before and after a change of the planning code
        "plan_sha": _digest(last.batch_sizes, last.steps, [last.rho, last.noise_std]),
        "coef_sha": _digest(model.coef_, model.intercept_),
    }


def _digest(*arrays) -> str:
    import hashlib

    import numpy as np

    return hashlib.sha256(b"".join(np.ascontiguousarray(a, dtype=float).tobytes() for a in arrays)).hexdigest()[:16]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--output", default="snowball_plan")
    parser.add_argument("--one", nargs=2, metavar=("ALGORITHM", "EPSILON"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.n, args.d, args.one[0], float(args.one[1]))))
        return
    records = []
    for algorithm, epsilon in CONFIGS:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.snowball_plan", "--n", str(args.n), "--d", str(args.d),
             "--one", algorithm, str(epsilon)], check=True, capture_output=True, text=True,
        ).stdout
        records.append(json.loads(out.strip().splitlines()[-1]))
        print(records[-1], flush=True)
    lines = [
        "# Snowball planning in a fit's first call (fresh process each row)", "",
        "| n | d | algorithm | epsilon | plan s (calls) | plan CPU s | first fit s | second fit s | kappa | T | plan, model sha256 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(f"| {r['n']} | {r['d']} | {r['algorithm']} | {r['epsilon']} | {r['plan_s']:.3f} "
                     f"({r['plan_calls']}) | {r['plan_cpu_s']:.3f} | {r['first_fit_s']:.2f} | {r['second_fit_s']:.2f} | {r['kappa']} | "
                     f"{r['n_steps']} | {r['plan_sha']}, {r['coef_sha']} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.output}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{args.output}.json").write_text(json.dumps(records, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
