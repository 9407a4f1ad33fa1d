"""bcg_envs/gradients/perturbations.py on the G1: a bundle at a foot is local to its leg."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from bcg_envs import BundleConfig
from bcg_envs.envs.g1 import constants as C
from bcg_envs.gradients.perturbations import (
    chain_offsets,
    contact_chain,
    contact_sampler,
    draw_size,
    floating_base_dofs,
    sampled_contacts,
)

LEFT_LEG = (
    "left_hip_pitch_joint",
    "left_hip_roll_joint",
    "left_hip_yaw_joint",
    "left_knee_joint",
    "left_ankle_pitch_joint",
    "left_ankle_roll_joint",
)


@pytest.fixture(scope="module")
def standing():
    model = mujoco.MjModel.from_xml_path(str(C.G1_XML))
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_forward(model, data)
    return model, data


def _left_sole_jacobian(model, data):
    """Relative translational Jacobians (foot minus floor) at the left foot's four sole points."""
    foot = model.body("left_ankle_roll_link").id
    rows = []
    for name in [g for g in C.FOOT_GEOMS if g.startswith("left")]:
        g = model.geom(name).id
        point = data.geom_xpos[g] - np.array([0.0, 0.0, model.geom_size[g, 0]])
        jp = np.zeros((3, model.nv))
        mujoco.mj_jac(model, data, jp, None, point, foot)
        rows.append(jp)  # the floor is the world body: its Jacobian is zero
    return np.concatenate(rows)


@pytest.mark.parametrize("space", ["cartesian", "joint"])
def test_left_foot_bundle_moves_the_left_leg_only(standing, space):
    """A bundle at the left foot's contacts perturbs the six left-leg joints and nothing
    else: not the right leg, the waist, the arms, nor (by default) the floating base."""
    model, data = standing
    nv, nu = model.nv, model.nu
    nx = 2 * nv + model.na
    J = _left_sole_jacobian(model, data)
    assert np.abs(J[:, :6]).max() > 0.1  # the sole's Jacobian does move the base
    base = floating_base_dofs(model)
    leg = np.zeros(nv, bool)
    leg[[model.jnt_dofadr[model.joint(j).id] for j in LEFT_LEG]] = True
    active = jnp.ones((J.shape[0] // 3,), bool)
    keys = jax.random.split(jax.random.PRNGKey(0), 16)
    for perturb_base, moved in ((False, leg), (True, leg | base)):
        cfg = BundleConfig(space=space, perturb_base=perturb_base)
        sample = contact_sampler(jnp.asarray(J, jnp.float32), active, nx, nv, nu, cfg, None if perturb_base else ~base)
        dx = np.asarray(jax.vmap(sample)(keys)[0])
        for block in (dx[:, :nv], dx[:, nv : 2 * nv]):
            assert np.all(block[:, ~moved] == 0), np.flatnonzero(np.abs(block).max(0) > 0)
            assert np.abs(block[:, moved]).max(0).min() > 0


def _pressing_left_foot(standing):
    """The left sole's contact Jacobian with the floating base masked, and its chain."""
    model, data = standing
    J = _left_sole_jacobian(model, data)
    return J, contact_chain(J, BundleConfig().damping, ~floating_base_dofs(model))


def test_both_backends_share_one_map(standing):
    """``contact_chain`` and ``chain_offsets`` give the same chain and offsets in NumPy (the C
    backend) and in ``jax.numpy`` (MJX) for the same standard normals."""
    J, chain_np = _pressing_left_foot(standing)
    model = standing[0]
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        chain_jnp = contact_chain(jnp.asarray(J), BundleConfig().damping, ~floating_base_dofs(model), xp=jnp)
        np.testing.assert_array_equal(np.asarray(chain_jnp.chain), chain_np.chain)
        np.testing.assert_allclose(np.asarray(chain_jnp.gram), chain_np.gram, rtol=1e-14, atol=1e-16)
        for space in ("cartesian", "joint"):
            size = draw_size(space, chain_np)
            z = rng.standard_normal((2, size))
            want = chain_offsets(chain_np, space, (0.01, 0.02), z[0], z[1])
            got = chain_offsets(chain_jnp, space, (0.01, 0.02), jnp.asarray(z[0]), jnp.asarray(z[1]), xp=jnp)
            for a, b in zip(got, want):
                np.testing.assert_allclose(np.asarray(a), b, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("space", ["cartesian", "joint"])
def test_both_backends_draw_the_same_distribution(standing, space):
    """The backends draw from different generators (a JAX key split three ways; the C
    backend's ``numpy.random.Generator`` in the order dp, dv, du), so they agree in
    distribution: the sample covariance of ``(dq, dv)`` of each is
    ``blockdiag(sigma_p^2 P P^T, sigma_v^2 P P^T)`` with ``P = J^T (J J^T + damping I)^-1``
    (cartesian) or ``diag(chain)`` (joint): each block at its own sigma, and ``dq``
    independent of ``dv``. Each entry within 5 standard errors of a Gaussian covariance
    estimate, ``sqrt((w_ii w_jj + w_ij^2) / n)``."""
    model, _ = standing
    J, chain = _pressing_left_foot(standing)
    nv, nu = model.nv, model.nu
    nx = 2 * nv + model.na
    cfg = BundleConfig(space=space)
    n = 4000
    sample = contact_sampler(
        jnp.asarray(J, jnp.float32), jnp.ones(J.shape[0] // 3, bool), nx, nv, nu, cfg, ~floating_base_dofs(model)
    )
    dx_jax = np.asarray(jax.vmap(sample)(jax.random.split(jax.random.PRNGKey(1), n))[0][:, : 2 * nv], np.float64)
    rng = np.random.default_rng(1)
    size = draw_size(space, chain)
    dx_np = np.stack(
        [
            np.concatenate(
                chain_offsets(chain, space, cfg.state_sigma, rng.standard_normal(size), rng.standard_normal(size))[:2]
            )
            for _ in range(n)
        ]
    )
    if space == "cartesian":
        P = chain.jacobian.T @ np.linalg.inv(chain.gram)
    else:
        P = np.diag(chain.chain)
    sigma_p, sigma_v = cfg.state_sigma
    want = np.zeros((2 * nv, 2 * nv))
    want[:nv, :nv] = sigma_p**2 * P @ P.T
    want[nv:, nv:] = sigma_v**2 * P @ P.T
    w = np.diag(want)
    tolerance = 5 * np.sqrt((np.outer(w, w) + want**2) / n) + 1e-12
    for dx in (dx_jax, dx_np):
        assert np.all(dx[:, :nv][:, chain.chain == 0] == 0) and np.all(dx[:, nv:][:, chain.chain == 0] == 0)
        np.testing.assert_array_less(np.abs(dx.T @ dx / n - want), tolerance)


@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jax"])
def test_sampled_contacts_is_one_rule_on_both_array_modules(xp):
    """Pressing contacts where any presses; otherwise every contact with a positive force."""
    force = [0.0, 3.0, 12.0, 0.5]
    some = np.asarray(sampled_contacts([False, False, True, False], force, xp=xp))
    none = np.asarray(sampled_contacts([False] * 4, force, xp=xp))
    empty = np.asarray(sampled_contacts([], [], xp=xp))
    assert some.tolist() == [False, False, True, False]
    assert none.tolist() == [False, True, True, True]
    assert empty.shape == (0,)


@pytest.mark.parametrize("points", [1, 4])
def test_cartesian_draws_are_per_point_so_a_shared_body_moves_sigma_over_sqrt_n(points):
    """Each contact point draws its own displacement; on a body that several points share
    (a G1 foot's four spheres), the damped pseudo-inverse fits one motion to them: the
    body moves by ``state_sigma / sqrt(points)`` (docs/estimators.md)."""
    jacobian = np.tile(np.eye(3), (points, 1))  # the points of one body with 3 translational dofs
    chain = contact_chain(jacobian, 1e-4, xp=np)
    rng = np.random.default_rng(0)
    sigma = (0.01, 0.02)
    draws = [
        chain_offsets(
            chain, "cartesian", sigma, rng.standard_normal(3 * points), rng.standard_normal(3 * points), xp=np
        )
        for _ in range(4000)
    ]
    dq, dv = (np.array([d[k] for d in draws]) for k in (0, 1))
    np.testing.assert_allclose(dq.std(axis=0), sigma[0] / np.sqrt(points), rtol=0.05)
    np.testing.assert_allclose(dv.std(axis=0), sigma[1] / np.sqrt(points), rtol=0.05)
