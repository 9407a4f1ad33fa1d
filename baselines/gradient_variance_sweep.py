"""The gradient-variance sweep loop: measures each missing block, appends its rows to the CSV, keeps its data files."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, List, Optional, Sequence

import numpy as np

from baselines.gradient_variance_contact import ContactModel, level_key
from baselines.gradient_variance_csv import append_rows, done_blocks, read_rows
from baselines.gradient_variance_gradients import Block, ModelRunner
from baselines.gradient_variance_starts import Starts, starts_tag
from baselines.gradient_variance_stats import horizon_stats
from bcg_envs.compile_cache import memory_maps, release_compiled_programs
from bcg_envs.gradients.cost import simulations_per_step


def block_rows(
    env_id: str,
    model: ContactModel,
    level: float,
    estimator: str,
    block: Block,
    reference: np.ndarray,
    exact: Optional[np.ndarray],
    horizons: Sequence[int],
    source: str,
    reference_samples: int,
    resamples: int = 1000,
    seed: int = 0,
) -> List[dict]:
    """CSV rows (one per horizon) of one block; ``reference``/``exact``: (N, K, T, nu)."""
    rows = []
    n = block.grads.shape[0]
    for k, h in enumerate(horizons):
        flat = lambda a: None if a is None else np.asarray(a[:, k, :h, :]).reshape(n, -1)  # noqa: E731
        stats = horizon_stats(flat(block.grads), flat(reference), flat(exact), resamples, seed)
        bundled = float(np.mean(block.bundled[:, :h]))
        rows.append(
            {
                "env": env_id,
                "contact_model": model.name,
                "contact_options": model.variant,
                "level": level_key(level),
                "physics_dt": model.physics_dt or "",
                "estimator": estimator,
                "horizon": int(h),
                "starts": n,
                **stats,
                "bundled_fraction": bundled,
                "num_samples": block.num_samples,
                "sims_per_step": simulations_per_step(
                    estimator, block.nx, block.nu, block.num_samples, bundled, block.bundle_horizon
                ),
                "ms_per_rollout_gradient": 1e3 * block.seconds_per_start,
                "compile_s": block.compile_seconds,
                "reference_samples": reference_samples,
                "starts_source": source,
            }
        )
    return rows


def _data_path(out_dir: Path, model: ContactModel, level: float, what: str, n: int, tag: str = "") -> Path:
    """A block's data file; ``tag`` (``starts_tag``), where not "", ends its name."""
    suffix = f"_{tag}" if tag else ""
    return out_dir / "gradient_variance_data" / f"{model.file_stem()}_{level_key(level)}_{what}_n{n}{suffix}.npz"


RunnerFactory = Callable[[str, ContactModel, Starts, Sequence[int]], ModelRunner]


def sweep(
    env_id: str,
    models: Sequence[ContactModel],
    estimators: Sequence[str],
    starts: Starts,
    horizons: Sequence[int],
    out_dir: Path,
    *,
    reference_samples: int = 16,
    resamples: int = 1000,
    runner: RunnerFactory = ModelRunner,
) -> List[dict]:
    """Measure every missing (contact model, level, estimator) block, appending each to
    the CSV as it completes; returns the new rows. ``exact`` runs first at each level (the
    variance ratios need it); ``runner`` builds a contact model's gradient source, whose
    compiled programs serve all its levels and are released before the next model."""
    (out_dir / "gradient_variance_data").mkdir(parents=True, exist_ok=True)
    estimators = sorted(dict.fromkeys(estimators), key=lambda e: e != "exact")
    done = done_blocks(read_rows(out_dir), len(starts), horizons, starts_tag(starts.source))
    new_rows: List[dict] = []
    for model in models:
        source = None
        for level in model.levels:
            todo = [e for e in estimators if model.block_key(level, e) not in done]
            if not todo:
                print(f"{model.label} level={level:g}: done, skipped", flush=True)
                continue
            source = source or runner(env_id, model, starts, horizons)
            new_rows += _run_level(
                source, env_id, model, level, todo, starts, horizons, out_dir, reference_samples, resamples
            )
        if source is not None:
            held = memory_maps()
            del source
            release_compiled_programs()
            print(f"{model.label}: {held} memory maps held by its programs, {memory_maps()} after release", flush=True)
    return new_rows


def _run_level(
    source: ModelRunner,
    env_id: str,
    model: ContactModel,
    level: float,
    estimators: Sequence[str],
    starts: Starts,
    horizons: Sequence[int],
    out_dir: Path,
    reference_samples: int,
    resamples: int,
) -> List[dict]:
    """Measure and append one level's blocks; the reference follows the first block, so
    that the first level's blocks are timed on their programs' first run."""
    import bcg_envs

    sigma = bcg_envs.BundleConfig().state_sigma
    tag = starts_tag(starts.source)
    ref, rows = None, []
    for est in estimators:
        t0 = time.perf_counter()
        block = source.block(est, level)
        seconds = time.perf_counter() - t0
        if ref is None:
            path = _data_path(out_dir, model, level, f"reference{reference_samples}", len(starts), tag)
            ref = _cached(path, lambda: source.reference(level, reference_samples, sigma))
        np.savez(_data_path(out_dir, model, level, est, len(starts), tag), grads=block.grads, bundled=block.bundled)
        exact = _load_grads(_data_path(out_dir, model, level, "exact", len(starts), tag))
        new = block_rows(
            env_id, model, level, est, block, ref, exact, horizons, starts.source, reference_samples, resamples
        )
        append_rows(new, out_dir)
        _print_block(new, seconds)
        rows += new
    return rows


def _cached(path: Path, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """``compute()``, stored at ``path`` (an .npz) and read back from there next time."""
    if path.exists():
        with np.load(path) as z:
            return z["grads"]
    t0 = time.perf_counter()
    grads = compute()
    np.savez(path, grads=grads)
    print(f"reference {path.name}: {time.perf_counter() - t0:.1f} s", flush=True)
    return grads


def _load_grads(path: Path) -> Optional[np.ndarray]:
    if not path.exists():
        return None
    with np.load(path) as z:
        return z["grads"]


def _print_block(rows: List[dict], seconds: float) -> None:
    r0 = rows[0]
    options = f" [{r0['contact_options']}]" if r0["contact_options"] else ""
    print(
        f"{r0['contact_model']}{options} level={r0['level']} {r0['estimator']}: {seconds:.1f} s "
        f"(compile {r0['compile_s']:.1f} s, {r0['ms_per_rollout_gradient']:.1f} ms per start)",
        flush=True,
    )
    for r in rows:
        print(
            f"  H={r['horizon']:3d} var={r['variance']:.3g} [{r['variance_lo']:.3g}, {r['variance_hi']:.3g}] "
            f"ratio={r['variance_ratio']:.3g} cos={r['cosine_to_reference']:.3f} relerr={r['rel_error_to_reference']:.3g} "
            f"bundled={r['bundled_fraction']:.2f} nonfinite={r['nonfinite']}",
            flush=True,
        )
