"""baselines/gradient_variance_contact.py: contact models, levels, physics timesteps and contact options."""

import pytest

from baselines.gradient_variance_contact import options_key, parse_contact_options, select_models


def test_levels_and_physics_timestep_from_the_command_line():
    both = select_models("both", None, None, quick=False)
    assert [m.name for m in both] == ["mujoco", "penalty"]
    assert both[0].levels == (0.05, 0.02, 0.008, 0.004, 0.002) and both[0].physics_dt == 0.001
    assert both[1].levels == (50.0, 100.0, 200.0, 300.0, 500.0) and both[1].physics_dt is None
    assert both[1].env_kwargs(300.0) == {"contact_model": "penalty", "kappa": 300.0}
    assert both[0].env_kwargs(0.004) == {"physics_dt": 0.001, "contact_stiffness": 0.004}
    picked = select_models("both", ["penalty=100", "penalty=200"], 0.0, quick=False)
    assert picked[0].levels == both[0].levels and picked[0].physics_dt is None
    assert picked[1].levels == (100.0, 200.0)
    assert select_models("mujoco", ["0.01"], None, quick=False)[0].levels == (0.01,)
    with pytest.raises(ValueError):
        select_models("mujoco", ["penalty=100"], None, quick=False)


def test_moreau_levels_options_and_physics_timestep_from_the_command_line():
    (moreau,) = select_models("moreau", None, None, quick=False)
    assert moreau.levels == (50.0, 100.0, 300.0, 1000.0, 3000.0) and moreau.physics_dt is None
    assert moreau.variant == "" and moreau.env_kwargs(300.0) == {"contact_model": "moreau", "kappa": 300.0}
    assert select_models(["moreau"], None, None, quick=True)[0].levels == (300.0,)
    # ``both`` keeps its meaning; several models by name; options reach the kappa models only
    assert [m.name for m in select_models(["both"], None, None, quick=False)] == ["mujoco", "penalty"]
    mujoco, variant = select_models(
        ["mujoco", "moreau", "mujoco"], ["moreau=300", "moreau=1000"], 0.002, False, {"midpoint": False}
    )
    assert (mujoco.name, mujoco.options, mujoco.physics_dt) == ("mujoco", (), 0.002)
    assert variant.levels == (300.0, 1000.0) and variant.physics_dt == 0.002
    assert variant.variant == "midpoint=False"
    assert variant.env_kwargs(1000.0) == {
        "physics_dt": 0.002,
        "contact_options": {"midpoint": False},
        "contact_model": "moreau",
        "kappa": 1000.0,
    }
    # --physics-dt leaves the penalty model at the task's timestep, as before
    (penalty,) = select_models("penalty", None, 0.002, False, {"baumgarte": 0.1})
    assert penalty.physics_dt is None and penalty.variant == "baumgarte=0.1"
    (task_dt,) = select_models("moreau", None, 0.0, False, {"prox_iterations": 4})
    assert task_dt.physics_dt is None and task_dt.variant == "prox_iterations=4"
    with pytest.raises(ValueError, match="prox_iterations.*penalty"):  # every selected kappa model takes them
        select_models(["penalty", "moreau"], None, None, False, {"prox_iterations": 4})
    for models, options, match in [
        ("mujoco", {"midpoint": False}, "neither is selected"),
        ("moreau", {"baumgarte": 0.2}, "baumgarte"),
        ("penalty", {"midpoint": False}, "midpoint"),
        ("moreau", {"friction": "smooth"}, "friction"),
        ("moreau", {"prox_iterations": -1}, "prox_iterations"),
        ("stiff", None, "contact-model"),
    ]:
        with pytest.raises(ValueError, match=match):
            select_models(models, None, None, False, options)


def test_contact_options_are_parsed_to_bools_numbers_and_words():
    parsed = parse_contact_options(
        ["midpoint=False", "step_cap=true", "prox_iterations=50", "contact_margin=1e-3", "friction=regularized"]
    )
    assert parsed == {
        "midpoint": False,
        "step_cap": True,
        "prox_iterations": 50,
        "contact_margin": 0.001,
        "friction": "regularized",
    }
    assert type(parsed["prox_iterations"]) is int and type(parsed["contact_margin"]) is float
    assert parse_contact_options(None) == {}
    assert options_key(parsed) == (
        "contact_margin=0.001;friction=regularized;midpoint=False;prox_iterations=50;step_cap=True"
    )
    for bad in (["midpoint"], ["=3"], ["a b=1"], ["x=a/b"], ["midpoint=False", "midpoint=True"]):
        with pytest.raises(ValueError, match="contact-options"):
            parse_contact_options(bad)
