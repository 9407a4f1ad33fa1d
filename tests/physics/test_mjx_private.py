"""bcg_envs/physics/mjx_private.py: the package's one home of private MJX, pinned to the
MuJoCo/MJX release it was written for; each wrapper agrees with MuJoCo C."""

import ast
from pathlib import Path

import jax
import mujoco
import numpy as np
import pytest
from mujoco import mjx

import bcg_envs
from bcg_envs.physics import mjx_private

PACKAGE = Path(bcg_envs.__file__).parent

XML = """
<mujoco>
  <option timestep="0.005" solver="Newton" integrator="Euler"/>
  <worldbody>
    <geom type="plane" size="1 1 0.1"/>
    <body pos="0 0 0.098">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
    </body>
    <body pos="0.5 0 1">
      <joint name="h1" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/>
      <body pos="0.3 0 0">
        <joint name="h2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <general joint="h1" dyntype="integrator" actlimited="true" actrange="-0.2 0.2"/>
    <general joint="h2" dyntype="filterexact" dynprm="0.05"/>
  </actuator>
</mujoco>
"""


@pytest.fixture(scope="module")
def resting():
    """A box 2 mm into the floor (four contacts) beside a two-link arm with activations."""
    m = mujoco.MjModel.from_xml_string(XML)
    d = mujoco.MjData(m)
    d.qvel[6:] = [0.4, -0.7]
    d.act[:] = [0.199, -0.3]  # the integrator's next activation hits actrange
    d.ctrl[:] = [0.8, 0.5]
    mujoco.mj_forward(m, d)
    assert d.ncon == 4
    return m, d


def test_written_for_the_installed_mujoco():
    """Fails with what to recheck when MuJoCo/MJX is not the release the wrappers were written for."""
    mjx_private.check_version()
    assert mujoco.__version__ == mjx_private.MJX_VERSION


def test_another_version_names_what_to_recheck():
    expected = r"written for MuJoCo/MJX 3\.17\.0, but 9\.9\.9 is installed: recheck "
    with pytest.raises(RuntimeError, match=expected) as err:
        mjx_private.check_version("9.9.9")
    for name in ("solver.Context", "_next_activation", "quat_mul", "make_condim", "make_efc_address", "_impl.contact"):
        assert name in str(err.value)


def _private_mjx(tree: ast.AST) -> list:
    """Lines importing a private part of ``mujoco`` (a ``_`` module or name), or reading ``._impl``."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mujoco"):
            names = node.module.split(".") + [a.name for a in node.names]
            if any(n.startswith("_") for n in names):
                hits.append(node.lineno)
        elif isinstance(node, ast.Import):
            if any(a.name.startswith("mujoco") and "._" in a.name for a in node.names):
                hits.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "_impl":
            hits.append(node.lineno)
    return hits


def test_only_the_adapter_reaches_private_mjx():
    """No module of the package but the adapter imports private MJX or reads ``._impl``."""
    users = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if _private_mjx(ast.parse(p.read_text())))
    assert users == ["physics/mjx_private.py"], users


def test_quaternion_algebra_matches_mujoco():
    rng = np.random.default_rng(0)
    for _ in range(5):
        u, v = (q / np.linalg.norm(q) for q in rng.standard_normal((2, 4)))
        want = np.zeros(4)
        mujoco.mju_mulQuat(want, u, v)
        np.testing.assert_allclose(mjx_private.quat_mul(u, v), want, atol=1e-6)
        mujoco.mju_negQuat(want, u)
        np.testing.assert_allclose(mjx_private.quat_inv(u), want, atol=1e-7)


@pytest.mark.parametrize("jacobian", ["dense", "sparse"])
def test_public_mass_matrix_and_point_jacobian_match_mujoco(resting, jacobian):
    """``mjx.full_m`` and ``mjx.jac`` (public, used instead of private ``support``) agree with
    ``mj_fullM`` and ``mj_jac`` for dense and sparse MJX mass matrices."""
    m = mujoco.MjModel.from_xml_string(XML)
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_SPARSE if jacobian == "sparse" else mujoco.mjtJacobian.mjJAC_DENSE
    d = mujoco.MjData(m)
    d.qpos[:] = resting[1].qpos
    d.qpos[7:] = [0.4, -1.1]
    mujoco.mj_forward(m, d)
    with jax.enable_x64(True):
        mx = mjx.put_model(m)
        dx = jax.jit(mjx.forward)(mx, mjx.put_data(m, d))  # eager: twice as slow (a compile per op)
        dense = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, dense)
        np.testing.assert_allclose(mjx.full_m(mx, dx), dense, rtol=1e-10, atol=1e-12)
        point = np.array([0.62, 0.05, 0.93])
        jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jac(m, d, jacp, jacr, point, m.nbody - 1)
        jp, jr = mjx.jac(mx, dx, point, m.nbody - 1)
        np.testing.assert_allclose(np.asarray(jp).T, jacp, atol=1e-10)
        np.testing.assert_allclose(np.asarray(jr).T, jacr, atol=1e-10)


def test_next_activation_matches_mj_step(resting):
    """Integrator (clamped to actrange) and filterexact activations after one Euler step."""
    m, d = resting
    with jax.enable_x64(True):
        mx = mjx.put_model(m)
        dx = mjx.put_data(m, d)
        got = np.asarray(mjx_private.next_activation(mx, dx, dx.act_dot))
    stepped = mujoco.MjData(m)
    stepped.qpos[:], stepped.qvel[:], stepped.act[:], stepped.ctrl[:] = d.qpos, d.qvel, d.act, d.ctrl
    mujoco.mj_step(m, stepped)
    assert got[0] == 0.2  # 0.199 + 0.005 * 0.8, clamped
    np.testing.assert_allclose(got, stepped.act, rtol=1e-12, atol=1e-14)


def test_contacts_and_constraint_forces(resting):
    """The contact slots and row forces of ``mjx.put_data`` hold MuJoCo C's contacts and
    forces; ``with_efc_force`` replaces the forces only."""
    m, d = resting
    with jax.enable_x64(True):
        dx = mjx.put_data(m, d)
        assert mjx_private.has_constraint_rows(dx)
        contact = mjx_private.contact(dx)
        np.testing.assert_array_equal(np.asarray(contact.dim), mjx_private.contact_condims(m))
        used = np.asarray(contact.efc_address) >= 0
        dist = np.sort(np.asarray(contact.dist)[used])
        np.testing.assert_allclose(dist, np.sort(d.contact.dist[: d.ncon]), atol=1e-12)
        force = np.asarray(mjx_private.efc_force(dx))
        np.testing.assert_allclose(np.sort(force[force != 0]), np.sort(d.efc_force[d.efc_force != 0]), rtol=1e-10)
        new = mjx_private.with_efc_force(dx, jax.numpy.arange(force.size, dtype=float))
        np.testing.assert_array_equal(mjx_private.efc_force(new), np.arange(force.size))
        np.testing.assert_array_equal(new.qacc, dx.qacc)
        free = mujoco.MjModel.from_xml_string(XML.replace('<geom type="plane" size="1 1 0.1"/>', ""))
        assert not mjx_private.has_constraint_rows(mjx.make_data(mjx.put_model(free)))


def test_newton_direction_vanishes_at_the_optimum(resting):
    """``H^-1 g`` of the constrained cost is ~0 at MuJoCo C's solved ``qacc``, and one Newton
    step from the unconstrained ``qacc_smooth`` lands on it (the active set is the same)."""
    m, d = resting
    with jax.enable_x64(True):
        mx = mjx.put_model(m)
        dx = mjx.put_data(m, d)
        at_optimum = np.asarray(mjx_private.newton_direction(mx, dx))
        start = dx.replace(qacc=dx.qacc_smooth)
        stepped = np.asarray(dx.qacc_smooth - mjx_private.newton_direction(mx, start))
    gap = np.linalg.norm(d.qacc_smooth - d.qacc)
    assert gap > 1.0  # the contacts hold the box against gravity
    assert np.linalg.norm(at_optimum) < 1e-6 * gap
    assert np.linalg.norm(stepped - d.qacc) < 1e-6 * gap


def test_contact_layout_is_make_datas(resting):
    """``contact_layout`` (NumPy alone) gives the rows and condims ``mjx.make_data`` lays out."""
    m, _ = resting
    models = [m, bcg_envs.make_jax("BoxPush-v0").mj_model, bcg_envs.make_jax("PlanarHand-v0").mj_model]
    for model in models:
        contact = mjx_private.contact(mjx.make_data(mjx.put_model(model)))
        address, dims = mjx_private.contact_layout(model)
        np.testing.assert_array_equal(address, np.asarray(contact.efc_address))
        np.testing.assert_array_equal(dims, np.asarray(contact.dim))


def test_abstract_model_has_put_models_shapes_and_restores_mjx(resting):
    """``abstract_model`` is ``put_model``'s pytree with ShapeDtypeStruct leaves (same
    shapes and dtypes, same static fields); ``without_device`` puts MJX back as it was."""
    m, _ = resting
    from mujoco.mjx._src import io as mjx_io

    before = mjx_io.jax, mjx_io._resolve_impl_and_device
    abstract = mjx_private.abstract_model(m)
    assert (mjx_io.jax, mjx_io._resolve_impl_and_device) == before
    real = mjx.put_model(m)
    abstract_leaves, abstract_def = jax.tree.flatten(abstract)
    real_leaves, real_def = jax.tree.flatten(real)
    assert abstract_def == real_def
    assert all(isinstance(a, jax.ShapeDtypeStruct) for a in abstract_leaves)
    assert [(a.shape, a.dtype) for a in abstract_leaves] == [(r.shape, r.dtype) for r in real_leaves]
    with mjx_private.without_device():
        data = jax.eval_shape(lambda model: mjx.forward(model, mjx.make_data(model)), abstract)
    assert data.qpos.shape == (m.nq,)
