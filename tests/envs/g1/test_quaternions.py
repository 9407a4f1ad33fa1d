"""Tests of bcg_envs/envs/g1/quaternions.py (MuJoCo order w, x, y, z)."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from bcg_envs.envs.g1 import quaternions as Q

EX, EY, EZ = np.eye(3)
S = np.sqrt(0.5)
Z90 = np.array([S, 0.0, 0.0, S])  # +90 deg about z
X90 = np.array([S, S, 0.0, 0.0])  # +90 deg about x


def _random_quats(n, seed=0):
    return Q.quat_normalize(np.random.default_rng(seed).normal(size=(n, 4)))


def _mj_mat(q):
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(q, np.float64))
    return mat.reshape(3, 3)


def test_hand_worked_rotations_and_composition():
    # 90 deg about z takes x to y and y to -x.
    np.testing.assert_allclose(Q.quat_rotate(Z90, EX), EY, atol=1e-15)
    np.testing.assert_allclose(Q.quat_rotate(Z90, EY), -EX, atol=1e-15)
    np.testing.assert_allclose(Q.quat_rotate_inverse(Z90, EY), EX, atol=1e-15)
    # Twice 90 deg about z is 180 deg about z: (w, x, y, z) = (0, 0, 0, 1).
    np.testing.assert_allclose(Q.quat_mul(Z90, Z90), [0.0, 0.0, 0.0, 1.0], atol=1e-15)
    # a * b rotates by b first: x --z90--> y --x90--> z; the other order leaves x on y.
    np.testing.assert_allclose(Q.quat_rotate(Q.quat_mul(X90, Z90), EX), EZ, atol=1e-15)
    np.testing.assert_allclose(Q.quat_rotate(Q.quat_mul(Z90, X90), EX), EY, atol=1e-15)
    # Pitch: rotation about y takes z to (sin p, 0, cos p).
    p = 0.3
    np.testing.assert_allclose(Q.quat_from_pitch(p), [np.cos(p / 2), 0.0, np.sin(p / 2), 0.0])
    np.testing.assert_allclose(Q.quat_rotate(Q.quat_from_pitch(p), EZ), [np.sin(p), 0.0, np.cos(p)], atol=1e-15)
    # Rotation vector and error of the hand-worked case.
    np.testing.assert_allclose(Q.quat_to_rotvec(Z90), [0.0, 0.0, np.pi / 2], atol=1e-15)
    assert Q.quat_error(Z90, [1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.5)  # sin^2(45 deg)


def test_matches_mujoco_rotation_matrices_and_products():
    qs = _random_quats(20)
    other = _random_quats(20, seed=1)
    v = np.random.default_rng(2).normal(size=(20, 3))
    for q, b, x in zip(qs, other, v):
        mat = _mj_mat(q)
        # quat -> matrix: columns are the rotated axes; 6D = first two columns.
        np.testing.assert_allclose(np.stack([Q.quat_rotate(q, e) for e in np.eye(3)], axis=1), mat, atol=1e-12)
        np.testing.assert_allclose(Q.quat_to_6d(q), np.concatenate([mat[:, 0], mat[:, 1]]), atol=1e-12)
        np.testing.assert_allclose(Q.quat_rotate(q, x), mat @ x, atol=1e-12)
        np.testing.assert_allclose(Q.quat_rotate_inverse(q, x), mat.T @ x, atol=1e-12)
        # matrix -> quat (MuJoCo) gives the same rotation, up to sign.
        back = np.zeros(4)
        mujoco.mju_mat2Quat(back, mat.ravel())
        assert Q.quat_error(back, q) == pytest.approx(0.0, abs=1e-12)
        # Products as MuJoCo's.
        prod = np.zeros(4)
        mujoco.mju_mulQuat(prod, q, b)
        np.testing.assert_allclose(Q.quat_mul(q, b), prod, atol=1e-12)
        np.testing.assert_allclose(_mj_mat(Q.quat_mul(q, b)), mat @ _mj_mat(b), atol=1e-12)


def test_round_trips():
    q = _random_quats(50)
    v = np.random.default_rng(3).normal(size=(50, 3))
    # Order conversion (file boundary) is a permutation and its inverse.
    np.testing.assert_array_equal(Q.xyzw_to_wxyz(Q.wxyz_to_xyzw(q)), q)
    np.testing.assert_array_equal(Q.wxyz_to_xyzw([1.0, 2.0, 3.0, 4.0]), [2.0, 3.0, 4.0, 1.0])
    # q * conj(q) = identity; rotate then rotate back.
    identity = np.tile([1.0, 0.0, 0.0, 0.0], (50, 1))
    np.testing.assert_allclose(Q.quat_mul(q, Q.quat_conj(q)), identity, atol=1e-15)
    np.testing.assert_allclose(Q.quat_rotate_inverse(q, Q.quat_rotate(q, v)), v, atol=1e-12)
    # Rotation vector of axis/angle, and back to the same rotation.
    axis = v / np.linalg.norm(v, axis=1, keepdims=True)
    angle = np.linspace(0.0, np.pi - 1e-6, 50)
    built = np.concatenate([np.cos(angle / 2)[:, None], np.sin(angle / 2)[:, None] * axis], axis=1)
    np.testing.assert_allclose(Q.quat_to_rotvec(built), axis * angle[:, None], atol=1e-9)
    np.testing.assert_allclose(Q.quat_to_rotvec(-built), axis * angle[:, None], atol=1e-9)  # -q same
    # Normalization is idempotent and finite at zero.
    np.testing.assert_allclose(Q.quat_normalize(3.0 * q), q, atol=1e-15)
    np.testing.assert_array_equal(Q.quat_normalize(np.zeros(4)), np.zeros(4))


def test_slerp_endpoints_midpoint_and_shortest_path():
    q0, q1 = _random_quats(2, seed=4)
    np.testing.assert_allclose(Q.quat_slerp(q0, q1, 0.0), q0, atol=1e-12)
    assert Q.quat_error(Q.quat_slerp(q0, q1, 1.0), q1) == pytest.approx(0.0, abs=1e-12)
    identity = np.array([1.0, 0.0, 0.0, 0.0])
    half = -np.array([np.cos(0.25), 0.0, 0.0, np.sin(0.25)])  # -q: the same 0.5 rad about z
    mid = Q.quat_slerp(identity, half, 0.5)
    np.testing.assert_allclose(mid, [np.cos(0.125), 0.0, 0.0, np.sin(0.125)], atol=1e-15)
    # Broadcast over a batch of blend weights.
    assert Q.quat_slerp(identity, half, np.linspace(0, 1, 7)).shape == (7, 4)


def test_numpy_and_jax_give_the_same_results():
    q = _random_quats(8)
    b = _random_quats(8, seed=5)
    v = np.random.default_rng(6).normal(size=(8, 3))
    cases = {
        "normalize": lambda m, q, b, v: Q.quat_normalize(3.0 * q),
        "conj": lambda m, q, b, v: Q.quat_conj(q),
        "mul": lambda m, q, b, v: Q.quat_mul(q, b),
        "rotate": lambda m, q, b, v: Q.quat_rotate(q, v),
        "rotate_inverse": lambda m, q, b, v: Q.quat_rotate_inverse(q, v),
        "to_6d": lambda m, q, b, v: Q.quat_to_6d(q),
        "error": lambda m, q, b, v: Q.quat_error(q, b),
        "rotvec": lambda m, q, b, v: Q.quat_to_rotvec(q),
        "slerp": lambda m, q, b, v: Q.quat_slerp(q, b, m.linspace(0.0, 1.0, 8)),
        "pitch": lambda m, q, b, v: Q.quat_from_pitch(v[:, 0]),
        "to_wxyz": lambda m, q, b, v: Q.xyzw_to_wxyz(q),
    }
    for name, fn in cases.items():
        host = fn(np, q, b, v)
        dev = fn(jnp, *(jnp.asarray(x, jnp.float32) for x in (q, b, v)))
        assert isinstance(host, np.ndarray) and host.dtype == np.float64, name
        assert isinstance(dev, jax.Array) and dev.dtype == jnp.float32, name
        np.testing.assert_allclose(np.asarray(dev), host, atol=2e-6, err_msg=name)


def test_jax_gradients_are_finite():
    q = jnp.array([1.0, 0.0, 0.0, 0.0])
    # quat_error at its minimum, quat_to_rotvec at the identity, normalize at zero.
    g = jax.grad(lambda x: Q.quat_error(x, q))(q)
    np.testing.assert_allclose(np.asarray(g), 0.0, atol=1e-6)
    g = jax.grad(lambda x: jnp.sum(Q.quat_to_rotvec(x)))(q)
    assert np.all(np.isfinite(np.asarray(g)))
    g = jax.grad(lambda x: jnp.sum(Q.quat_normalize(x)))(jnp.zeros(4))
    assert np.all(np.isfinite(np.asarray(g)))
    # Under jit too.
    out = jax.jit(Q.quat_rotate)(jnp.asarray(Z90, jnp.float32), jnp.asarray(EX, jnp.float32))
    np.testing.assert_allclose(np.asarray(out), EY, atol=1e-6)
