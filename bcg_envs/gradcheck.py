"""``bcg-envs gradcheck``: exact Jacobians vs MuJoCo C central finite differences.

States come from a short random rollout. The finite differences step the same
``MjModel`` in MuJoCo C (float64) in tangent coordinates (``mj_integratePos`` /
``mj_differentiatePos``), so they are independent of MJX. Differences near contact
on/off switches are expected (the dynamics jump there); the report flags them.
"""

from __future__ import annotations

import mujoco
import numpy as np


def c_control_step(model: mujoco.MjModel, qpos, qvel, act, ctrl, n_substeps: int) -> mujoco.MjData:
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
    if model.na:
        data.act[:] = act
    for _ in range(n_substeps):
        mujoco.mj_step(model, data)
    return data


def c_finite_difference_jacobians(model, qpos, qvel, act, ctrl_fn, action, n_substeps, eps=1e-6):
    """Central-difference (A, B) of the control step in tangent coordinates."""
    nv, na = model.nv, model.na
    ref = c_control_step(model, qpos, qvel, act, ctrl_fn(action), n_substeps)

    def state_offset(d):
        dq = np.zeros(nv)
        mujoco.mj_differentiatePos(model, dq, 1.0, ref.qpos, d.qpos)
        return np.concatenate([dq, d.qvel - ref.qvel, d.act - ref.act])

    def f(dx, du):
        q = qpos.copy()
        mujoco.mj_integratePos(model, q, dx[:nv], 1.0)
        d = c_control_step(model, q, qvel + dx[nv : 2 * nv], act + dx[2 * nv :], ctrl_fn(action + du), n_substeps)
        return state_offset(d)

    nx, nu = 2 * nv + na, len(action)
    zx, zu = np.zeros(nx), np.zeros(nu)
    A = np.stack([(f(eps * e, zu) - f(-eps * e, zu)) / (2 * eps) for e in np.eye(nx)], 1)
    B = np.stack([(f(zx, eps * e) - f(zx, -eps * e)) / (2 * eps) for e in np.eye(nu)], 1)
    return A, B


def run(env_id: str = "BoxPush-v0", states: int = 5, seed: int = 0, tolerance: float = 1e-3) -> bool:
    import gymnasium as gym

    import bcg_envs

    env = gym.make(f"bcg_envs/{bcg_envs.registry.short_name(env_id)}")
    jax_env = env.unwrapped.jax_env
    model = env.unwrapped.model
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    ctrl_fn = lambda a: np.asarray(jax_env.action_to_ctrl(np.clip(a, -1, 1).astype(np.float32)), np.float64)
    worst = []
    for i in range(states):
        for _ in range(int(rng.integers(1, 10))):
            env.step(env.action_space.sample())
        qpos, qvel, act = env.unwrapped.get_state()
        action = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
        A_fd, B_fd = c_finite_difference_jacobians(
            model,
            qpos.astype(np.float64),
            qvel.astype(np.float64),
            act.astype(np.float64),
            ctrl_fn,
            action.astype(np.float64),
            jax_env.physics.n_substeps,
        )
        out = env.unwrapped.grad_step(action, estimator="exact")
        err_A = np.linalg.norm(out.jacobians.A - A_fd) / max(np.linalg.norm(A_fd), 1e-12)
        err_B = np.linalg.norm(out.jacobians.B - B_fd) / max(np.linalg.norm(B_fd), 1e-12)
        contact = out.info["max_contact_force"] > 0
        print(f"state {i}: rel. error A {err_A:.2e}, B {err_B:.2e}{'  (in contact)' if contact else ''}")
        worst.append(max(err_A, err_B))
        if out.terminated or out.truncated:
            env.reset()
    env.close()
    ok = sum(w < tolerance for w in worst)
    print(f"{ok}/{states} states within {tolerance:g} (states near contact switches may differ)")
    return ok == states
