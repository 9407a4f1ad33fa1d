"""bcg_envs.gradients.registry: every estimator name maps to one object, names are checked
at the public entry points, and no other module compares estimator names."""

import re
from pathlib import Path

import numpy as np
import pytest

import bcg_envs
from bcg_envs.gradients import config, registry
from bcg_envs.gradients.config import BundleConfig
from bcg_envs.gradients.registry import ESTIMATORS, REGISTRY, Estimator, resolve

BAD = "fourth"
MATCH = r"estimator must be one of \('exact', 'bundle', 'zeroth', 'bcg', 'alpha'\), got 'fourth'"
PACKAGE = Path(bcg_envs.__file__).parent

# (samples, least_squares, triggered, contact_local, has_exact_steps) per name, as the
# docs describe the estimators.
PROPERTIES = {
    "exact": (False, False, False, False, True),
    "bundle": (True, False, False, False, False),
    "zeroth": (True, True, False, False, False),
    "bcg": (True, False, True, True, True),
    "alpha": (True, True, False, False, False),
}


class _Recorder:
    """``StepDerivatives`` that names the derivative an estimator asks for."""

    def exact(self):
        return "exact"

    def first_order(self):
        return "first_order"

    def zeroth_order(self):
        return "zeroth_order"

    def alpha_order(self):
        return "alpha_order"


def test_registry_covers_every_name_once():
    assert tuple(REGISTRY) == ESTIMATORS == bcg_envs.ESTIMATORS
    assert set(PROPERTIES) == set(ESTIMATORS)
    for name in ESTIMATORS:
        est = resolve(name)
        assert isinstance(est, Estimator) and est.name == name and str(est) == name
        assert resolve(est) is est and hash(est) == hash(resolve(name))
        got = (est.samples, est.least_squares, est.triggered, est.contact_local, est.has_exact_steps)
        assert got == PROPERTIES[name], name
        assert est.rolls_branches(2) == (name == "bcg")
        assert not est.rolls_branches(1)
    bundled = {name: resolve(name).bundled(_Recorder()) for name in ESTIMATORS}
    assert bundled == {
        "exact": "exact",
        "bundle": "first_order",
        "bcg": "first_order",
        "zeroth": "zeroth_order",
        "alpha": "alpha_order",
    }


@pytest.mark.parametrize("bad", [BAD, "", None, 3, ["bcg"]])
def test_resolve_names_the_argument(bad):
    with pytest.raises(ValueError, match="estimator must be one of"):
        resolve(bad)


def test_helpers_take_a_name_or_the_object():
    from bcg_envs.gradients.cost import simulations_per_step
    from bcg_envs.gradients.trigger import bundle_decision

    for name in ESTIMATORS:
        est = resolve(name)
        assert config.samples_for(BundleConfig(), name, 10, 2) == config.samples_for(BundleConfig(), est, 10, 2)
        assert simulations_per_step(name, 10, 2, 10, 0.5) == simulations_per_step(est, 10, 2, 10, 0.5)
        assert bundle_decision(name, True, 0, 2, xp=np) == bundle_decision(est, True, 0, 2, xp=np)
    for call in (
        lambda: config.samples_for(BundleConfig(), BAD, 10, 2),
        lambda: simulations_per_step(BAD, 10, 2, 10, 0.5),
        lambda: bundle_decision(BAD, True, 0, 2, xp=np),
        lambda: config.check_estimator(BAD),
    ):
        with pytest.raises(ValueError, match=MATCH):
            call()


@pytest.fixture(scope="module")
def jax_env():
    return bcg_envs.make_jax("BoxPush-v0")


def test_jax_entry_points_name_the_estimator(jax_env):
    from bcg_envs.learners import shac
    from bcg_envs.torch import TorchRollout

    with pytest.raises(ValueError, match=MATCH):
        bcg_envs.make_jax("BoxPush-v0", estimator=BAD)
    with pytest.raises(ValueError, match=MATCH):
        jax_env.stepper(BAD)
    with pytest.raises(ValueError, match=MATCH):  # checked before the state is read
        jax_env.grad_step(None, np.zeros(jax_env.action_size, np.float32), BAD)
    with pytest.raises(ValueError, match=MATCH):
        TorchRollout(jax_env, 1, 1, estimator=BAD)
    with pytest.raises(ValueError, match=MATCH):
        TorchRollout("BoxPush-v0", 1, 1, estimator=BAD)
    with pytest.raises(ValueError, match=MATCH):
        shac.train(jax_env, num_timesteps=1, estimator=BAD, progress_bar=False)
    # The env keeps the name; its steppers hold the object.
    assert jax_env.estimator == "bcg" and jax_env.stepper().estimator is resolve("bcg")
    assert jax_env.stepper("exact") is jax_env.stepper(resolve("exact"))


def test_gym_grad_step_names_the_estimator(jax_env):
    import gymnasium as gym

    from bcg_envs.mjx_backend import MjxSimulation
    from bcg_envs.torch import TorchStep

    env = gym.make("bcg_envs/BoxPush-v0", backend="mujoco")
    try:
        env.reset(seed=0)
        with pytest.raises(ValueError, match=MATCH):
            env.unwrapped.grad_step(np.zeros(2, np.float32), estimator=BAD)
        assert env.unwrapped.simulation.default_estimator is resolve("bcg")
        with pytest.raises(ValueError, match=MATCH):
            TorchStep(env, estimator=BAD)
    finally:
        env.close()
    assert MjxSimulation(jax_env).default_estimator is resolve("bcg")
    for backend in ("mujoco", "mjx"):
        with pytest.raises(ValueError, match=MATCH):
            gym.make("bcg_envs/BoxPush-v0", backend=backend, estimator=BAD)


def test_cli_and_train_run_name_the_estimator(tmp_path, capsys):
    from bcg_envs import cli
    from bcg_envs.learners.runs import train_run

    for argv in (["train", "--estimator", BAD], ["bench", "--estimators", BAD]):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args(argv)
        assert f"invalid choice: '{BAD}'" in capsys.readouterr().err
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=MATCH):
        train_run("BoxPush-v0", estimator=BAD, steps=1, out_dir=out)
    assert not out.exists()


# ``== "bcg"``, ``"exact" !=``, ``in ("zeroth", ...)`` and the like: a name compared as a
# string; ``for name in ("exact", ...)`` iterates over names and is not a comparison.
_NAMES = "|".join(ESTIMATORS)
_EQUALITY = re.compile(rf"""[!=]=\s*["']({_NAMES})["']|["']({_NAMES})["']\s*[!=]=""")
_MEMBERSHIP = re.compile(rf"""\bin\s*[(\[{{]\s*["']({_NAMES})["']""")
_LOOP = re.compile(rf"""\bfor\s+[\w\s,]+\bin\s*[(\[{{]\s*["']({_NAMES})["']""")


def _compares_names(line: str) -> bool:
    return bool(_EQUALITY.search(line) or (_MEMBERSHIP.search(line) and not _LOOP.search(line)))


def test_estimator_names_are_compared_in_the_registry_only():
    allowed = {PACKAGE / "gradients" / "registry.py"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in allowed:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _compares_names(line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert not found, "estimator names compared outside gradients/registry.py:\n" + "\n".join(found)


def test_the_structural_check_catches_comparisons():
    compared = ('if estimator == "bcg":', "x = 'exact' != e", 'z = e in ("zeroth", "alpha")', "if e not in ['bundle']:")
    for line in compared:
        assert _compares_names(line), line
    for line in (
        'estimator: str = "bcg",',
        'stats["exact"]',
        'f(estimator="exact")',
        'if "bcg" in estimators:',
        'for name in ("exact", "bcg"):',
    ):
        assert not _compares_names(line), line
    assert registry.__name__ == "bcg_envs.gradients.registry"
