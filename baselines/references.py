"""The reference policies a task's curves are read against, and their measured levels.

``reference_policies``: doing nothing and the task's scripted solution; ``measure_references``
scores them on the protocol's episodes for every (task, env arguments) of ``COMPARISONS``
into ``REFERENCES`` (``python -m baselines.report --references``); ``references_for`` and
``references_table`` read them back for the curves and the page.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

from baselines import protocol
from baselines.comparisons import COMPARISONS, RESULTS
from bcg_envs.stats import format_success, wilson_interval

REFERENCES = RESULTS / "references.csv"
REFERENCE_FIELDS = ("env", "env_kwargs", "policy", "eval_return", "eval_success", "eval_length", "eval_episodes")


def reference_policies(env_id: str, env_kwargs: Dict[str, object]) -> Dict[str, Callable]:
    """Name -> (observation -> action) of the fixed policies a task's curves are read
    against: doing nothing and the task's scripted solution (G1Jump: holding the default
    pose, and replaying the reference clip, i.e. zero residuals)."""
    if env_id == "BoxPush-v0":
        from bcg_envs.envs.box_push import scripted

        return {"do nothing": scripted.do_nothing, "scripted push": scripted.scripted_push}
    if env_id == "PlanarHand-v0":
        from bcg_envs.envs.planar_hand import scripted

        return {"do nothing": scripted.do_nothing, "scripted grasp-and-roll": scripted.scripted_rotate}
    if env_id.startswith("G1"):
        import bcg_envs
        from bcg_envs.envs.g1 import scripted

        env = bcg_envs.make_jax(env_id, **env_kwargs)
        return {
            "do nothing (hold the default pose)": scripted.hold_pose_policy(env),
            "scripted (reference replay, zero residuals)": scripted.reference_policy(env),
        }
    return {}


def _kwargs_key(env_kwargs: Dict[str, object]) -> str:
    """The physics of ``env_kwargs`` as a key: the ``bundle`` settings change gradients, not
    what a reference policy scores, so they are left out."""
    return json.dumps({k: v for k, v in env_kwargs.items() if k != "bundle"}, sort_keys=True)


def read_references(path: Path = REFERENCES) -> List[dict]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def references_for(env_id: str, env_kwargs: Dict[str, object], rows: Sequence[dict]) -> Dict[str, Tuple[float, float]]:
    """Name -> (return, success) of the reference policies measured on ``env_id`` with ``env_kwargs``."""
    key = _kwargs_key(env_kwargs)
    return {
        r["policy"]: (float(r["eval_return"]), float(r["eval_success"]))
        for r in rows
        if r["env"] == env_id and r["env_kwargs"] == key
    }


def measure_references(path: Path = REFERENCES) -> List[dict]:
    """Score every reference policy on the protocol's episodes (``protocol.evaluate``) for
    each (task, env arguments) of ``COMPARISONS`` not yet in ``path``; appends to it."""
    from baselines import append_csv

    done = {(r["env"], r["env_kwargs"], r["policy"]) for r in read_references(path)}
    new = []
    for env_id, env_kwargs in sorted({(c.env, _kwargs_key(c.env_kwargs())) for c in COMPARISONS.values()}):
        kwargs = json.loads(env_kwargs)
        for name, policy in reference_policies(env_id, kwargs).items():
            if (env_id, env_kwargs, name) in done:
                continue
            row = protocol.evaluate(env_id, policy, kwargs)
            print(f"{env_id} {env_kwargs} {name}: {row}", flush=True)
            new.append(dict(env=env_id, env_kwargs=env_kwargs, policy=name, **row))
            append_csv(path, REFERENCE_FIELDS, [new[-1]])
    return new


def references_table(rows: Sequence[dict]) -> str:
    lines = [
        "| task | env arguments | policy | return | success [95% Wilson] | episode length | episodes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["env"], r["env_kwargs"] != "{}", r["env_kwargs"])):
        n = int(r["eval_episodes"])
        k = int(round(float(r["eval_success"]) * n))
        low, high = wilson_interval(k, n)
        kwargs = json.loads(r["env_kwargs"])
        args = ", ".join(f"{k}={v}" for k, v in kwargs.items()) or "default"
        lines.append(
            f"| {r['env']} | {args} | {r['policy']} | {float(r['eval_return']):.1f} | "
            f"{format_success({'success_rate': k / n, 'success_low': low, 'success_high': high})} | "
            f"{float(r['eval_length']):.0f} | {n} |"
        )
    return "\n".join(lines)
