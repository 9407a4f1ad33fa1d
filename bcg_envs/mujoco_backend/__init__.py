"""CPU fast path: ``backend="mujoco"`` steps the task's ``MjModel`` in MuJoCo C.

A jitted MJX step on CPU is dispatch-bound (hundreds of microseconds per call) while
MuJoCo C steps the same small model in microseconds. ``MujocoSimulation`` and
``MujocoBatchSimulation`` (the physics of ``bcg_envs.gym.GymEnv``/``GymVectorEnv`` with
``backend="mujoco"``) keep the task's JAX logic (observation, reward, termination, initial
states, action map; written once, in the task class) and replace only the physics:

* Physics: ``mujoco.mj_step`` on the task's ``MjModel`` (the model MJX simulates, contact
  stiffness and task edits applied), ``physics.n_substeps`` substeps per control step, in
  float64, ``ctrl = action_to_ctrl(clip(action))`` in NumPy (as ``c + M a`` when the map is
  affine, checked at construction). The contact normal forces behind
  ``info["max_contact_force"]``/``info["max_contact_rise"]`` and the ``bcg`` trigger are
  MuJoCo's own (``mj_contactForce``), summed per contact event (body pair) as in MJX.
  ``bcg`` with ``horizon > 1`` keeps its window of one-step bundles here (no branch
  rollouts: those are the MJX training path's).
* Task: a ``TaskSpec`` (the task's config, ``MjModel`` and pure functions) configures
  the backend, which neither uses a ``DifferentiableStep`` nor traces ``reset``.
  MJX's private layout (``mjx.Data._impl`` paths, slot and row placement) is confined to
  ``mjx_layout``, which reaches private MJX only through ``bcg_envs.physics.mjx_private``
  (pinned to the MuJoCo/MJX release it was written for).
* Task logic: ``observe``/``reward``/``terminated`` are traced once into one jitted
  function of a packed vector holding exactly the ``mjx.Data`` leaves (and task-info
  entries) that they read, found by a liveness pass over the traced jaxpr; every other
  leaf is a zero constant that XLA removes. The leaves are copied from the C ``MjData``
  after ``mj_kinematics``/``mj_comPos`` (MJX's ``refresh``); contact and constraint leaves
  are reordered into MJX's slot layout exactly as ``mjx.put_data`` does, and leaves
  without a fast copy would fall back to ``mjx.put_data`` per step. ``mjx.put_data``
  costs 3-9 ms per call on BoxPush, the packed path ~7 us plus one ~12 us jit dispatch
  (``bcg_envs.backend_benchmark``; ~40 us of CPU inside a step loop, where the dispatch
  path's caches are cold).
* Vector env: all copies advance in one multi-threaded ``mujoco.rollout.Rollout`` call;
  rollout returns states only, so each copy then replays ``mj_forward`` at the substeps
  where ``mj_collision`` finds contacts (and at the last one) for the contact forces, the
  constraint leaves and the next warmstart. One vmapped jit call evaluates the task.
* Jacobians (``grad_step``): central differences of the whole control step in tangent
  coordinates (``mj_integratePos``/``mj_differentiatePos``); every branch of an
  estimator is one trajectory of a single ``Rollout`` call. (``mjd_transitionFD`` per
  substep, composed, agrees to ~1e-8 at smooth states and costs about the same for
  ``exact``, but the bundles would need a Python loop over branches and substeps.)
  ``r_x``, ``r_a`` and ``C`` chain forward-mode derivatives of the shared task functions
  with respect to the leaves they read with central differences of C's kinematics.

Divergence (non-finite state, a MuJoCo instability warning, or ``|qvel| >= 1e3``) reverts
the step as in MJX: ``terminated=True``, ``info["sim_diverged"]=True``, finite obs, zero
Jacobians.

``python -m bcg_envs.backend_benchmark`` measures it against MJX.
"""

from bcg_envs.mujoco_backend.envs import MujocoBatchSimulation, MujocoSimulation
from bcg_envs.mujoco_backend.task_spec import TaskSpec

__all__ = ["MujocoBatchSimulation", "MujocoSimulation", "TaskSpec"]
