"""``bcg-envs gradcheck``: MJX's exact Jacobians against MuJoCo C central finite differences.

States come from a seeded random rollout of the MJX env. At each, the same state is set in
the MuJoCo C backend of the same task, whose ``grad_step`` takes central differences of
the control step in MuJoCo C (float64, tangent coordinates through ``mj_integratePos`` /
``mj_differentiatePos``, the task's action map in float64, the solver run to
convergence), independent of MJX. Where a perturbation turns a contact on or off, or a
dry-friction force crosses its limit, the step has no derivative and the two differ; the
report marks the states in contact. Where a force-limited actuator saturates (G1 at random
states), MJX's step itself differs from MuJoCo C's (docs/environments.md, "Two physics
backends"), and so do its Jacobians.
"""

from __future__ import annotations

from typing import List, NamedTuple

import numpy as np

#: MuJoCo C's solver (iterations, tolerance) for the reference: run to convergence.
#: ``exact`` is the implicit derivative of the converged constraint solve; at a task's own
#: 4-5 iterations MuJoCo C's step depends on where its solver stopped, and its finite
#: differences differ from that derivative (0.5 % where PlanarHand's joints stick in dry
#: friction).
REFERENCE_SOLVER = (100, 1e-15)


class StateCheck(NamedTuple):
    """One state's relative errors of ``A`` and ``B``, whether either backend's step had
    contact, and whether both errors are within the tolerance."""

    error_A: float
    error_B: float
    in_contact: bool
    within: bool


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """``|got - want| / |want|`` in the Frobenius norm (absolute where ``want`` is 0)."""
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-12))


def run(env_id: str = "BoxPush-v0", states: int = 5, seed: int = 0, tolerance: float = 1e-3) -> List[StateCheck]:
    """Print and return the relative errors of ``A`` and ``B`` at ``states`` states (1 to 9
    random steps apart; actions and episodes drawn from ``seed``)."""
    import gymnasium as gym

    import bcg_envs

    name = f"bcg_envs/{bcg_envs.registry.short_name(env_id)}"
    mjx_env, c_env = gym.make(name), gym.make(name, backend="mujoco")
    rng = np.random.default_rng(seed)
    space = mjx_env.action_space
    episode = seed

    def new_episode():
        mjx_env.reset(seed=episode)
        c_env.reset(seed=episode)  # the same task info (goal, reference clip) as the MJX env's

    def draw() -> np.ndarray:
        return rng.uniform(space.low, space.high).astype(np.float32)

    new_episode()
    c_env.unwrapped.model.opt.iterations, c_env.unwrapped.model.opt.tolerance = REFERENCE_SOLVER
    checks = []
    for i in range(states):
        for _ in range(int(rng.integers(1, 10))):
            _, _, terminated, truncated, _ = mjx_env.step(draw())
            if terminated or truncated:
                episode += 1
                new_episode()
        state = mjx_env.unwrapped.get_state()
        c_env.unwrapped.set_state(*state, step=state.step)
        action = draw()
        out = mjx_env.unwrapped.grad_step(action, estimator="exact")
        ref = c_env.unwrapped.grad_step(action, estimator="exact")
        err_A = relative_error(out.jacobians.A, ref.jacobians.A)
        err_B = relative_error(out.jacobians.B, ref.jacobians.B)
        contact = max(out.info["max_contact_force"], ref.info["max_contact_force"]) > 0
        print(f"state {i}: rel. error A {err_A:.2e}, B {err_B:.2e}{'  (in contact)' if contact else ''}")
        checks.append(StateCheck(err_A, err_B, bool(contact), max(err_A, err_B) < tolerance))
        if out.terminated or out.truncated:
            episode += 1
            new_episode()
    mjx_env.close()
    c_env.close()
    ok = sum(c.within for c in checks)
    print(f"{ok}/{states} states within {tolerance:g} (a state where the step switches contact has no derivative)")
    return checks
