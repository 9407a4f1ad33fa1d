"""Seed-level statistics of the comparisons and the page's tables of them.

Episodes are not independent across training seeds (one bad seed is many bad episodes), so
beside the pooled Wilson interval (``pooled_success``) the page states the mean of per-seed
final values with a percentile bootstrap interval over seeds (``seed_interval``, ``seed_text``,
``seed_table``, ``apart``); rliable's interquartile mean and probability of improvement
(``rliable_table``); PPO's env steps and wall-clock to a success level over SHAC's
(``ratio_interval``, ``gap_table``); whether success still rises at the end
(``success_trend``); and final scores in the protocol's simulator beside each
learner's own (``simulators_table``). Every bootstrap draws from a fixed RNG seed, so the
page is deterministic.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from baselines import cpu_clock, protocol, run_csv, summary
from baselines.page_format import pct
from bcg_envs.stats import format_success, wilson_interval

#: Bootstrap of the seed-level intervals: resamples and the RNG seed (fixed: the page is deterministic).
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
#: Resamples of rliable's stratified bootstrap (its default 50,000 costs minutes over the page).
RLIABLE_REPS = 1_000


def seed_interval(
    values: Sequence[float], level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> Tuple[float, float, float]:
    """(mean over seeds, lower, upper): a percentile bootstrap interval of the mean of
    per-seed values, resampling the seeds with replacement (``numpy.random.default_rng(seed)``:
    the same values give the same interval). NaN bounds below two seeds."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"seed_interval needs finite per-seed values, got {values!r}")
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return mean, float(low), float(high)


def final_values(seeds: List[List[run_csv.Row]], key: str) -> List[float]:
    """Each seed's value of ``key`` at its last evaluation (the budget)."""
    return [float(r[-1][key]) for r in seeds]


def success_trend(seeds: List[List[run_csv.Row]], window: int) -> str:
    """Whether a learner's success still rises at the end of its runs: the seed-mean
    success at the last evaluation against the one ``window`` evaluations earlier (the
    rule by which ``baselines/configs/tuning/finals.json`` decides on a longer final)."""
    n = min(len(rows) for rows in seeds)
    if window < 1 or n <= window:
        raise ValueError(f"window must be in [1, {n - 1}] for runs of {n} evaluations, got {window}")
    for index in (-1, -1 - window):
        if len({rows[index]["env_steps"] for rows in seeds}) > 1:
            raise ValueError(f"the seeds' evaluations differ in env steps at index {index}: no common schedule")
    last = float(np.mean([rows[-1]["eval_success"] for rows in seeds]))
    earlier = float(np.mean([rows[-1 - window]["eval_success"] for rows in seeds]))
    verdict = "still rising" if last > earlier else "not rising"
    return (
        f"{verdict} (seed-mean success {pct(last)} % at the last evaluation against {pct(earlier)} % "
        f"{window} evaluations earlier, {len(seeds)} seeds)"
    )


def seed_text(values: Sequence[float], percent: bool) -> str:
    """``"mean [low, high]"`` of ``seed_interval`` (``%`` scaled when ``percent``)."""
    mean, low, high = seed_interval(values)
    f = pct if percent else (lambda v: f"{v:.1f}")
    unit = " %" if percent else ""
    if math.isnan(low):
        return f"{f(mean)}{unit} (one seed)"
    return f"{f(mean)}{unit} [{f(low)}, {f(high)}]"


def pooled_success(seeds: List[List[run_csv.Row]]) -> str:
    """Final success pooled over the seeds' evaluation episodes, with its Wilson interval
    (as ``summary.summary_table`` writes it)."""
    success = np.array(final_values(seeds, "eval_success"))
    episodes = np.array(final_values(seeds, "eval_episodes"))
    n = int(np.sum(episodes))
    k = int(round(float(np.sum(success * episodes))))
    low, high = wilson_interval(k, n)
    return format_success({"success_rate": k / n, "success_low": low, "success_high": high})


def simulators_table(runs: Dict[str, List[List[run_csv.Row]]], env_kwargs: Dict[str, object]) -> str:
    """Per algorithm: the simulator it trains in, and its final success and return (seed
    means with their bootstrap intervals) in the protocol's simulator and in its own, on
    the same evaluation episodes (``protocol.Recorder``'s ``train_sim_*`` columns). "same"
    where the two are one simulator, "—" for runs made before the second score existed."""
    scored_in = protocol.protocol_backend(env_kwargs)
    names = {"mujoco": "MuJoCo C", "mjx": "MJX"}
    lines = [
        f"| algorithm | seeds | trains in | final success, {names[scored_in]} | final success, own simulator "
        f"| final return, {names[scored_in]} | final return, own simulator |",
        "|---|---|---|---|---|---|---|",
    ]
    for algo, seeds in runs.items():
        own = protocol.training_backend(algo, env_kwargs)
        cells = []
        for key, percent in (("success", True), ("return", False)):
            protocol_text = seed_text(final_values(seeds, f"eval_{key}"), percent)
            values = final_values(seeds, f"train_sim_{key}")
            if own == scored_in:
                own_text = "same"
            elif all(math.isfinite(v) for v in values):
                own_text = seed_text(values, percent)
            else:
                own_text = "—"
            cells.append((protocol_text, own_text))
        lines.append(
            f"| {algo} | {len(seeds)} | {names[own]} | {cells[0][0]} | {cells[0][1]} | {cells[1][0]} | {cells[1][1]} |"
        )
    return "\n".join(lines)


def _steps_to(seeds: List[List[run_csv.Row]], target: float, axis: str) -> np.ndarray:
    """Per seed, the ``axis`` value (env steps or wall-clock) of the first evaluation whose
    success reaches ``target``; inf for a seed that never does."""
    out = []
    for rows in seeds:
        hit = next((row[axis] for row in rows if row["eval_success"] >= target), None)
        out.append(math.inf if hit is None else float(hit))
    return np.array(out)


def ratio_interval(
    slow: np.ndarray, fast: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> Tuple[float, float, float]:
    """(ratio of medians, lower, upper): ``median(slow) / median(fast)`` over seeds with a
    95 % percentile bootstrap interval, each learner's seeds resampled with replacement
    (stratified). A seed that never reaches the level counts as inf, so a ratio is inf
    where ``slow``'s median never reaches it, 0 where ``fast``'s does not, and nan where
    neither does or where either median is 0 (the level held from the first evaluation,
    before any training: no ratio of training to state); the bounds are nan when some
    resample has such a nan."""

    def ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where((np.isinf(a) & np.isinf(b)) | (a == 0) | (b == 0), np.nan, a / b)

    rng = np.random.default_rng(seed)
    with np.errstate(invalid="ignore"):  # medians of seeds that never reach it: inf, as meant
        point = float(ratio(np.median(slow), np.median(fast)))
        a = np.median(slow[rng.integers(0, slow.size, (resamples, slow.size))], axis=1)
        b = np.median(fast[rng.integers(0, fast.size, (resamples, fast.size))], axis=1)
    r = ratio(a, b)
    if np.isnan(r).any():
        return point, math.nan, math.nan
    # Order statistics, not interpolation (a bound between two inf ratios is inf, not nan).
    return point, float(np.percentile(r, 2.5, method="lower")), float(np.percentile(r, 97.5, method="higher"))


def gap_table(runs: Dict[str, List[List[run_csv.Row]]]) -> str:
    """Per PPO and SHAC learner pair and success level (50 % and 90 % of the best seed-mean
    success any learner reached): PPO's env steps to it over SHAC's, as a ratio of medians
    over seeds with its bootstrap interval (``ratio_interval``), and the same in
    wall-clock where every run of both ran alone (``cpu_clock.ran_alone``). inf: PPO's
    median seed does not reach the level within the budget; 0: SHAC's does not. A learner
    with one seed has no seed-level interval, so its pairs are left out (the level still
    counts its success)."""
    best = summary.best_success(runs)
    pairs = [
        (p, a)
        for p in summary.PPO_ALGORITHMS
        if len(runs.get(p, ())) > 1
        for a in runs
        if a.startswith("shac") and len(runs[a]) > 1
    ]
    if best <= 0 or not pairs:
        return "(No success, or no PPO and SHAC pair with two seeds or more: no gap to state.)"

    def text(point: float, low: float, high: float) -> str:
        def f(v: float) -> str:
            return "∞" if math.isinf(v) else f"{v:.1f}"

        unit = "" if math.isinf(point) else "x"
        if math.isnan(point):
            return "— (neither median seed reaches it)"
        if math.isnan(low):
            return f"{f(point)}{unit} (no interval: some resamples have no ratio)"
        return f"{f(point)}{unit} [{f(low)}, {f(high)}]"

    lines = [
        "| PPO | SHAC | success level | PPO / SHAC env steps [95% bootstrap] | PPO / SHAC wall-clock [95% bootstrap] |",
        "|---|---|---|---|---|",
    ]
    for ppo, shac in pairs:
        alone = cpu_clock.ran_alone(runs[ppo]) and cpu_clock.ran_alone(runs[shac])
        for level in (0.5, 0.9):
            cells = []
            for axis in ("env_steps", "wall_clock"):
                if axis == "wall_clock" and not alone:
                    cells.append("— (runs shared their CPUs)")
                    continue
                slow, fast = (_steps_to(runs[a], level * best, axis) for a in (ppo, shac))
                if 0.0 in (np.median(slow), np.median(fast)):
                    cells.append("— (a median seed is at the level from the first evaluation)")
                    continue
                cells.append(text(*ratio_interval(slow, fast)))
            lines.append(f"| {ppo} | {shac} | {int(100 * level)} % of {pct(best)} % | {cells[0]} | {cells[1]} |")
    lines.append("")
    lines.append("∞: PPO's median seed does not reach the level within the budget; 0.0x: SHAC's does not.")
    return "\n".join(lines)


def seed_table(runs: Dict[str, List[List[run_csv.Row]]]) -> str:
    """Per algorithm: final success and return of every seed, their seed mean with its
    bootstrap interval, and the pooled success with its Wilson interval."""
    lines = [
        "| algorithm | seeds | final success per seed (%) | success, seed mean [95% bootstrap] "
        "| success, pooled episodes [95% Wilson] | final return per seed | return, seed mean [95% bootstrap] |",
        "|---|---|---|---|---|---|---|",
    ]
    for algo, seeds in runs.items():
        success, ret = final_values(seeds, "eval_success"), final_values(seeds, "eval_return")
        lines.append(
            f"| {algo} | {len(seeds)} | {', '.join(pct(s) for s in success)} | {seed_text(success, True)} "
            f"| {pooled_success(seeds)} | {', '.join(f'{r:.1f}' for r in ret)} | {seed_text(ret, False)} |"
        )
    return "\n".join(lines)


def _rliable_interval(
    scores: Dict[str, object], func: Callable[..., np.ndarray]
) -> Dict[str, Tuple[float, float, float]]:
    """(point estimate, lower, upper) per key of rliable's 95 % stratified percentile
    bootstrap (``RLIABLE_REPS`` resamples). Each key is resampled from the RNG seeded with
    ``BOOTSTRAP_SEED``, so a row's interval depends on its own scores only, not on the rows
    computed before it."""
    import warnings

    from rliable import library as rly

    out = {}
    # rliable 1.2's stratified resampling draws from NumPy's global RNG (its random_state
    # reaches only arch's generator), so the global state is seeded here and restored after.
    saved = np.random.get_state()
    try:
        for key, value in scores.items():
            np.random.seed(BOOTSTRAP_SEED)
            with warnings.catch_warnings():  # arch deprecates RandomState; it is still honoured
                warnings.simplefilter("ignore", FutureWarning)
                points, intervals = rly.get_interval_estimates(
                    {key: value}, func, reps=RLIABLE_REPS, random_state=np.random.RandomState(BOOTSTRAP_SEED)
                )
            out[key] = (
                float(np.ravel(points[key])[0]),
                float(intervals[key][0].ravel()[0]),
                float(intervals[key][1].ravel()[0]),
            )
    finally:
        np.random.set_state(saved)
    return out


def rliable_table(runs: Dict[str, List[List[run_csv.Row]]]) -> str:
    """Final success per learner as rliable aggregates it over seeds: the interquartile mean
    with its stratified bootstrap interval, and for each SHAC learner the probability that
    it ends above each PPO learner (a random seed of each; ties count half) with its
    interval."""
    from rliable import metrics

    algos = [a for a, seeds in runs.items() if len(seeds) >= 2]
    if not algos:
        return "(One seed per algorithm: no seed-level aggregate.)"
    scores = {a: np.array(final_values(runs[a], "eval_success"))[:, None] for a in algos}
    iqm = _rliable_interval(scores, lambda x: np.array([metrics.aggregate_iqm(x)]))
    lines = ["| algorithm | seeds | success IQM [95% stratified bootstrap] |", "|---|---|---|"]
    for a in algos:
        m, lo, hi = iqm[a]
        lines.append(f"| {a} | {len(runs[a])} | {pct(m)} % [{pct(lo)}, {pct(hi)}] |")
    pairs = {
        f"P({a} > {b})": (scores[a], scores[b])
        for a in algos
        if a.startswith("shac")
        for b in algos
        if b.endswith("ppo")
    }
    if pairs:
        improvement = _rliable_interval(pairs, lambda x, y: np.array([metrics.probability_of_improvement(x, y)]))
        lines += [
            "",
            "| probability of improvement (final success) | estimate [95% stratified bootstrap] |",
            "|---|---|",
        ]
        lines += [f"| {k} | {p:.2f} [{lo:.2f}, {hi:.2f}] |" for k, (p, lo, hi) in improvement.items()]
    return "\n".join(lines)


#: The fewest seeds per learner for a seed-level claim. At three seeds each the percentile
#: interval is the seeds' range, so "ahead" means every seed above every seed of the other:
#: for two learners with one distribution of final scores that happens in 1 of 20 draws.
MIN_SEEDS_TO_COMPARE = 3


def apart(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether the seed-level bootstrap intervals of ``a`` and ``b`` are disjoint. Raises
    ``ValueError`` below ``MIN_SEEDS_TO_COMPARE`` seeds on either side."""
    if min(len(a), len(b)) < MIN_SEEDS_TO_COMPARE:
        raise ValueError(
            f"a seed-level comparison needs {MIN_SEEDS_TO_COMPARE} seeds per learner, got {len(a)} and {len(b)}"
        )
    _, la, ha = seed_interval(a)
    _, lb, hb = seed_interval(b)
    return ha < lb or hb < la
