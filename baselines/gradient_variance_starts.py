"""Start states of the gradient-variance sweep: scripted, policy and reference starts before a contact event, cached."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

#: Contact force (N) whose first excess marks the contact event of a scripted or policy
#: episode (G1Jump: the first after a flight phase, the landing's touchdown).
CONTACT_THRESHOLD = {"BoxPush-v0": 1.0, "PlanarHand-v0": 1.0, "G1Jump-v0": 1.0}
#: Tasks whose contact event is the first contact after a step without any (a landing).
AFTER_FLIGHT = ("G1Jump-v0",)
SCRIPTED = {"BoxPush-v0": "bcg_envs.envs.box_push.scripted", "PlanarHand-v0": "bcg_envs.envs.planar_hand.scripted"}


@dataclasses.dataclass
class Starts:
    """Start states with their open-loop action sequences (all leading axes: starts)."""

    qpos: np.ndarray  # (N, nq)
    qvel: np.ndarray  # (N, nv)
    task_info: Dict[str, np.ndarray]  # e.g. goal (N, 2)
    actions: np.ndarray  # (N, T, nu), in [-1, 1]
    source: str  # how they were found (goes into the CSV)

    def __len__(self) -> int:
        return int(self.qpos.shape[0])

    def save(self, path: Path) -> None:
        info = {f"info_{k}": v for k, v in self.task_info.items()}
        np.savez(path, qpos=self.qpos, qvel=self.qvel, actions=self.actions, source=np.array(self.source), **info)

    @classmethod
    def load(cls, path: Path) -> "Starts":
        with np.load(path) as z:
            info = {k[5:]: z[k] for k in z.files if k.startswith("info_")}
            return cls(z["qpos"], z["qvel"], info, z["actions"], str(z["source"]))


def scripted_starts(
    env_id: str, n: int, steps: int, threshold: float, lead: int, max_seeds: Optional[int] = None
) -> Starts:
    """``n`` starts ``lead`` control steps before the first step of a scripted episode
    (MuJoCo C, the task's default contact) whose largest contact force exceeds
    ``threshold`` (N), with the controller's next ``steps`` actions (zero after the
    episode ends). Episodes without such a step, or with it in the first ``lead`` steps,
    are skipped."""
    import importlib

    policy = importlib.import_module(SCRIPTED[env_id]).POLICIES["scripted"]()
    found = _episode_starts(env_id, policy, n, steps, threshold, lead, max_seeds, "scripted")
    source = f"scripted episodes (seeds 0..), {lead} steps before the first contact > {threshold:g} N"
    return Starts(*found, source)


def policy_starts(
    env_id: str, path: Path | str, n: int, steps: int, threshold: float, lead: int, max_seeds: Optional[int] = None
) -> Starts:
    """As ``scripted_starts``, with the actions of the exported policy at ``path``
    (``bcg_envs.export.NumpyPolicy``, deterministic) in place of the scripted controller's:
    the open-loop sequence from a start is the policy's actions of that episode from there.
    The source names the policy file (``starts_tag`` reads it back)."""
    from bcg_envs.numpy_policy import NumpyPolicy

    path = Path(path)
    policy = NumpyPolicy.load(path)
    if policy.env_id and policy.env_id != env_id:
        raise ValueError(f"{path} is a policy of {policy.env_id}, not of {env_id}")
    found = _episode_starts(env_id, policy, n, steps, threshold, lead, max_seeds, f"{path.name} policy")
    event = "the first touchdown after a flight" if env_id in AFTER_FLIGHT else "the first contact"
    source = f"policy {path.name} episodes (deterministic; seeds 0..), {lead} steps before {event} > {threshold:g} N"
    return Starts(*found, source)


def _episode_starts(
    env_id: str,
    policy: Callable[[np.ndarray], np.ndarray],
    n: int,
    steps: int,
    threshold: float,
    lead: int,
    max_seeds: Optional[int],
    what: str,
) -> tuple:
    """(qpos, qvel, task info, actions) of ``n`` starts of episodes of ``policy`` (seeds 0,
    1, ...; see ``scripted_starts``)."""
    import gymnasium as gym

    import bcg_envs
    from bcg_envs.registry import NAMESPACE

    env = gym.make(f"{NAMESPACE}/{env_id}", backend="mujoco")
    task_keys = _task_keys(bcg_envs.make_jax(env_id))
    found: List[tuple] = []
    try:
        for seed in range(max_seeds or 20 * n):
            start = _scripted_start(env, policy, seed, steps, threshold, lead, task_keys, env_id in AFTER_FLIGHT)
            if start is not None:
                found.append(start)
            if len(found) == n:
                break
    finally:
        env.close()
    if len(found) < n:
        raise RuntimeError(f"{env_id}: only {len(found)} of {n} {what} episodes reach a {threshold} N contact")
    qpos, qvel, info, actions = zip(*found)
    task_info = {k: np.stack([i[k] for i in info]) for k in task_keys}
    return np.stack(qpos), np.stack(qvel), task_info, np.stack(actions)


def policy_tag(path: Path | str) -> str:
    """``policy-<stem>`` of a policy file (characters other than letters, digits and
    ``_.+-`` as ``_``): the suffix of its starts' cache and data files."""
    import re

    return "policy-" + re.sub(r"[^A-Za-z0-9_.+-]", "_", Path(path).stem)


def starts_tag(source: str) -> str:
    """Which starts a ``starts_source`` text describes: ``policy_tag`` of the policy file
    for a policy's episodes, "" for the scripted controller's (and G1's reference frames,
    and every row written before policy starts existed)."""
    import re

    match = re.match(r"policy (.+) episodes \(deterministic", source or "")
    return policy_tag(match[1]) if match else ""


def _task_keys(env) -> List[str]:
    """Names of the task entries of a state's info (goal etc.)."""
    import jax

    return list(jax.eval_shape(env.initial_state, jax.random.PRNGKey(0))[2])


def _scripted_start(
    env,
    policy,
    seed: int,
    steps: int,
    threshold: float,
    lead: int,
    task_keys: Sequence[str],
    after_flight: bool = False,
):
    """(qpos, qvel, task info, actions (steps, nu)) of one episode, or None. The event is
    the first step whose contact force exceeds ``threshold``; ``after_flight``: the first
    such step after a step without contact force. The task info is the one a fresh state
    needs to continue the episode from the start: where the task follows a reference clip
    (``ref_start``, read at ``ref_start + step``), the start's frame becomes its
    ``ref_start``, since a fresh state counts its steps from 0."""
    obs, _ = env.reset(seed=seed)
    states, actions, t_contact, airborne = [], [], None, not after_flight
    while t_contact is None or len(actions) < t_contact - lead + steps:
        states.append(env.unwrapped.get_state()[:2])
        action = np.asarray(policy(obs), np.float32)
        obs, _, terminated, truncated, info = env.step(action)
        actions.append(action)
        if t_contact is None and airborne and info["max_contact_force"] > threshold:
            t_contact = len(actions) - 1
        airborne = airborne or info["max_contact_force"] == 0.0
        if terminated or truncated:
            break
    if t_contact is None or t_contact < lead:
        return None
    t0 = t_contact - lead
    seq = np.zeros((steps, len(actions[0])), np.float32)
    tail = np.asarray(actions[t0 : t0 + steps])
    seq[: len(tail)] = tail
    task = {k: np.asarray(v) for k, v in env.unwrapped.task_info().items() if k in task_keys}
    if "ref_start" in task:
        task["ref_start"] = np.asarray(task["ref_start"] + t0, task["ref_start"].dtype)
    qpos, qvel = states[t0]
    return qpos, qvel, task, seq


def reference_starts(env_id: str, n: int, steps: int, lead: int, seed: int = 0) -> Starts:
    """G1: ``n`` reference states ``lead``, ``lead + 1``, ... frames before the first
    touchdown after a flight phase (cycling over the flight frames; repeats get joint
    velocities jittered by 0.1 rad/s), with zero residual actions for ``steps`` steps."""
    import jax

    import bcg_envs

    env = bcg_envs.make_jax(env_id)
    ref = env.reference
    airborne = ~np.any(ref.foot_contact > 0.5, axis=1)
    landings = np.flatnonzero(airborne[:-1] & ~airborne[1:]) + 1
    if not len(landings):
        raise RuntimeError(f"{env_id}: the reference has no flight phase")
    touchdown = int(landings[0])
    frames = []
    while touchdown - lead - len(frames) >= 0 and airborne[touchdown - lead - len(frames)]:
        frames.append(touchdown - lead - len(frames))
    if not frames:
        raise RuntimeError(f"{env_id}: no airborne frame {lead} frames before touchdown (frame {touchdown})")
    rng = np.random.default_rng(seed)
    _, _, info0 = jax.device_get(env.initial_state(jax.random.PRNGKey(0)))
    qpos, qvel, infos = [], [], []
    for i in range(n):
        frame = frames[i % len(frames)]
        v = np.array(ref.qvel[frame], np.float64)
        if i >= len(frames):
            v[6:] += 0.1 * rng.standard_normal(len(v) - 6)
        qpos.append(np.array(ref.qpos[frame], np.float64))
        qvel.append(v)
        infos.append({**{k: np.asarray(x) for k, x in info0.items()}, "ref_start": np.asarray(frame, np.int32)})
    task_info = {k: np.stack([i[k] for i in infos]) for k in info0}
    actions = np.zeros((n, steps, env.action_size), np.float32)
    last = lead + min(n, len(frames)) - 1
    source = f"reference frames {lead}..{last} before touchdown (frame {touchdown}), zero residual actions"
    return Starts(np.stack(qpos), np.stack(qvel), task_info, actions, source)


def find_starts(
    env_id: str,
    n: int,
    steps: int,
    out_dir: Path,
    threshold: Optional[float] = None,
    lead: int = 2,
    policy: Optional[Path | str] = None,
) -> Starts:
    """The sweep's starts, cached in ``out_dir`` so that a resumed sweep uses the same;
    ``policy``: an exported policy's episodes in place of the scripted controller's (or G1's
    reference frames; its cache file's name ends in ``_policy-<stem>``)."""
    name = f"gradient_variance_starts_n{n}_T{steps}_lead{lead}"
    if env_id in SCRIPTED or policy is not None:
        threshold = CONTACT_THRESHOLD[env_id] if threshold is None else threshold
        name += f"_force{threshold:g}"
    if policy is not None:
        name += f"_{policy_tag(policy)}"
    path = out_dir / f"{name}.npz"
    if path.exists():
        return Starts.load(path)
    t0 = time.perf_counter()
    if policy is not None:
        starts = policy_starts(env_id, policy, n, steps, threshold, lead)
    elif env_id in SCRIPTED:
        starts = scripted_starts(env_id, n, steps, threshold, lead)
    else:
        starts = reference_starts(env_id, n, steps, lead)
    out_dir.mkdir(parents=True, exist_ok=True)
    starts.save(path)
    print(f"{env_id}: {n} starts in {time.perf_counter() - t0:.1f} s: {starts.source}", flush=True)
    return starts
