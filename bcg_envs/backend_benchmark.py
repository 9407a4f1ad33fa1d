"""``python -m bcg_envs.backend_benchmark``: what the MuJoCo C backend spends on task inputs,
finite-difference Jacobians and vector steps, beside MJX."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict

import mujoco
import numpy as np
from mujoco import mjx

from bcg_envs.gym import GymEnv, GymVectorEnv
from bcg_envs.mujoco_backend.jacobians import FD_EPS, Transition
from bcg_envs.mujoco_backend.simulation import FULL_STATE, TaskModel


def _timeit(fn: Callable[[], Any], number: int, repeat: int = 5) -> float:
    """Best of ``repeat`` blocks of ``number`` calls, seconds per call (the best block is
    the least disturbed by other processes on a shared machine)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t) / number)
    return best


def _transition_fd(shared: TaskModel, d0: mujoco.MjData, ctrl: np.ndarray, eps: float = FD_EPS):
    """(A, B) of the control step by ``mjd_transitionFD`` per substep, composed."""
    m, nx, nu = shared.model, shared.nx, shared.nu
    d = mujoco.MjData(m)
    mujoco.mj_copyData(d, m, d0)
    d.ctrl[:] = ctrl
    A, B = np.eye(nx), np.zeros((nx, nu))
    Ak, Bk = np.zeros((nx, nx)), np.zeros((nx, nu))
    for _ in range(shared.n_substeps):
        mujoco.mjd_transitionFD(m, d, eps, True, Ak, Bk, None, None)
        A, B = Ak @ A, Ak @ B + Bk
        mujoco.mj_step(m, d)
    return A, B @ shared.action_map.M


def benchmark(
    env_name: str = "BoxPush-v0", steps: int = 200, num_envs: int = 16, mjx_grad: bool = False
) -> Dict[str, float]:
    """Print (and return) the costs behind ``backend="mujoco"``, measured in one run:

    * Task-function inputs per step: ``mjx.put_data`` vs the packed leaves.
    * ``grad_step(estimator="exact")``: whole-step central differences through ``Rollout``
      vs ``mjd_transitionFD`` per substep composed (speed and agreement), at a contact state.
    * Vector ``step``: ``GymVectorEnv`` over MuJoCo C (``mujoco.rollout``) vs over MJX (vmap).
    ``mjx_grad=True`` adds MJX's ``grad_step`` (compiling it takes minutes on CPU). The
    single-env ``step`` latency of both backends against Gymnasium's ``Pusher-v5`` is
    ``bcg-envs bench --tables backends`` (interleaved blocks, ratios).
    """
    out: Dict[str, float] = {}
    n = max(steps // 5, 1)
    env = GymEnv(env_name, backend="mujoco")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (64,) + env.action_space.shape).astype(np.float32)

    # Task-function inputs: put_data vs packed leaves (+ the one jit dispatch).
    core, program = env.simulation.core, env.simulation.task.program
    d = core.d
    out["put_data_us"] = 1e6 * _timeit(lambda: mjx.put_data(env.model, d), max(n // 10, 3))
    out["read_pack_us"] = 1e6 * _timeit(lambda: program.pack(core.leaves, actions[0], program.read(d), core.info), n)
    fv, iv = program.pack(core.leaves, actions[0], core.leaves, core.info)
    out["program_call_us"] = 1e6 * _timeit(lambda: program(fv, iv), n)
    print(
        f"task inputs: mjx.put_data {out['put_data_us']:.0f} us/step; packed leaves {out['read_pack_us']:.1f} us "
        f"+ jitted task call {out['program_call_us']:.1f} us"
    )

    # grad_step: FD schemes at a smooth contact state (BoxPush: the pusher pressing the -x
    # face of a box that slides and spins, so no contact or friction regime switches within
    # the step) or the current state.
    a = np.clip(actions[1], -1, 1)
    if env_name == "BoxPush-v0":
        env.set_state(np.array([-0.073, 0.0, 0.0, 0.0, 0.0]), np.array([0.4, 0.25, 0.3, 0.25, 2.0]))
        a = np.array([0.8, 0.0], np.float32)
    s = env.simulation.task
    start = np.zeros(s.nstate)
    mujoco.mj_getState(s.model, d, start, FULL_STATE)
    d0 = mujoco.MjData(s.model)
    mujoco.mj_copyData(d0, s.model, d)
    dn = mujoco.MjData(s.model)
    mujoco.mj_copyData(dn, s.model, d)
    dn.ctrl[:] = s.action_map(a)
    for _ in range(s.n_substeps):
        mujoco.mj_step(s.model, dn)
    f = Transition(s, start, d.qacc_warmstart.copy(), a.astype(np.float64), np.concatenate([dn.qpos, dn.qvel, dn.act]))
    zx, zu = np.zeros((1, s.nx)), np.zeros((1, s.nu))
    A1, B1 = (x[0] for x in f.jacobians_at(zx, zu))
    A2, B2 = _transition_fd(s, d0, s.action_map(a))
    reps = max(n // 20, 3)
    out["fd_whole_step_ms"] = 1e3 * _timeit(lambda: f.jacobians_at(zx, zu), reps)
    out["fd_transitionFD_ms"] = 1e3 * _timeit(lambda: _transition_fd(s, d0, s.action_map(a)), reps)
    rel = lambda x, y: float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-12))
    out["fd_schemes_rel_diff"] = max(rel(A2, A1), rel(B2, B1))
    print(
        f"exact Jacobians (nx={s.nx}, nu={s.nu}, {s.n_substeps} substeps, rollout threads={s.nthread}): "
        f"whole-step central FD via Rollout {out['fd_whole_step_ms']:.2f} ms, "
        f"mjd_transitionFD per substep {out['fd_transitionFD_ms']:.2f} ms; they agree to {out['fd_schemes_rel_diff']:.1e}"
    )
    qpos, qvel, _ = env.get_state()

    def grad():
        env.set_state(qpos, qvel)
        env.grad_step(a, estimator="exact")

    out["mujoco_grad_step_ms"] = 1e3 * _timeit(grad, reps)
    print(f"grad_step(exact) backend='mujoco' {out['mujoco_grad_step_ms']:.2f} ms")
    if mjx_grad:
        mjx_env = GymEnv(env_name)
        mjx_env.reset(seed=0)
        mjx_env.set_state(qpos, qvel)
        mjx_env.grad_step(a, estimator="exact")
        out["mjx_grad_step_ms"] = 1e3 * _timeit(lambda: mjx_env.grad_step(a, estimator="exact"), reps)
        print(f"grad_step(exact) backend='mjx'    {out['mjx_grad_step_ms']:.2f} ms")

    # Vector envs.
    vec = GymVectorEnv(env_name, num_envs, backend="mujoco")
    vec.reset(seed=0)
    mvec = GymVectorEnv(env_name, num_envs)
    mvec.reset(seed=0)
    va = rng.uniform(-1, 1, (num_envs,) + env.action_space.shape).astype(np.float32)
    out["mujoco_vec_step_ms"] = 1e3 * _timeit(lambda: vec.step(va), max(n // 4, 3))
    out["mjx_vec_step_ms"] = 1e3 * _timeit(lambda: mvec.step(va), max(n // 4, 3))
    print(
        f"vector step, {num_envs} envs: backend='mujoco' {out['mujoco_vec_step_ms']:.2f} ms, "
        f"backend='mjx' {out['mjx_vec_step_ms']:.2f} ms, ratio {out['mjx_vec_step_ms'] / out['mujoco_vec_step_ms']:.1f}"
    )
    vec.close()
    env.close()
    return out


if __name__ == "__main__":
    benchmark()
