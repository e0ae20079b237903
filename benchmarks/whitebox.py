"""White-box sensitivity audits (issue 18): every noisy release against the sensitivity its plan claims.

A black-box audit (:mod:`benchmarks.audits`) sees outputs only and needs thousands of fits to
notice a factor 2. Here the mechanism is opened up instead, and the check is deterministic:

1. **Observe every release.** Each mechanism draws the noise of a release ``value + noise``
   through :func:`skdpsco._noise.release_noise`; :func:`observed` replaces it to record
   ``(value, scale, kind)`` of every release (the compiled SGD loop is replaced by its numpy
   reference, which gives the same iterates and releases each noisy gradient there).
2. **Neighbouring datasets, coupled noise.** The mechanism runs on ``D`` and on ``D'`` (one row
   replaced) with the same seed, hence the same noise draws.
3. **Replay.** In adaptive compositions a release's sensitivity is a bound *given the released
   history*; so on ``D'`` every release is forced to return the value released on ``D`` (the
   hook returns the noise ``released_D - value_D'``): release ``k`` on ``D'`` is then computed
   from ``D``'s history, and its realised shift ``||value_D' - value_D||`` (``l2`` for Gaussian
   noise, ``l1`` for Laplace noise) must be at most the sensitivity the plan claims for it,
   derived from the noise scale actually drawn and the ``DpEvent`` actually accounted
   (:func:`release_claims`): ``scale / z`` for a Gaussian event ``z = sigma / Delta``,
   ``scale / (z sqrt(m))`` for ``m`` equal releases composed into one Gaussian, ``scale epsilon``
   (``l1``) for Laplace noise of a pure ``epsilon``-DP event. The tree of a ``partial_fit`` stream
   (private FTRL, :mod:`skdpsco.solvers.tree`): each node ``2 C = scale / z``, and the nodes
   together ``2 C sqrt(depth)`` (:func:`tree_ratio`). ``DPPCA``: its row bound and scaling (or
   mean) against their events, then the upper triangle of ``Z^T Z`` against ``sqrt(2)``
   (:func:`pca_claims`).
4. **Whole-trajectory bounds.** Amplification by iteration (Snowball, PNSGD) accounts for the
   last iterate only: its event allows a row of batch ``t`` to shift the iterate by
   ``sqrt(2 rho sum_{s >= t} eta_s**2 tau_s**2)`` (:func:`skdpsco.accounting.amplification_by_iteration_rho`,
   pooled noise ``tau``), and contraction keeps every later coupled shift below it. The realised
   largest coupled shift of the iterates is compared with that.
5. **Adversarial neighbours** (:func:`neighbour_pairs`): the differing row at the corners of the
   clipped ball (``+-B`` along every axis, and the diagonals scaled to ``B``), with every label
   (both signs, ``+-y_bound`` for regression, every class), with and without an intercept column
   (rows ``(u, c)`` of norm ``B``), at the first, middle and last position, on random backgrounds.
6. **Power.** Each check is rerun with the noise scale of every release halved while the event
   is unchanged (for trajectory checks: the plan's noise halved), and with rows of twice the
   clipping bound: a check whose honest worst ratio exceeds 1/2 fails under both, deterministically.
   The report gives the catch rate: the neighbours of the search at which a mutation fails.

``python -m benchmarks.whitebox [--quick]`` writes ``benchmarks/results/whitebox.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dp_accounting
import numpy as np

from skdpsco import _noise
from skdpsco.accounting import FailureProbabilityDpEvent, PrivacyAccountant
from skdpsco.losses import HingeLoss, HuberLoss, LogisticLoss
from skdpsco.smoothing import smooth
from skdpsco.solvers import ALGORITHMS, Problem, _core
from skdpsco.solvers.ftrl import StreamFTRL, StreamState, stream_steps
from skdpsco.solvers.growth import EpochGrowth, Localization
from skdpsco.solvers.holder import OutputPerturbationSGD
from skdpsco.solvers.snowball import noise_every

from .utility import write_with_notes

TOLERANCE = 1e-9
"""Relative slack of the check ``realised <= claimed (1 + TOLERANCE)`` (floating point only)."""

RESULTS = Path(__file__).resolve().parent / "results" / "whitebox.md"


# -- observing releases ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """One noisy release: the value before noise, the noise scale and kind, and what was released."""

    value: np.ndarray
    scale: float
    kind: str  # 'gaussian' (standard deviation) or 'laplace' (scale)
    released: np.ndarray


@dataclass
class Observation:
    releases: list
    iterates: list


@contextmanager
def observed(replay: list | None = None, noise_factor: float = 1.0):
    """Within the block, record every release (:class:`Release`) and every SGD iterate.

    ``replay``: the releases of a run on the neighbouring dataset; release ``k`` then returns
    the noise that makes the released value that run's ``k``-th release. The noise is still
    drawn (the generator advances as in production). ``noise_factor`` multiplies the scale of
    every release (the mutation: a plan whose noise is off by that factor, event unchanged).
    """
    observation = Observation([], [])
    release_noise, uses_kernel, project = _noise.release_noise, _core.uses_kernel, _core.project_to_ball

    def hook(value, scale, rng, draw=None):
        scale = scale * noise_factor
        noise = release_noise(value, scale, rng, draw)
        value = np.array(value, dtype=float)
        k = len(observation.releases)
        if replay is not None:
            if k >= len(replay) or replay[k].scale != scale:
                raise AssertionError(f"release {k}: the neighbour's run has a different schedule of releases")
            noise = replay[k].released - value
        kind = "gaussian" if draw is None else "laplace"  # the only other draw point (_noise.laplace_noise)
        observation.releases.append(Release(value, float(scale), kind, value + noise))
        return noise

    def recording_projection(w, radius):
        out = project(w, radius)
        observation.iterates.append(np.array(out, dtype=float))
        return out

    _noise.release_noise, _core.uses_kernel, _core.project_to_ball = hook, (lambda *args: False), recording_projection
    try:
        yield observation
    finally:
        _noise.release_noise, _core.uses_kernel, _core.project_to_ball = release_noise, uses_kernel, project


# -- claims ------------------------------------------------------------------------------------------------


def _unwrap(event):
    """The per-release event inside the wrappers the library uses."""
    while True:
        if isinstance(event, FailureProbabilityDpEvent):
            event = event.event
        elif isinstance(event, (dp_accounting.SelfComposedDpEvent, dp_accounting.SampledWithoutReplacementDpEvent)):
            event = event.event
        else:
            return event


def release_claims(releases: list, event, composed: bool = False) -> np.ndarray:
    """Claimed sensitivity of every release, from its noise scale and the accounted event.

    ``composed``: every row enters every release (noisy GD), and the event is the single
    Gaussian the ``m`` equal releases compose to (Dong, Roth & Su 2022, Cor. 3.3), so each has
    ``scale / (z sqrt(m))``. Otherwise every release is one per-release event of its own
    (parallel composition over disjoint rows, or one event per release).
    """
    event = _unwrap(event)
    scales = np.array([r.scale for r in releases])
    if isinstance(event, dp_accounting.GaussianDpEvent):
        divisor = event.noise_multiplier * (math.sqrt(len(releases)) if composed else 1.0)
        return scales / divisor
    if isinstance(event, dp_accounting.RandomizedResponseDpEvent):  # pure epsilon-DP, Laplace: l1
        return scales * math.log(2.0 / event.noise_parameter - 1.0)
    raise TypeError(f"no per-release claim for {event!r}")


def composed_releases(event) -> int:
    """Gaussian releases the accounted ``event`` composes (of one row's sensitivity each): a
    tree's :func:`~skdpsco.solvers.tree.tree_depth` per task."""
    event = event.event if isinstance(event, FailureProbabilityDpEvent) else event
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return sum(composed_releases(e) for e in event.events)
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return event.count * composed_releases(event.event)
    if isinstance(event, dp_accounting.GaussianDpEvent):
        return 1
    raise TypeError(f"no count of Gaussian releases for {event!r}")


def tree_ratio(ratios: np.ndarray, event) -> float:
    """Worst of a tree's per-node ratios (realised / ``2 C``) and of their root sum of squares
    over the ``sqrt(m)`` that the event's ``m`` composed releases allow (each node that holds the
    differing row moves by at most ``2 C`` and at most ``depth`` nodes per task hold it,
    :mod:`skdpsco.solvers.tree`: a row in more nodes than the event composes passes the first and
    fails the second)."""
    return float(max(np.max(ratios), np.linalg.norm(ratios) / math.sqrt(composed_releases(event))))


def last_iterate_claim(scale: float, rho: float, burn_in: int, step: float, radius: float) -> float:
    """Gradient sensitivity ``Delta`` that noisy GD's last-iterate event allows:
    ``rho s**2 = (2 R / eta + k Delta)**2 / (2 k)`` (:mod:`skdpsco.solvers.noisy_gd`, analysis 2).
    0 when the noise cannot pay even for the diameter term (any shift then exceeds the claim)."""
    return max(0.0, (math.sqrt(2.0 * burn_in * rho) * scale - 2.0 * radius / step) / burn_in)


def shifts(base: list, neighbour: list) -> np.ndarray:
    """Realised shift of each release: ``l2`` for Gaussian noise, ``l1`` for Laplace noise."""
    if len(base) != len(neighbour):
        raise AssertionError("the neighbouring runs made different numbers of releases")
    order = {"gaussian": 2, "laplace": 1}
    return np.array([np.linalg.norm((b.value - o.value).ravel(), ord=order[b.kind]) for b, o in zip(base, neighbour)])


# -- neighbours ----------------------------------------------------------------------------------------------


def corner_rows(n_features: int, norm: float, diagonals: bool, intercept: float | None = None) -> np.ndarray:
    """Corners of the clipped ball: ``+-norm`` along every axis and (``diagonals``) the sign
    vectors of the first two coordinates and of all of them, scaled to ``norm``. With
    ``intercept = c`` the last column is ``c`` and the others have norm ``sqrt(norm**2 - c**2)``."""
    d = n_features - (intercept is not None)
    free = norm if intercept is None else math.sqrt(norm**2 - intercept**2)
    rows = [s * free * np.eye(d)[i] for i in range(d) for s in (1.0, -1.0)]
    if diagonals and d > 1:
        for signs in (np.r_[1.0, 1.0, np.zeros(d - 2)], np.r_[1.0, -1.0, np.zeros(d - 2)], np.ones(d)):
            rows += [s * free * signs / np.linalg.norm(signs) for s in (1.0, -1.0)]
    rows = np.array(rows)
    return rows if intercept is None else np.hstack([rows, np.full((len(rows), 1), intercept)])


def neighbour_pairs(corners: np.ndarray, labels: list) -> list:
    """Pairs ``((x, y), (x', y'))``: every corner with every label, replaced by the opposite
    corner with the same label, the same corner with every other label, and the opposite corner
    with every other label."""
    pairs = []
    for x in corners:
        for y in labels:
            pairs.append(((x, y), (_opposite(x, corners), y)))
            for other in labels:
                if other != y:
                    pairs.append(((x, y), (x, other)))
                    pairs.append(((x, y), (_opposite(x, corners), other)))
    return pairs


def _opposite(x: np.ndarray, corners: np.ndarray) -> np.ndarray:
    """The corner opposite ``x`` (the intercept column, the same in every row, kept)."""
    flipped = -x
    if not any(np.array_equal(flipped, c) for c in corners):
        flipped[-1] = x[-1]
    return flipped


def background(n: int, n_features: int, norm: float, labels: list, seed: int, intercept: float | None = None):
    """``n`` rows uniform in the ball of radius ``norm`` (with the intercept column when given) and random labels."""
    rng = np.random.default_rng(seed)
    d = n_features - (intercept is not None)
    free = norm if intercept is None else math.sqrt(norm**2 - intercept**2)
    u = rng.normal(size=(n, d))
    X = u / np.linalg.norm(u, axis=1, keepdims=True) * free * rng.uniform(size=(n, 1)) ** (1.0 / d)
    if intercept is not None:
        X = np.hstack([X, np.full((n, 1), intercept)])
    y = np.asarray(labels, dtype=float)[rng.integers(len(labels), size=n)]
    return X, y


# -- mechanisms ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mechanism:
    """One mechanism under a white-box check.

    ``run(X, y, seed, mutated)`` runs it (``mutated``: the plan's noise halved where the check is
    on the trajectory) and returns ``(event, info)``; ``check`` is ``'releases'`` (replayed
    per-release sensitivity), ``'composed'`` (the same, releases composed into one Gaussian),
    ``'tree'`` (per-release, and the releases together against the tree's event, :func:`tree_ratio`)
    or ``'trajectory'`` (amplification by iteration); ``trajectory_claim(info, position)`` gives the
    shift the event allows for a row at ``position``.
    """

    name: str
    run: Callable
    labels: list
    check: str = "releases"
    n_samples: int = 64
    n_features: int = 3
    data_norm: float = 1.0
    trajectory_claim: Callable | None = None
    positions: tuple = (0, 32, 63)
    clip_mutation: bool = True  # False: the solver clips per-row gradients itself (private FTRL)


N, P, B, RADIUS, EPSILON, DELTA = 64, 3, 1.0, 1.0, 1.0, 1e-5
CLASSES = [-1.0, 1.0]
TARGETS = [-1.0, 1.0]  # +-y_bound
SMOOTH_HINGE = smooth(HingeLoss(), 0.05)
HUBER = HuberLoss(0.5)


def _problem(loss, n=N, p=P, radius=RADIUS, y_bound=None, l2_penalty=0.0, shape=None):
    constants = loss.constants(B, radius) if y_bound is None else loss.constants(B, radius, y_bound)
    return Problem(n, shape or (p,), loss, constants, radius, EPSILON, DELTA, l2_penalty)


def _solver_mechanism(name, algorithm, loss, labels, y_bound=None, ordered=True, l2_penalty=0.0, clips=False, **options):
    solver = ALGORITHMS[algorithm] if not options else dataclasses.replace(ALGORITHMS[algorithm], **options)

    def run(X, y, seed, mutated=False):
        problem = _problem(loss, n=X.shape[0], p=X.shape[1], y_bound=y_bound, l2_penalty=l2_penalty)
        plan = solver.plan(problem)
        kwargs = {"order": np.arange(X.shape[0])} if ordered else {}
        result = solver.run(plan, X, y, problem, np.random.default_rng(seed), **kwargs)
        return result.dp_event, {**result.info, "radius": problem.radius}

    return Mechanism(name, run, labels, clip_mutation=not clips)


def _noisy_gd_mechanism(name, loss, labels, y_bound=None, **options):
    solver = dataclasses.replace(ALGORITHMS["noisy_gd"], **options)

    def run(X, y, seed, mutated=False):
        problem = _problem(loss, n=X.shape[0], p=X.shape[1], y_bound=y_bound)
        result = solver.run(solver.plan(problem), X, y, problem, np.random.default_rng(seed))
        return result.dp_event, {**result.info, "radius": problem.radius}

    return Mechanism(name, run, labels, check="composed")


def _holder_output_mechanism(name, loss, labels):
    solver = OutputPerturbationSGD(max_steps=4 * N)

    def run(X, y, seed, mutated=False, position=0):
        problem = _problem(loss, n=X.shape[0], p=X.shape[1])
        plan = solver.plan(problem)
        # the differing row drawn as often as the plan allows (Thm 7's good event), spread over the run
        indices = np.random.default_rng(seed + 1).integers(0, X.shape[0], size=plan.n_steps)
        indices[indices == position] = (position + 1) % X.shape[0]
        hits = int(plan.max_hits)
        indices[np.linspace(0, plan.n_steps - 1, hits).astype(int)] = position
        result = solver.run(plan, X, y, problem, np.random.default_rng(seed), indices=indices)
        return result.dp_event, dict(result.info)

    return Mechanism(name, run, labels)


def _amplification_mechanism(name, algorithm, loss, labels):
    solver = ALGORITHMS[algorithm]

    def run(X, y, seed, mutated=False):
        problem = _problem(loss, n=X.shape[0], p=X.shape[1])
        plan = solver.plan(problem)
        if mutated:
            plan = dataclasses.replace(plan, noise_std=plan.noise_std / 2.0)
        result = solver.run(plan, X, y, problem, np.random.default_rng(seed), order=np.arange(X.shape[0]))
        if algorithm == "pnsgd":
            steps = np.full(X.shape[0], plan.step)
            taus, batches = steps * plan.noise_std, np.ones(X.shape[0], dtype=int)
        else:
            steps = plan.steps
            taus, batches = steps * _core.pool_noise(steps, plan.noise_std, noise_every(plan.n_steps)), plan.batch_sizes
        rho = result.dp_event.rho
        tail = np.cumsum((taus**2)[::-1])[::-1]
        return result.dp_event, {"allowed": np.sqrt(2.0 * rho * tail), "batch_sizes": np.asarray(batches)}

    def claim(info, position):
        batch = int(np.searchsorted(np.cumsum(info["batch_sizes"]), position, side="right"))
        return float(info["allowed"][batch])

    return Mechanism(name, run, labels, check="trajectory", trajectory_claim=claim)


def _growth_mechanism(name, solver, loss, labels):
    def run(X, y, seed, mutated=False):
        problem = _problem(loss, n=X.shape[0], p=X.shape[1])
        result = solver.run(solver.plan(problem), X, y, problem, np.random.default_rng(seed), order=np.arange(X.shape[0]))
        return result.dp_event, dict(result.info)

    return Mechanism(name, run, labels)


STREAM_CALLS = 8
"""Calls of the audited streams: 8 leaves, a tree of depth 4 (every row in 4 released nodes)."""


def _stream_mechanism(name, loss, labels, **options):
    """``partial_fit``'s core: :data:`STREAM_CALLS` calls of ``n / STREAM_CALLS`` consecutive rows,
    each one leaf of the tree (:func:`~skdpsco.solvers.ftrl.stream_steps`); every node's noisy sum
    of clipped gradients is a release."""
    solver = StreamFTRL(**options)

    def run(X, y, seed, mutated=False):
        problem = _problem(loss, n=X.shape[0], p=X.shape[1])
        plan = solver.plan(problem, STREAM_CALLS)
        state, rng = StreamState.start(plan, problem.coef_shape), np.random.default_rng(seed)
        for rows, targets in zip(np.array_split(X, STREAM_CALLS), np.array_split(y, STREAM_CALLS), strict=True):
            stream_steps(plan, state, rows, targets, problem, rng)
        return plan.dp_event, plan.info()

    return Mechanism(name, run, labels, check="tree", clip_mutation=False)


def mechanisms() -> dict:
    """The catalogue of solver-level white-box checks (tight losses: the smoothed hinge, whose
    derivative is about ``+-1`` at small margins, and the Huber loss at ``|y| > threshold``;
    the logistic loss, whose gradient bound ``B sigma(B R)`` is not attained near ``w = 0``, for
    comparison)."""
    catalogue = [
        _solver_mechanism("phased_sgd", "phased_sgd", SMOOTH_HINGE, CLASSES),
        _solver_mechanism("phased_sgd (logistic)", "phased_sgd", LogisticLoss(), CLASSES),
        _solver_mechanism("phased_sgd (average)", "phased_sgd", SMOOTH_HINGE, CLASSES, average=True),
        _solver_mechanism("phased_sgd (huber)", "phased_sgd", HUBER, TARGETS, y_bound=1.0),
        _solver_mechanism("phased_erm", "phased_erm", SMOOTH_HINGE, CLASSES),
        _solver_mechanism("strongly_convex", "strongly_convex", SMOOTH_HINGE, CLASSES, l2_penalty=0.05),
        _growth_mechanism("localization (gaussian)", Localization(noise="gaussian"), SMOOTH_HINGE, CLASSES),
        _growth_mechanism("localization (laplace)", Localization(noise="laplace"), SMOOTH_HINGE, CLASSES),
        _growth_mechanism("epoch_growth (gaussian)", EpochGrowth(noise="gaussian"), SMOOTH_HINGE, CLASSES),
        _growth_mechanism("epoch_growth (laplace)", EpochGrowth(noise="laplace"), SMOOTH_HINGE, CLASSES),
        _solver_mechanism("ftrl (R^d, batch 1)", "ftrl", SMOOTH_HINGE, CLASSES, clips=True, batch_size=1),
        _solver_mechanism("ftrl (l1 ball, batch 4)", "ftrl", SMOOTH_HINGE, CLASSES, clips=True, constraint="l1", batch_size=4),
        _stream_mechanism("ftrl stream (tree aggregation, 8 calls)", SMOOTH_HINGE, CLASSES),
        _stream_mechanism("ftrl stream (R^d, 2 leaves a call)", SMOOTH_HINGE, CLASSES, constraint=None, steps_per_call=2),
        _noisy_gd_mechanism("noisy_gd (composition)", SMOOTH_HINGE, CLASSES, n_steps=40),
        _noisy_gd_mechanism("noisy_gd (last iterate)", SMOOTH_HINGE, CLASSES, n_steps=2000, step=0.2),
        _noisy_gd_mechanism("noisy_gd (huber)", HUBER, TARGETS, y_bound=1.0, n_steps=40),
        _solver_mechanism("gradient_perturbation", "gradient_perturbation", SMOOTH_HINGE, CLASSES, ordered=False, max_steps=4 * N),
        _holder_output_mechanism("output_perturbation", SMOOTH_HINGE, CLASSES),
        _amplification_mechanism("snowball", "snowball", SMOOTH_HINGE, CLASSES),
        _amplification_mechanism("pnsgd", "pnsgd", SMOOTH_HINGE, CLASSES),
    ]
    return {m.name: m for m in catalogue}


# -- running a check -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """The worst ratio found and where, and how many of the ratios checked exceed 1 (a mutation's
    catch rate); for a scaled fit also the worst ratio of the releases after
    the scaling (``last``: the solver's steps, ``DPPCA``'s matrix), which the scaling's may hide."""

    ratio: float = 0.0
    releases: int = 0
    neighbours: int = 0
    where: str = ""
    last: float | None = None
    checked: int = 0  # ratios compared with 1 (one per neighbour; objective perturbation: one per point)
    caught: int = 0  # of which above 1

    def update(self, ratio: float, where: str) -> None:
        self.checked += 1
        self.caught += ratio > 1.0 + TOLERANCE
        if ratio > self.ratio:
            self.ratio, self.where = float(ratio), where


def _with_row(X, y, position, row):
    X, y = X.copy(), y.copy()
    X[position], y[position] = row
    return X, y


def check_pair(mechanism: Mechanism, X, y, position, pair, seed=0, noise_factor=1.0, clip_factor=1.0) -> tuple[float, int]:
    """Worst realised / claimed over the releases of one neighbouring pair; and the number of releases."""
    first, second = ((np.asarray(x) * clip_factor, label) for x, label in pair)
    D, D_prime = _with_row(X, y, position, first), _with_row(X, y, position, second)
    run = mechanism.run
    extra = {"position": position} if "position" in run.__code__.co_varnames else {}
    mutated = noise_factor != 1.0
    if mechanism.check == "trajectory":
        with observed() as base:
            _, info = run(*D, seed, mutated, **extra)
        with observed() as other:
            run(*D_prime, seed, mutated, **extra)
        realised = max(np.linalg.norm(a - b) for a, b in zip(base.iterates, other.iterates, strict=True))
        return realised / mechanism.trajectory_claim(info, position), len(base.iterates)
    with observed(noise_factor=noise_factor) as base:
        event, info = run(*D, seed, mutated, **extra)
    with observed(replay=base.releases, noise_factor=noise_factor) as other:
        run(*D_prime, seed, mutated, **extra)
    realised = shifts(base.releases, other.releases)
    if mechanism.check == "composed" and info.get("analysis") == "last_iterate":
        claims = np.array([
            last_iterate_claim(r.scale, event.rho, info["burn_in"], info["step"], info["radius"]) for r in base.releases
        ])
    else:
        claims = release_claims(base.releases, event, composed=mechanism.check == "composed")
    with np.errstate(divide="ignore"):  # a zero claim (noise too small for any shift) gives inf: a violation
        ratios = realised / claims
    return (tree_ratio(ratios, event) if mechanism.check == "tree" else float(np.max(ratios))), len(base.releases)


def search(mechanism: Mechanism, full: bool = False, noise_factor: float = 1.0, clip_factor: float = 1.0,
           stop_above: float | None = None) -> Outcome:
    """Worst ratio over the adversarial neighbours (:func:`neighbour_pairs`): quick — axis
    corners, no intercept column, first and last position, one background; ``full`` — diagonals
    too, with and without the intercept column, first / middle / last, three backgrounds.
    ``stop_above``: return as soon as a ratio above it is found (mutation checks)."""
    outcome = Outcome()
    n, p = mechanism.n_samples, mechanism.n_features
    intercepts = (None, 0.5) if full else (None,)
    positions = mechanism.positions if full else (mechanism.positions[0], mechanism.positions[-1])
    for seed in (range(3) if full else range(1)):
        for intercept in intercepts:
            X, y = background(n, p, mechanism.data_norm, mechanism.labels, seed, intercept)
            corners = corner_rows(p, mechanism.data_norm, diagonals=full, intercept=intercept)
            for pair in neighbour_pairs(corners, mechanism.labels):
                for position in positions:
                    ratio, releases = check_pair(mechanism, X, y, position, pair, seed, noise_factor, clip_factor)
                    outcome.neighbours += 1
                    outcome.releases += releases
                    outcome.update(ratio, f"background {seed}, intercept {intercept}, position {position}, "
                                          f"row {pair[0][0].round(3).tolist()}/{pair[0][1]:g} -> "
                                          f"{pair[1][0].round(3).tolist()}/{pair[1][1]:g}")
                    if stop_above is not None and outcome.ratio > stop_above:
                        return outcome
    return outcome


# -- estimator level ----------------------------------------------------------------------------------------


def _task_multiplier(event) -> float:
    """Noise multiplier ``z`` of one task's Gaussian event: the fit's event, or each of the equal
    events its one-vs-rest tasks compose."""
    event = _unwrap(event)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        tasks = {repr(e) for e in event.events}
        if len(tasks) != 1:
            raise TypeError(f"tasks with different events: {event!r}")
        event = _unwrap(event.events[0])
    if not isinstance(event, dp_accounting.GaussianDpEvent):
        raise TypeError(f"no per-step claim for {event!r}")
    return event.noise_multiplier


def estimator_check(make, X, y, position, pair, seed=0, noise_factor=1.0) -> tuple[float, int]:
    """Worst realised / claimed over the releases of ``make().fit`` on ``X`` with row
    ``position`` replaced by ``pair[0]`` (``D``) and ``pair[1]`` (``D'``), the same
    ``random_state``, ``D'`` replayed on ``D``'s releases. The fit must release noisy GD steps
    under the composition analysis (each step of each task ``scale / (z sqrt(T))``)."""
    fits = []
    for k, row in enumerate(pair):
        Xk, yk = X.copy(), y.copy()
        Xk[position], yk[position] = row
        model = make().set_params(random_state=seed, accountant=PrivacyAccountant(epsilon=1e9, delta=0.5))
        if "feature_scaling" in model.get_params():  # the noisy GD releases alone (a private scaling composes its own event)
            model.set_params(feature_scaling=None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with observed(replay=fits[0][0].releases if k else None, noise_factor=noise_factor) as seen:
                model.fit(Xk, yk)
        fits.append((seen, model))
    (base, model), (other, _) = fits
    info = model.solver_info_
    if info.get("analysis") != "composition":
        raise ValueError(f"estimator checks cover noisy GD's composition analysis; got {info!r}")
    realised = shifts(base.releases, other.releases)
    claims = np.array([r.scale for r in base.releases]) / (_task_multiplier(model.dp_event_) * math.sqrt(info["n_steps"]))
    return float(np.max(realised / claims)), len(base.releases)


def stream_check(make, X, y, position, pair, seed=0, noise_factor=1.0) -> tuple[float, int]:
    """:func:`estimator_check` for a ``partial_fit`` stream: ``make()`` (with
    ``max_partial_fit_calls``) takes the rows in that many calls of consecutive rows, each call one
    leaf of every task's tree; every node's noisy gradient sum on ``D'`` is replayed on ``D``'s
    and checked against ``2 C = scale / z`` of the task's event, and the nodes together against
    the tree's depth (:func:`tree_ratio`)."""
    streams = []
    for k, row in enumerate(pair):
        Xk, yk = _with_row(X, y, position, row)
        model = make().set_params(random_state=seed, accountant=PrivacyAccountant(epsilon=1e9, delta=0.5))
        calls = model.max_partial_fit_calls
        with observed(replay=streams[0][0].releases if k else None, noise_factor=noise_factor) as seen:
            for rows, targets in zip(np.array_split(Xk, calls), np.array_split(yk, calls), strict=True):
                model.partial_fit(rows, targets)
        streams.append((seen, model))
    (base, model), (other, _) = streams
    claims = np.array([r.scale for r in base.releases]) / _task_multiplier(model.dp_event_)
    return tree_ratio(shifts(base.releases, other.releases) / claims, model.dp_event_), len(base.releases)


@dataclass(frozen=True)
class EstimatorCase:
    """An estimator path: ``make()`` builds the unfitted estimator, rows in raw feature space.

    ``check``: the check of one neighbouring pair (:func:`estimator_check`, :func:`stream_check`);
    for a scaled fit (:func:`scaled_estimator_search`) ``claims(model, releases)`` gives every
    release's claim and the number of releases before the last mechanism
    (:func:`scaled_fit_claims`, :func:`pca_claims`), and ``scales(case, X, y, seed)`` the feature
    scales the fit releases on ``X`` (:func:`scaled_background_scales`, :func:`pca_scales`)."""

    name: str
    make: Callable
    labels: list
    n_samples: int = 48
    n_features: int = 3
    data_norm: float = 1.0
    check: Callable | None = None
    claims: Callable | None = None
    scales: Callable | None = None


def estimator_cases() -> dict:
    from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression

    common = dict(epsilon=1.0, delta=1e-5, data_norm=1.0)
    cases = [
        EstimatorCase("DPLogisticRegression auto -> noisy_gd, intercept", lambda: DPLogisticRegression(**common), [0, 1]),
        EstimatorCase("DPLogisticRegression auto, no intercept",
                      lambda: DPLogisticRegression(fit_intercept=False, **common), [0, 1]),
        EstimatorCase("DPLogisticRegression multinomial (3 classes)", lambda: DPLogisticRegression(**common), [0, 1, 2]),
        EstimatorCase("DPHingeSVM one-vs-rest (3 classes, smoothed)", lambda: DPHingeSVM(**common), [0, 1, 2]),
        EstimatorCase("DPHingeSVM binary (smoothed)", lambda: DPHingeSVM(**common), [0, 1]),
        # p = 2, noisy GD: 'auto' picks 'newton' for p = 2 since issue 15 item 3 (its releases are
        # checked on worst-case neighbours in tests/test_newton_least_squares.py), so it is named here
        EstimatorCase("DPLpRegression auto (Huber/LAD)",
                      lambda: DPLpRegression(y_bound=1.0, algorithm="noisy_gd", **common), [-1.0, 1.0]),
        # partial_fit: data_norm and no scaling; 4 calls of 12 rows, a tree of depth 3 per task
        EstimatorCase("DPHingeSVM partial_fit stream (binary, 4 calls)",
                      lambda: DPHingeSVM(classes=[0, 1], feature_scaling=None, max_partial_fit_calls=4, **common),
                      [0, 1], check=stream_check),
        EstimatorCase("DPHingeSVM partial_fit stream (3 classes, one tree per task)",
                      lambda: DPHingeSVM(classes=[0, 1, 2], feature_scaling=None, max_partial_fit_calls=4, **common),
                      [0, 1, 2], check=stream_check),
    ]
    return {c.name: c for c in cases}


def estimator_search(case: EstimatorCase, full: bool = False, noise_factor: float = 1.0, clip_factor: float = 1.0,
                     stop_above: float | None = None) -> Outcome:
    """:func:`search` for an estimator path: raw rows at the corners of the ball of radius
    ``data_norm`` (the estimator appends and scales the intercept column itself)."""
    outcome = Outcome()
    n, p = case.n_samples, case.n_features
    positions = (0, n // 2, n - 1) if full else (0, n - 1)
    for seed in (range(2) if full else range(1)):
        X, y = background(n, p, case.data_norm, case.labels, seed)
        y = y.astype(type(case.labels[0]))
        corners = corner_rows(p, case.data_norm, diagonals=full)
        pairs = neighbour_pairs(corners, case.labels)
        for pair in pairs if full else pairs[: 4 * len(case.labels) ** 2]:
            scaled = tuple((np.asarray(x) * clip_factor, label) for x, label in pair)
            for position in positions:
                ratio, releases = (case.check or estimator_check)(case.make, X, y, position, scaled, seed, noise_factor)
                outcome.neighbours += 1
                outcome.releases += releases
                outcome.update(ratio, f"background {seed}, position {position}, row {pair[0][0].round(3).tolist()}/"
                                      f"{pair[0][1]} -> {pair[1][0].round(3).tolist()}/{pair[1][1]}")
                if stop_above is not None and outcome.ratio > stop_above:
                    return outcome
    return outcome


def scaler_search(full: bool = False, noise_factor: float = 1.0, clip_factor: float = 1.0,
                  stop_above: float | None = None) -> Outcome:
    """:class:`~skdpsco.preprocessing.DPStandardScaler`'s two releases (centred mean and second
    moment), the differing row at a vertex of the public box replaced by the opposite vertex or
    by the midpoint (``clip_factor`` scales the box the rows come from, not the public bounds)."""
    from skdpsco.preprocessing import DPStandardScaler

    outcome = Outcome()
    n, p, bound = 48, 3, 2.0
    vertices = np.array(np.meshgrid(*[[-bound, bound]] * p)).reshape(p, -1).T
    if not full:
        vertices = vertices[:2]
    for seed in (range(3) if full else range(1)):
        X = np.random.default_rng(seed).uniform(-bound, bound, size=(n, p))
        for v in vertices:
            for other in (-v, np.zeros(p)):
                for position in ((0, n // 2, n - 1) if full else (0,)):
                    fits = []
                    for k, row in enumerate((v, other)):
                        Xk = X.copy()
                        Xk[position] = row * clip_factor
                        scaler = DPStandardScaler(epsilon=1.0, delta=1e-5, feature_bounds=(-bound, bound), random_state=seed,
                                                  accountant=PrivacyAccountant(epsilon=1e9, delta=0.5))
                        with observed(replay=fits[0][0].releases if k else None, noise_factor=noise_factor) as seen:
                            scaler.fit(Xk)
                        fits.append((seen, scaler))
                    (base, scaler), (neighbour, _) = fits
                    ratio = float(np.max(shifts(base.releases, neighbour.releases)
                                         / release_claims(base.releases, scaler.dp_event_)))
                    outcome.neighbours += 1
                    outcome.releases += len(base.releases)
                    outcome.update(ratio, f"background {seed}, position {position}, row {v.tolist()} -> {other.tolist()}")
                    if stop_above is not None and outcome.ratio > stop_above:
                        return outcome
    return outcome


def objective_search(full: bool = False, noise_factor: float = 1.0, clip_factor: float = 1.0,
                     stop_above: float | None = None) -> Outcome:
    """Objective perturbation's linear term: the density argument needs the per-row gradients of
    the two neighbours, summed, to differ by at most ``2 L`` at **every** ``w`` (the ``b`` that
    makes ``w`` the minimiser moves by that much, :mod:`skdpsco.solvers.objective`). Checked at
    the released point of a run on ``D``, at ``0`` and at points of norm ``R`` and ``10 R`` along
    the differing rows, against ``sigma_b / z_b`` of the accounted event and the noise drawn
    (``noise_factor``: the plan's ``sigma_b`` scaled, event unchanged). The output term
    (``2 tau``) is not replayed here (that needs the exact minimiser)."""
    solver = ALGORITHMS["objective_perturbation"]
    outcome = Outcome()
    loss = SMOOTH_HINGE
    for seed in (range(3) if full else range(1)):
        for intercept in ((None, 0.5) if full else (None,)):
            X, y = background(N, P, B, CLASSES, seed, intercept)
            problem = _problem(loss, n=N, p=P)
            plan = solver.plan(problem)
            gaussian = _unwrap(plan.dp_event.gaussian.events[0])
            claim = plan.linear_noise_std * noise_factor / gaussian.noise_multiplier
            corners = corner_rows(P, B, diagonals=full, intercept=intercept)
            for (x, label), (x_other, label_other) in neighbour_pairs(corners, CLASSES):
                x, x_other = x * clip_factor, x_other * clip_factor
                with observed() as seen:
                    solver.run(plan, *_with_row(X, y, 0, (x, label)), problem, np.random.default_rng(seed))
                points = [seen.releases[0].value, np.zeros(P)]
                points += [r * u / max(np.linalg.norm(u), 1e-300) for r in (RADIUS, 10 * RADIUS) for u in (x, x_other, -x)]
                for w in points:
                    g = loss.derivative(np.array([x @ w]), np.array([label]))[0] * x
                    g_other = loss.derivative(np.array([x_other @ w]), np.array([label_other]))[0] * x_other
                    outcome.update(np.linalg.norm(g - g_other) / claim,
                                   f"background {seed}, intercept {intercept}, w = {np.round(w, 3).tolist()}, "
                                   f"row {x.round(3).tolist()}/{label:g} -> {x_other.round(3).tolist()}/{label_other:g}")
                outcome.neighbours += 1
                outcome.releases += len(points)
                if stop_above is not None and outcome.ratio > stop_above:
                    return outcome
    return outcome


# -- the private feature scaling inside fit (issue 15) ---------------------------------------------------


@contextmanager
def observed_scaled(replay: list | None = None, noise_factor: float = 1.0, clip_factor: float = 1.0):
    """:func:`observed`, also over the releases of :mod:`skdpsco.linear_model._scaling` and
    :mod:`~skdpsco.linear_model._bounds` (the private row bound a scaled fit releases on rows too
    few for the magnitudes), which bind ``release_noise`` at import (``from .._noise import
    release_noise``): replacing ``_noise.release_noise`` alone does not reach them, so the hook is
    put there too.

    ``clip_factor`` (the clipping mutation of a scaled fit, plans unchanged): every clip of the fit
    lets rows of ``clip_factor`` times its bound through — the user's ``data_norm``, the rows
    ``x / s`` clipped to ``B`` before the moments (``data_norm=None``), the centred rows clipped
    before their squares are summed, the standardised rows the solver reads (clipped to
    ``clip_factor * C``, still divided by ``C``), and ``DPPCA``'s clips to ``data_norm``.
    """
    from skdpsco import rows
    from skdpsco.linear_model import _bounds, _scaling
    from skdpsco.rows import _dense, _fused

    patched = {}
    if clip_factor != 1.0:
        clip, standardise = _dense.clip_rows, _dense.standardise_rows
        gathers = {layout: layout.clipped_rows_in_order for layout in (rows.DENSE, rows.CSR)}
        sparse_clip = rows.CSR.clip_rows
        fused = {name: getattr(_fused, name) for name in ("divide_clip_and_sum", "centred_square_sums", "standardise")}

        def loose_standardise(rows, mean, scale, clip_norm):
            standardise(rows, mean, scale, clip_factor * clip_norm)
            rows *= clip_factor

        def loose_fused_standardise(rows, n_features, mean, scale, clip_norm):
            fused["standardise"](rows, n_features, mean, scale, clip_factor * clip_norm)
            rows[:, :n_features] *= clip_factor

        def loose_gather(layout):
            return lambda X, order, max_norm, fill=None, **counting: gathers[layout](
                X, order, clip_factor * max_norm, fill, **counting)

        def loose_clip(X, max_norm, out=None):
            return clip(X, clip_factor * max_norm, out=out)

        # every clip of the rows' layouts (:mod:`skdpsco.rows`): the layouts' methods, which the
        # estimators, the passes (the centred squares' clip too) and DPPCA call, and the dense
        # standardisation, each loosened once
        patched = {
            (rows.DENSE, "clip_rows"): loose_clip,
            (rows.CSR, "clip_rows"): lambda X, max_norm, out=None: sparse_clip(X, clip_factor * max_norm, out=out),
            (rows.DENSE, "clipped_rows_in_order"): loose_gather(rows.DENSE),
            (rows.CSR, "clipped_rows_in_order"): loose_gather(rows.CSR),
            (_dense, "standardise_rows"): loose_standardise,
            # the in-memory rows' fused passes (:mod:`skdpsco.rows._fused`): the same clips, loosened
            (_fused, "divide_clip_and_sum"): lambda rows, d, scales, bound: fused["divide_clip_and_sum"](
                rows, d, scales, clip_factor * bound),
            (_fused, "centred_square_sums"): lambda rows, d, mean, clip: fused["centred_square_sums"](
                rows, d, mean, clip_factor * clip),
            (_fused, "standardise"): loose_fused_standardise,
        }
    # an instance attribute shadows its class's method: restored by deleting it (``None``), not by setting it
    originals = {key: key[0].__dict__.get(key[1]) for key in patched}
    scaling_release, bound_release = _scaling.release_noise, _bounds.release_noise
    with observed(replay=replay, noise_factor=noise_factor) as observation:
        _scaling.release_noise = _bounds.release_noise = _noise.release_noise  # the hook
        for (module, name), value in patched.items():
            setattr(module, name, value)
        try:
            yield observation
        finally:
            _scaling.release_noise, _bounds.release_noise = scaling_release, bound_release
            for (owner, name), value in originals.items():
                if value is None:
                    delattr(owner, name)
                else:
                    setattr(owner, name, value)


def scaling_events(event) -> list:
    """The events of the scaling releases, in the order they are drawn: the magnitudes'
    (``data_norm=None``), the sums' (with an intercept) and the centred squares'."""
    return list(event.events) if isinstance(event, dp_accounting.ComposedDpEvent) else [event]


def scaling_claims(releases: list, event) -> np.ndarray:
    """Claimed sensitivity of each scaling release against its own event (:func:`release_claims`):
    ``scale / z`` for a Gaussian event (``sqrt(2 d)`` for the magnitudes, 2 for the sums,
    ``sqrt(2)`` for the centred squares as planned), ``scale epsilon`` (``l1``) for Laplace noise
    of a pure event (``2 d``, ``2 sqrt(d)``, 2)."""
    events = scaling_events(event)
    if len(releases) < len(events):
        raise AssertionError(f"{len(releases)} releases for the {len(events)} scaling events {event!r}")
    return np.concatenate([release_claims([r], e) for r, e in zip(releases, events)])


SCALING_BIG, SCALING_TINY = 2.0**60, 2.0**-30
"""Entries far above and far below every feature's order of magnitude: ``SCALING_BIG`` beyond the
histogram's top bin ``2**40`` and every scale it can release, so that a row at it is clipped onto
the sphere whatever the released scales (a feature whose window is not significant may keep a
noisy order up to ``2**40``, :func:`skdpsco.linear_model._scaling.release_magnitudes`)."""


def scaling_rows(n_features: int, norm: float, scales: np.ndarray | None = None) -> list:
    """Rows adversarial to the scaling releases, in the user's units.

    The corners of the ball of radius ``norm`` (``+-norm`` on every axis: ``e_1`` against ``-e_1``
    moves the sums by their ``l2`` sensitivity 2, ``e_1`` against ``e_2`` the centred squares by
    about ``sqrt(2)``; the sign vectors of the first two and of all coordinates, scaled to
    ``norm``: all against their negation moves the sums by their ``l1`` sensitivity ``2
    sqrt(d)``), the two unit vectors 120 degrees apart at angles -15 and 105 degrees in the first
    plane, and the zero row, every one but the zero row given at ``SCALING_BIG`` times its
    norm, so that the fit's clip puts it on the sphere (and a loosened clip does not: the clipping
    mutation). With ``scales`` (the rows ``x / s`` are clipped after the magnitudes,
    ``data_norm=None``) the corners are taken in the scaled units, ``scales * corner``; and rows
    at extreme orders of magnitude are added, each moving every feature's histogram:
    ``+-SCALING_BIG`` and ``SCALING_TINY`` on every feature, and ``SCALING_BIG`` on the first
    feature with ``SCALING_TINY`` on the others."""
    d = n_features
    rows = [np.zeros(d)]
    rows += list(corner_rows(d, 1.0, diagonals=True))
    if d > 1:
        for angle in (-math.pi / 12, 7 * math.pi / 12):
            rows.append(np.r_[math.cos(angle), math.sin(angle), np.zeros(d - 2)])
    if scales is None:
        return [SCALING_BIG * norm * r for r in rows]
    rows = [SCALING_BIG * scales * r for r in rows]
    rows += [SCALING_BIG * np.ones(d), -SCALING_BIG * np.ones(d), SCALING_TINY * np.ones(d),
             np.r_[SCALING_BIG, np.full(d - 1, SCALING_TINY)]]
    return rows


SCALING_FEATURE_SCALES = np.array([1e-3, 1.0, 1e3])
"""Features of the ``data_norm=None`` backgrounds, three orders of magnitude apart."""


def scaling_background(n: int, n_features: int, data_norm: float | None, labels: list, seed: int):
    """:func:`background` in the ball of radius ``data_norm``, or (``data_norm=None``) with the
    features multiplied by :data:`SCALING_FEATURE_SCALES` (cycled)."""
    X, y = background(n, n_features, 1.0 if data_norm is None else data_norm, labels, seed)
    if data_norm is None:
        X = X * np.resize(SCALING_FEATURE_SCALES, n_features)
    return X, y


@dataclass(frozen=True)
class ScalingCase:
    """The scaling releases alone, as a scaled fit draws them (``_plan_scaling``, then
    ``_standardise`` on the rows clipped as ``_fit_steps`` clips them): ``release`` is the index of
    the checked release among the scaling releases (0 the magnitudes when ``data_norm=None``)."""

    name: str
    data_norm: float | None
    pure: bool
    release: int
    n_samples: int = 48
    n_features: int = 3
    epsilons: tuple = (1.0, 1e3)  # the histogram drowned in noise (every scale 1), and released scales


def scaling_release_run(X, seed, data_norm, pure, epsilon):
    """One scaled fit's scaling releases on ``X`` (the estimator's own methods), returning the
    plan's event and the released feature scales."""
    from skdpsco import DPLogisticRegression
    from skdpsco.linear_model import _scaling
    from skdpsco.rows import DENSE

    model = DPLogisticRegression(epsilon=epsilon, delta=0.0 if pure else DELTA, data_norm=data_norm)
    n, d = X.shape
    plan = model._plan_scaling(n, d)
    norm = model._data_norm
    rows = DENSE.clipped_rows_in_order(X, np.arange(n), np.inf if norm is None else norm, fill=model._solver_data_norm)
    feature_scales, *_ = model._standardise(_scaling.feature_passes(rows, d), plan, np.random.default_rng(seed))
    return plan.dp_event, feature_scales


def scaling_cases() -> dict:
    cases = []
    for noise, pure in (("gaussian", False), ("laplace", True)):
        cases += [
            ScalingCase(f"feature scaling: magnitudes ({noise}, data_norm=None)", None, pure, 0),
            ScalingCase(f"feature scaling: sums after magnitudes ({noise}, data_norm=None)", None, pure, 1),
            ScalingCase(f"feature scaling: centred squares after magnitudes ({noise}, data_norm=None)", None, pure, 2),
            ScalingCase(f"feature scaling: sums ({noise}, data_norm=1)", 1.0, pure, 0),
            ScalingCase(f"feature scaling: centred squares ({noise}, data_norm=1)", 1.0, pure, 1),
        ]
    return {c.name: c for c in cases}


def scaling_check(case: ScalingCase, X, position, pair, seed=0, epsilon=1.0, noise_factor=1.0, clip_factor=1.0) -> float:
    """Realised / claimed of release ``case.release`` on ``X`` with row ``position`` replaced by
    ``pair[0]`` (``D``) and ``pair[1]`` (``D'``), coupled noise, ``D'`` replayed on ``D``'s releases."""
    runs = []
    for k, row in enumerate(pair):
        Xk = X.copy()
        Xk[position] = row
        with observed_scaled(replay=runs[0][0].releases if k else None, noise_factor=noise_factor,
                             clip_factor=clip_factor) as seen:
            event, _ = scaling_release_run(Xk, seed, case.data_norm, case.pure, epsilon)
        runs.append((seen, event))
    (base, event), (other, _) = runs
    realised = shifts(base.releases, other.releases)
    return float(realised[case.release] / scaling_claims(base.releases, event)[case.release])


def scaling_search(case: ScalingCase, full: bool = False, noise_factor: float = 1.0, clip_factor: float = 1.0,
                   stop_above: float | None = None) -> Outcome:
    """Worst ratio of one scaling release over every ordered pair of :func:`scaling_rows` (the
    corners for the ``data_norm=None`` path taken in the units of the feature scales released on
    the background), at two budgets (:attr:`ScalingCase.epsilons`); quick: one background, the
    first and last position; full: three backgrounds, first / middle / last."""
    outcome = Outcome()
    n, d = case.n_samples, case.n_features
    positions = (0, n // 2, n - 1) if full else (0, n - 1)
    for seed in (range(3) if full else range(1)):
        X, _ = scaling_background(n, d, case.data_norm, CLASSES, seed)
        for epsilon in case.epsilons:
            scales = None if case.data_norm is not None else scaling_release_run(X, seed, None, case.pure, epsilon)[1]
            rows = scaling_rows(d, 1.0 if case.data_norm is None else case.data_norm, scales)
            for i, a in enumerate(rows):
                for j, b in enumerate(rows):
                    if i == j:
                        continue
                    for position in positions:
                        ratio = scaling_check(case, X, position, (a, b), seed, epsilon, noise_factor, clip_factor)
                        outcome.neighbours += 1
                        outcome.releases += 1
                        outcome.update(ratio, f"background {seed}, epsilon {epsilon:g}, position {position}, "
                                              f"row {np.asarray(a).tolist()} -> {np.asarray(b).tolist()}")
                        if stop_above is not None and outcome.ratio > stop_above:
                            return outcome
    return outcome


def preprocessing_claims(events: list, releases: list) -> np.ndarray:
    """Claims of the releases a fit draws before its last mechanism, from their ``events``: a
    private row bound first if any (one release each), then the scaling's releases against its
    event (:func:`scaling_claims`; a single Gaussian event, e.g. ``DPPCA``'s mean, is one release)."""
    if not events:
        return np.zeros(0)
    *bound_events, scaling_event = events
    bounds = [release_claims([release], event) for release, event in zip(releases, bound_events)]
    return np.concatenate([*bounds, scaling_claims(releases[len(bounds):], scaling_event)])


def scaled_fit_claims(model, releases: list) -> tuple[np.ndarray, int]:
    """Claims of a scaled fit's releases (``feature_scaling='standard'``, noisy GD under the
    composition analysis): the private row bound's histogram when the fit releases one (rows too
    few for the per-feature magnitudes), the scaling releases against their events (:func:`scaling_claims`),
    then every noisy GD step of every task ``scale / (z sqrt(T))`` of the task's event. Returns
    the claims and the number of scaling releases."""
    *scaling, task_event = model.dp_event_.events
    head = preprocessing_claims(scaling, releases)
    info = model.solver_info_
    if info.get("analysis") != "composition":
        raise ValueError(f"scaled estimator checks cover noisy GD's composition analysis; got {info!r}")
    steps = releases[len(head):]
    if not steps:
        raise AssertionError("the scaled fit released no solver step")
    tail = np.array([r.scale for r in steps]) / (_task_multiplier(task_event) * math.sqrt(info["n_steps"]))
    return np.concatenate([head, tail]), len(head)


def scaled_estimator_check(make, X, y, position, pair, seed=0, noise_factor=1.0, clip_factor=1.0,
                           claims=scaled_fit_claims) -> tuple[np.ndarray, int]:
    """Realised / claimed of every release of the scaled fit ``make().fit`` (scaling releases,
    then the noisy GD steps on the standardised rows) with row ``position`` replaced by ``pair[0]``
    (``D``) and ``pair[1]`` (``D'``), the same ``random_state``, ``D'`` replayed on ``D``'s
    releases: the neighbour's rows are standardised with ``D``'s released statistics and every
    step is taken from ``D``'s released iterate. ``claims``: :func:`scaled_fit_claims`
    or :func:`pca_claims`. Returns the ratios and the number of scaling releases."""
    fits = []
    for k, row in enumerate(pair):
        Xk, yk = _with_row(X, y, position, row)
        model = make().set_params(random_state=seed, accountant=PrivacyAccountant(epsilon=1e9, delta=0.5))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with observed_scaled(replay=fits[0][0].releases if k else None, noise_factor=noise_factor,
                                 clip_factor=clip_factor) as seen:
                model.fit(Xk, yk)
        fits.append((seen, model))
    (base, model), (other, _) = fits
    claimed, n_scaling = claims(model, base.releases)
    return shifts(base.releases, other.releases) / claimed, n_scaling


def scaled_estimator_cases() -> dict:
    from skdpsco import DPHingeSVM, DPLogisticRegression

    common = dict(epsilon=1.0, delta=1e-5)
    cases = [
        # n = 48 rows are too few for the magnitudes at epsilon 1: the default releases one row bound
        EstimatorCase("DPLogisticRegression scaled (default, data_norm=None: row bound at n = 48) -> noisy_gd",
                      lambda: DPLogisticRegression(classes=[0, 1], **common), [0, 1], data_norm=None),
        EstimatorCase("DPLogisticRegression scaled (data_norm=None), epsilon 10: released magnitudes",
                      lambda: DPLogisticRegression(classes=[0, 1], epsilon=10.0, delta=1e-5), [0, 1], data_norm=None),
        EstimatorCase("DPLogisticRegression scaled, data_norm=1 -> noisy_gd",
                      lambda: DPLogisticRegression(classes=[0, 1], data_norm=1.0, **common), [0, 1]),
        # epsilon 3: at epsilon 1 every feature's root mean square on 48 rows is at the variance floor
        # (_scaling.VARIANCE_THRESHOLD noise standard deviations), where a row of norm B standardises to
        # a norm below the clip C: the steps would not see the differing row at their bound
        EstimatorCase("DPLogisticRegression scaled, no intercept",
                      lambda: DPLogisticRegression(classes=[0, 1], fit_intercept=False, epsilon=3.0, delta=1e-5),
                      [0, 1], data_norm=None),
        EstimatorCase("DPHingeSVM scaled one-vs-rest (3 classes, smoothed)",
                      lambda: DPHingeSVM(classes=[0, 1, 2], **common), [0, 1, 2], data_norm=None),
    ]
    return {c.name: c for c in cases}


def scaled_background_scales(case: EstimatorCase, X, y, seed: int) -> np.ndarray:
    """``feature_scales_`` of the scaled fit on the background rows (``random_state=seed``)."""
    model = case.make().set_params(random_state=seed, accountant=PrivacyAccountant(epsilon=1e9, delta=0.5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X, y).feature_scales_


def pca_claims(model, releases: list) -> tuple[np.ndarray, int]:
    """Claims of a ``DPPCA`` fit's releases (:meth:`skdpsco.decomposition.DPPCA.fit`, one event):
    the releases before the matrix (private row bound, scaling; or the mean without scaling) against
    their events (:func:`preprocessing_claims`), then the upper triangle of ``Z^T Z`` (Analyze
    Gauss on rows of norm at most 1) against ``scale / z`` of its Gaussian, the ``sqrt(2)`` of
    :func:`skdpsco.decomposition.second_moment_sensitivity`. Returns the claims and the number of
    releases before the matrix."""
    *preprocessing, matrix_event = scaling_events(model.dp_event_)
    head = preprocessing_claims(preprocessing, releases)
    matrix = releases[len(head):]
    if len(matrix) != 1:
        raise AssertionError(f"{len(matrix)} releases after the scaling; DPPCA releases one matrix")
    return np.concatenate([head, release_claims(matrix, matrix_event)]), len(head)


def pca_scales(case: EstimatorCase, X, y, seed: int) -> np.ndarray:
    """The per-feature factors ``D`` (``x - mean = D z``) a ``DPPCA`` fit on ``X`` releases
    (``random_state=seed``; the estimator's own planning and scaling, as ``fit`` runs them)."""
    from skdpsco._delta import resolve_delta
    from skdpsco.linear_model._base import _generator

    model = case.make().set_params(random_state=seed)
    plans, *_ = model._plan(*X.shape, resolve_delta(model.delta, X.shape[0]), False)
    scaling_rng, _ = _generator(seed).spawn(2)
    return model._scaled_rows(X.copy(), *plans, scaling_rng)[2]


def pca_cases() -> dict:
    """``DPPCA``'s paths: the default (private row bound, scaling, matrix), a public ``data_norm``
    with the scaling, no scaling with the private mean, and no scaling without centring (the
    matrix alone). ``y`` is ignored (one label)."""
    from skdpsco import DPPCA

    common = dict(epsilon=1.0, delta=1e-5)
    cases = [
        EstimatorCase("DPPCA default (data_norm=None: row bound, scaling, matrix)", lambda: DPPCA(**common),
                      [0], data_norm=None, claims=pca_claims, scales=pca_scales),
        EstimatorCase("DPPCA scaled, data_norm=1 (scaling, matrix)", lambda: DPPCA(data_norm=1.0, **common),
                      [0], claims=pca_claims),
        EstimatorCase("DPPCA feature_scaling=None, data_norm=1 (private mean, matrix)",
                      lambda: DPPCA(data_norm=1.0, feature_scaling=None, **common), [0], claims=pca_claims),
        EstimatorCase("DPPCA feature_scaling=None, data_norm=1, centering='none' (matrix)",
                      lambda: DPPCA(data_norm=1.0, feature_scaling=None, centering="none", **common), [0],
                      claims=pca_claims),
    ]
    return {c.name: c for c in cases}


def scaled_estimator_pairs(rows: list, labels: list, full: bool) -> list:
    """Every ordered pair of distinct rows with the same label, and every row relabelled (full);
    quick: each row against the next one and against the zero row, and each row relabelled, the
    first label only."""
    pairs = []
    for i, a in enumerate(rows):
        others = [b for j, b in enumerate(rows) if j != i] if full else [rows[(i + 1) % len(rows)], rows[0]]
        for y in labels if full else labels[:1]:
            pairs += [((a, y), (b, y)) for b in others]
            pairs += [((a, y), (a, other)) for other in labels if other != y]
    return pairs


def scaled_estimator_search(case: EstimatorCase, full: bool = False, noise_factor: float = 1.0, clip_factor: float = 1.0,
                            stop_above: float | None = None) -> Outcome:
    """:func:`search` for a scaled estimator path (every release of the fit):
    :func:`scaling_rows` (in the units of the feature scales released on the background when
    ``data_norm=None``) with every label (:func:`scaled_estimator_pairs`); quick: one background,
    first and last position; full: two backgrounds, first / middle / last."""
    outcome = Outcome()
    n, p = case.n_samples, case.n_features
    positions = (0, n // 2, n - 1) if full else (0, n - 1)
    for seed in (range(2) if full else range(1)):
        X, y = scaling_background(n, p, case.data_norm, case.labels, seed)
        y = y.astype(type(case.labels[0]))
        scales = None
        if case.data_norm is None:  # the scales the fit releases on the background (its own budget)
            scales = (case.scales or scaled_background_scales)(case, X, y, seed)
        rows = scaling_rows(p, 1.0 if case.data_norm is None else case.data_norm, scales)
        for pair in scaled_estimator_pairs(rows, case.labels, full):
            for position in positions:
                ratios, n_scaling = scaled_estimator_check(case.make, X, y, position, pair, seed, noise_factor, clip_factor,
                                                           case.claims or scaled_fit_claims)
                worst = int(np.argmax(ratios))
                outcome.last = max(outcome.last or 0.0, float(np.max(ratios[n_scaling:])))
                outcome.neighbours += 1
                outcome.releases += len(ratios)
                outcome.update(float(ratios[worst]),
                               f"release {worst} ({'scaling' if worst < n_scaling else 'after the scaling'}), background "
                               f"{seed}, position {position}, row {np.asarray(pair[0][0]).tolist()}/{pair[0][1]} -> "
                               f"{np.asarray(pair[1][0]).tolist()}/{pair[1][1]}")
                if stop_above is not None and outcome.ratio > stop_above:
                    return outcome
    return outcome


# -- the report ----------------------------------------------------------------------------------------------


def checks() -> dict:
    """Every white-box check by name: ``(search, clipped_by_caller)`` with
    ``search(full=, noise_factor=, clip_factor=, stop_above=) -> Outcome``. ``clipped_by_caller``:
    rows beyond the bound reach the mechanism (solvers take rows already clipped); estimators and
    the scaler clip their input themselves, so there the rows x2 run checks that clipping."""
    table = {}
    for name, mechanism in mechanisms().items():
        table[name] = (lambda m: lambda **kw: search(m, **kw))(mechanism), mechanism.clip_mutation
    for name, case in estimator_cases().items():
        table[name] = (lambda c: lambda **kw: estimator_search(c, **kw))(case), False
    table["DPStandardScaler (mean, second moment)"] = scaler_search, False
    table["objective_perturbation (linear term)"] = objective_search, True
    # scaled fits: rows x2 is the clipping mutation of :func:`observed_scaled` (every clip of the fit loosened)
    for name, case in scaling_cases().items():
        table[name] = (lambda c: lambda **kw: scaling_search(c, **kw))(case), True
    for name, case in {**scaled_estimator_cases(), **pca_cases()}.items():
        table[name] = (lambda c: lambda **kw: scaled_estimator_search(c, **kw))(case), True
    return table


def audit_all(full: bool) -> list:
    """Run every check honestly and under both mutations over the whole search (the catch rate:
    the neighbours at which a mutation is seen); one row per check."""
    rows = []
    for name, (run, clipped_by_caller) in checks().items():
        start = time.perf_counter()
        honest = run(full=full)
        halved = run(full=full, noise_factor=0.5)
        doubled = run(full=full, clip_factor=2.0)
        rows.append((name, honest, halved, doubled, clipped_by_caller))
        print(f"{name}: max ratio {honest.ratio:.6f} over {honest.neighbours} neighbours ({honest.releases} releases); "
              f"noise/2 {halved.ratio:.3f}, rows x2 {doubled.ratio:.3f} [{time.perf_counter() - start:.1f} s]", flush=True)
    return rows


def write_report(rows: list, full: bool, path: Path = RESULTS) -> None:
    lines = [
        "# White-box sensitivity audits",
        "",
        f"`python -m benchmarks.whitebox{'' if full else ' --quick'}` ({'full' if full else 'quick'} neighbour search; "
        f"n = {N}, d = {P}, data_norm = {B}, radius = {RADIUS}, epsilon = {EPSILON}, delta = {DELTA:g})."
        + ("" if full else " Quick: the axis corners only, one background, the first and last position (the full "
                           "search adds the diagonals, the intercept column, more backgrounds and the middle position)."),
        "Realised shift of every noisy release on neighbouring datasets with coupled noise, the neighbour replayed on the "
        "released history, against the sensitivity claimed by the noise scale drawn and the event accounted "
        "(trajectory checks: the largest coupled shift of the iterates against the shift the zCDP event allows for the "
        "differing row's batch). A ratio above 1 is a privacy bug. Mutations: every release's noise scale halved with "
        "the event unchanged (trajectory: the plan's noise halved), and rows of twice the clipping bound, each over the "
        "whole search; 'yes (r; k / N)' = the check fails, deterministically, at k of the N neighbours (the catch "
        "rate), r the largest ratio (scaled fits: also the largest of the releases after the scaling, the solver's "
        "steps or DPPCA's matrix, which the scaling's releases may hide).",
        "",
        "| mechanism | releases checked | neighbours searched | max realised/claimed | noise/2 caught | rows x2 (clipping) caught | worst neighbour |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, honest, halved, doubled, clipped_by_caller in rows:
        last = lambda o: "" if o.last is None else f"; after the scaling {o.last:.2f}"
        caught = lambda o: (f"yes ({o.ratio:.2f}; {o.caught} / {o.checked}{last(o)})" if o.ratio > 1.0 + TOLERANCE
                            else f"no ({o.ratio:.2f}{last(o)})")
        rows_x2 = caught(doubled) if clipped_by_caller else (
            f"n/a, clips its input or gradients: {'FAILS' if doubled.ratio > 1.0 + TOLERANCE else 'within'} ({doubled.ratio:.2f})")
        after = "" if honest.last is None else f"; after the scaling at most {honest.last:.6f}"
        lines.append(f"| {name} | {honest.releases} | {honest.neighbours} | {honest.ratio:.6f} | {caught(halved)} | "
                     f"{rows_x2} | {honest.where}{after} |")
    write_with_notes(path, "\n".join(lines) + "\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="axis corners, one background, two positions")
    args = parser.parse_args(argv)
    rows = audit_all(full=not args.quick)
    write_report(rows, full=not args.quick)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
