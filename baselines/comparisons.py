"""The committed comparisons of the results page and the commands that produced them.

``COMPARISONS``: each directory of ``baselines.compare`` runs under ``RESULTS`` with the
budget its tables score every run at and its command line; ``TUNING``: the tuning
directories with their commands and grids; ``COMMANDS``: the command lines of the page's
other results (gradient-variance sweeps, contact events, friction switches, references).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Dict, Optional, Sequence

from baselines import protocol

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "baselines" / "results"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """A directory of ``baselines.compare`` runs and the command that produced them.

    ``steps``/``evals``/``config``: the budget its table scores every run at, as the
    command's (last) ``compare`` call computes it (``protocol.planned_env_steps``). A
    ``config`` with ``{algo}`` in its path is one file per learner (the finals' configs);
    learners without a file have no runs there."""

    key: str
    env: str
    steps: int
    evals: int
    command: str
    config: Optional[str] = None

    @property
    def path(self) -> Path:
        return RESULTS / self.key

    def _config(self, algo: str) -> Optional[dict]:
        path = ROOT / self.config.format(algo=algo) if self.config else None
        if path is not None and "{algo}" in self.config and not path.exists():
            return None
        return protocol.load_config(self.env, path)

    def budgets(self) -> Dict[str, int]:
        configs = {a: self._config(a) for a in protocol.ALGORITHMS}
        return {
            a: protocol.planned_env_steps(a, cfg, self.steps, self.evals)
            for a, cfg in configs.items()
            if cfg is not None and protocol.config_section(a) in cfg
        }

    def env_kwargs(self) -> Dict[str, object]:
        configs = [c for c in map(self._config, protocol.ALGORITHMS) if c is not None]
        return protocol.env_kwargs_of(configs[0] if configs else protocol.load_config(self.env))


def _loop(env: str, algos: str, seeds: str, steps: int, evals: int, out: str, config: str = "") -> str:
    """The one-algorithm-per-command loop every multi-algorithm comparison ran as."""
    cfg = f"--config {config} \\\n      " if config else ""
    return (
        f"for algo in {algos}; do\n  python -m baselines.compare --env {env} {cfg}--algos $algo --seeds {seeds} \\\n"
        f"      --steps {steps} --evals {evals} --out baselines/results/{out}\ndone"
    )


_BOX = "BoxPush-v0"
_CFG = "baselines/configs/"


def _box_131k(name: str, algos: str, seeds: str) -> "Comparison":
    """A BoxPush comparison at 131,072 env steps (16 evaluations) under
    ``baselines/configs/BoxPush-v0.<name>.json``, written to ``BoxPush-v0/<name>``."""
    config = _CFG + f"BoxPush-v0.{name}.json"
    return Comparison(
        f"BoxPush-v0/{name}",
        _BOX,
        131_072,
        16,
        _loop(_BOX, algos, seeds, 131_072, 16, f"BoxPush-v0/{name}", config),
        config,
    )


def _box_moreau(kappa: int) -> "Comparison":
    """BoxPush under the authors' contact model at ``kappa`` (/m): both SHAC variants and both
    PPO learners on three seeds at 2,097,152 env steps (16 evaluations)."""
    name, config = f"BoxPush-v0/moreau_k{kappa}", _CFG + f"BoxPush-v0.moreau_k{kappa}.json"
    algos = "shac_exact shac_bcg sb3_ppo brax_ppo"
    return Comparison(name, _BOX, 2_097_152, 16, _loop(_BOX, algos, "0 1 2", 2_097_152, 16, name, config), config)


#: The last version whose MJX ``implicitfast`` step kept a force-clamped actuator's velocity
#: gain (MJX's own step); G1 runs named ``..._mjx_implicitfast`` were trained with it.
MJX_IMPLICITFAST_COMMIT = "d918ce2"


def _g1_moreau(kappa: int, mjx_implicitfast: bool = False) -> "Comparison":
    """G1Jump under the authors' contact model at ``kappa`` (/m): SHAC exact, SHAC bcg and
    SB3 PPO on three seeds at the CPU budget, then the final policies in MuJoCo C (and how
    often they saturate an actuator; and, under the matching step, in MJX under MuJoCo's
    contact). ``mjx_implicitfast``: the first set, trained at
    ``MJX_IMPLICITFAST_COMMIT`` (its command runs there)."""
    config = _CFG + f"G1Jump-v0.moreau_k{kappa}.json"
    name = f"moreau_k{kappa}" + ("_mjx_implicitfast" if mjx_implicitfast else "")
    out = f"baselines/results/G1Jump-v0/{name}"
    command = _loop("G1Jump-v0", "shac_exact sb3_ppo shac_bcg", "0 1 2", 262_144, 8, f"G1Jump-v0/{name}", config)
    command += "".join(
        f"\npython -m baselines.{tool} --env G1Jump-v0 --config {config} --steps 262144 --out {out}"
        for tool in ("final_scores", "actuator_saturation") + (() if mjx_implicitfast else ("contact_transfer",))
    )
    if mjx_implicitfast:
        command = (
            f"git worktree add ../mjx-implicitfast {MJX_IMPLICITFAST_COMMIT} && cd ../mjx-implicitfast\n" + command
        )
    return Comparison(f"G1Jump-v0/{name}", "G1Jump-v0", 262_144, 8, command, config)


COMPARISONS: Dict[str, Comparison] = {
    c.key: c
    for c in (
        Comparison(
            "BoxPush-v0/long",
            _BOX,
            2_097_152,
            32,
            _loop(_BOX, "sb3_ppo shac_exact shac_bcg brax_ppo", "0 1 2", 2_097_152, 32, "BoxPush-v0/long")
            + "\npython -m baselines.box_push_endings --out baselines/results/BoxPush-v0/long --steps 2097152",
        ),
        Comparison(
            "BoxPush-v0/long_ppo_linear",
            _BOX,
            2_097_152,
            32,
            "python -m baselines.compare --env BoxPush-v0 --config baselines/configs/BoxPush-v0.ppo_linear_lr.json \\\n"
            "    --algos sb3_ppo --seeds 0 1 2 --steps 2097152 --evals 32 "
            "--out baselines/results/BoxPush-v0/long_ppo_linear\n"
            "python -m baselines.box_push_endings --out baselines/results/BoxPush-v0/long_ppo_linear --steps 2097152",
            _CFG + "BoxPush-v0.ppo_linear_lr.json",
        ),
        Comparison(
            "BoxPush-v0/long_4m",
            _BOX,
            4_194_304,
            32,
            _loop(_BOX, "shac_bcg shac_exact", "0 1 2", 4_194_304, 32, "BoxPush-v0/long_4m"),
        ),
        Comparison(
            "BoxPush-v0/long_8m",
            _BOX,
            8_388_608,
            64,
            "python -m baselines.compare --env BoxPush-v0 --algos shac_exact --seeds 0 1 2 \\\n"
            "    --steps 8388608 --evals 64 --out baselines/results/BoxPush-v0/long_8m\n"
            "python -m baselines.box_push_endings --out baselines/results/BoxPush-v0/long_8m --steps 8388608",
        ),
        Comparison(
            "BoxPush-v0/finals",
            _BOX,
            2_097_152,
            32,
            _loop(
                _BOX,
                "sb3_ppo brax_ppo shac_exact shac_bcg",
                "0 1 2 3 4",
                2_097_152,
                32,
                "BoxPush-v0/finals",
                _CFG + "finals/BoxPush-v0.$algo.json",
            ),
            _CFG + "finals/BoxPush-v0.{algo}.json",
        ),
        Comparison(
            "BoxPush-v0/same_setting",
            _BOX,
            2_097_152,
            32,
            _loop(
                _BOX,
                "shac_exact",
                "0 1 2 3 4",
                2_097_152,
                32,
                "BoxPush-v0/same_setting",
                _CFG + "BoxPush-v0.same_setting.json",
            ),
            _CFG + "BoxPush-v0.same_setting.json",
        ),
        Comparison(
            "PlanarHand-v0/finals",
            "PlanarHand-v0",
            2_097_152,
            32,
            _loop(
                "PlanarHand-v0",
                "sb3_ppo brax_ppo shac_exact shac_bcg",
                "0 1 2 3 4",
                2_097_152,
                32,
                "PlanarHand-v0/finals",
                _CFG + "finals/PlanarHand-v0.$algo.json",
            ),
            _CFG + "finals/PlanarHand-v0.{algo}.json",
        ),
        Comparison(
            "PlanarHand-v0/long",
            "PlanarHand-v0",
            1_048_576,
            16,
            "O=baselines/results/PlanarHand-v0/long\n"
            "python -m baselines.compare --env PlanarHand-v0 --algos sb3_ppo --seeds 0 1 2 --steps 2097152 "
            "--evals 32 --out $O\n"
            "for algo in shac_exact shac_bcg; do\n"
            "  python -m baselines.compare --env PlanarHand-v0 --algos $algo --seeds 0 1 2 --steps 1048576 "
            "--evals 16 --out $O\ndone",
        ),
        _box_131k("stiff_2ms", "shac_exact shac_bcg sb3_ppo", "0 1 2"),
        _box_131k("penalty_k300", "shac_exact shac_bcg sb3_ppo", "0 1 2"),
        _box_131k("penalty_k300_h64", "shac_exact shac_bcg", "0 1 2 3 4"),
        _box_131k("penalty_k30000", "shac_exact shac_bcg sb3_ppo", "0 1 2"),
        _box_131k("penalty_k30000_h64", "shac_exact shac_bcg", "0 1 2"),
        _box_moreau(300),
        _box_moreau(50),
        Comparison(
            "G1Jump-v0/cpu_budget",
            "G1Jump-v0",
            262_144,
            8,
            "C=baselines/configs/G1Jump-v0.gpu.json O=baselines/results/G1Jump-v0/cpu_budget\n"
            "for algo in sb3_ppo shac_bcg shac_exact; do\n"
            "  python -m baselines.compare --env G1Jump-v0 --config $C --algos $algo --seeds 0 --steps 262144 "
            "--evals 8 --out $O\ndone\n"
            "python -m baselines.compare --env G1Jump-v0 --config $C --algos sb3_ppo --seeds 1 2 --steps 262144 "
            "--evals 8 --out $O\n"
            "python -m baselines.compare --env G1Jump-v0 --config $C --algos shac_exact --seeds 1 2 --steps 262144 "
            "--evals 8 --out $O\n"
            "python -m baselines.compare --env G1Jump-v0 --config $C --algos shac_bcg --seeds 1 --steps 262144 "
            "--evals 8 --out $O",
            _CFG + "G1Jump-v0.gpu.json",
        ),
        Comparison(
            "G1Jump-v0/tuned",
            "G1Jump-v0",
            262_144,
            8,
            "C=baselines/configs/G1Jump-v0.tuned.json O=baselines/results/G1Jump-v0/tuned\n"
            "python -m baselines.compare --env G1Jump-v0 --config $C --algos sb3_ppo --seeds 0 1 2 --steps 262144 "
            "--evals 8 --out $O\n"
            "python -m baselines.compare --env G1Jump-v0 --config $C --algos shac_exact --seeds 0 1 2 --steps 262144 "
            "--evals 8 --out $O\n"
            "python -m baselines.final_scores --env G1Jump-v0 --config $C --steps 262144 --out $O",
            _CFG + "G1Jump-v0.tuned.json",
        ),
        Comparison(
            "G1Jump-v0/zero_start",
            "G1Jump-v0",
            262_144,
            8,
            "O=baselines/results/G1Jump-v0/zero_start\n"
            "cp baselines/results/G1Jump-v0/tuned/sb3_ppo_seed*.csv $O/   # SB3 PPO's config is tuned/'s\n"
            "python -m baselines.compare --env G1Jump-v0 --config baselines/configs/G1Jump-v0.zero_start.json \\\n"
            "    --algos shac_exact --seeds 0 1 2 --steps 262144 --evals 8 --out $O\n"
            "python -m baselines.final_scores --env G1Jump-v0 --config baselines/configs/G1Jump-v0.zero_start.json \\\n"
            "    --steps 262144 --out $O",
            _CFG + "G1Jump-v0.zero_start.json",
        ),
        _g1_moreau(300),
        _g1_moreau(50),
        _g1_moreau(300, mjx_implicitfast=True),
        _g1_moreau(50, mjx_implicitfast=True),
        Comparison(
            "BoxPush-v0/probe_131k",
            _BOX,
            131_072,
            8,
            _loop(_BOX, "shac_bcg sb3_ppo", "0", 131_072, 8, "BoxPush-v0/probe_131k"),
        ),
        Comparison(
            "PlanarHand-v0/probe_131k",
            "PlanarHand-v0",
            131_072,
            16,
            _loop("PlanarHand-v0", "sb3_ppo shac_exact shac_bcg", "0", 131_072, 16, "PlanarHand-v0/probe_131k"),
        ),
    )
}

#: Tuning directories: (command, grid file, algorithms, seed).
TUNING = {
    "G1Jump-v0/tuning": (
        "python -m baselines.tune --env G1Jump-v0 --algos sb3_ppo shac_exact --steps 262144 --evals 8 \\\n"
        "    --config baselines/configs/G1Jump-v0.gpu.json \\\n"
        "    --grids baselines/configs/tuning/G1Jump-v0.json --out baselines/results/G1Jump-v0/tuning",
        _CFG + "tuning/G1Jump-v0.json",
        ("sb3_ppo", "shac_exact"),
        0,
    ),
    **{
        f"{env}/grid": (
            f"python -m baselines.tune --env {env} --grids baselines/configs/tuning/equal_effort.json \\\n"
            f"    --algos sb3_ppo shac_exact brax_ppo shac_bcg --out baselines/results/{env}/grid",
            _CFG + "tuning/equal_effort.json",
            ("sb3_ppo", "shac_exact", "brax_ppo", "shac_bcg"),
            0,
        )
        for env in ("BoxPush-v0", "PlanarHand-v0")
    },
}


def _sweeps(env: str, lines: Sequence[str]) -> str:
    return "\n".join(f"python -m baselines.gradient_variance --env {env} {line}".rstrip() for line in lines)


#: The commands of the other results on the page.
#: The decomposition sweep under the authors' contact model, in the order it runs.
_DECOMPOSITION_OPTIONS = (
    "midpoint=False",
    "contact_margin=0.005",
    "friction=regularized",
    "prox_iterations=3",
    "prox_iterations=50",
    "implicit_damping=False",
    "step_cap=False",
)
#: The same sweep's penalty-model variants: the Baumgarte term at 0, 1/4 and 1/2 of its
#: default (the pusher-box contact is frictionless, so the penalty model's friction settings
#: are inert on BoxPush).
_PENALTY_OPTIONS = ("baumgarte=0", "baumgarte=0.05", "baumgarte=0.1")
_DECOMPOSITION = "--horizons 1 8 32 64 --out baselines/results/BoxPush-v0/moreau_decomposition"
_GV_BOX = "python -m baselines.gradient_variance --env BoxPush-v0"

COMMANDS = {
    "decomposition:BoxPush-v0": (
        f"{_GV_BOX} --contact-model moreau --estimators exact bcg bundle \\\n    {_DECOMPOSITION}\n"
        f"for option in {' '.join(_DECOMPOSITION_OPTIONS)}; do\n"
        f"  {_GV_BOX} --contact-model moreau --levels moreau=300 --estimators exact \\\n"
        f"      {_DECOMPOSITION} --contact-options $option\ndone\n"
        f"{_GV_BOX} --contact-model moreau --levels moreau=300 --estimators exact \\\n"
        f"    {_DECOMPOSITION} --physics-dt 0.002\n"
        f"{_GV_BOX} --contact-model moreau --levels moreau=300 --estimators exact bcg \\\n"
        f"    {_DECOMPOSITION} --starts-policy assets/policies/BoxPush-v0.shac_exact.npz\n"
        f"{_GV_BOX} --contact-model penalty --levels penalty=300 --estimators exact \\\n"
        f"    {_DECOMPOSITION} --starts-policy assets/policies/BoxPush-v0.shac_exact.npz\n"
        f"{_GV_BOX} --contact-model penalty --levels penalty=300 --estimators exact \\\n"
        f"    {_DECOMPOSITION}\n"
        f"for option in {' '.join(_PENALTY_OPTIONS)}; do\n"
        f"  {_GV_BOX} --contact-model penalty --levels penalty=300 --estimators exact \\\n"
        f"      {_DECOMPOSITION} --contact-options $option\ndone\n"
        f"{_GV_BOX} --contact-model penalty --levels penalty=50 penalty=3000 penalty=30000 \\\n"
        f"    --estimators exact {_DECOMPOSITION} --contact-options baumgarte=0"
    ),
    "contact_events": "python -m baselines.contact_events",
    "contact_events_penalty": "for kappa in 50 100 300 500; do\n  python -m baselines.contact_events --env PlanarHand-v0 "
    "BoxPush-v0 --contact-model penalty --kappa $kappa\ndone",
    "contact_events_moreau": (
        "python -m baselines.contact_events --env BoxPush-v0 PlanarHand-v0 G1Jump-v0 --contact-model moreau --kappa 300\n"
        "python -m baselines.contact_events --env G1Jump-v0 --contact-model moreau --kappa 300 \\\n"
        "    --policy assets/policies/G1Jump-v0.shac_exact.npz\n"
        "python -m baselines.contact_events --env G1Jump-v0 --contact-model moreau --kappa 50"
    ),
    "friction": "python -m baselines.friction_switches",
    "gradient:BoxPush-v0": _sweeps(
        "BoxPush-v0",
        (
            "--contact-model penalty",
            "--contact-model penalty --levels 3000 30000 --estimators exact bcg",
            "--contact-model mujoco --levels 0.05 0.02 0.008",
            "--contact-model mujoco --levels 0.004 0.002",
        ),
    ),
    "gradient:PlanarHand-v0": _sweeps(
        "PlanarHand-v0",
        (
            "--contact-model penalty",
            "--contact-model penalty --levels 3000 30000 --estimators exact bcg",
            "--contact-model mujoco",
        ),
    ),
    "gradient:G1Jump-v0": _sweeps(
        "G1Jump-v0",
        (
            "--contact-model penalty --estimators exact bcg",
            "--contact-model penalty --levels 3000 30000 --estimators exact bcg",
            "--contact-model mujoco --estimators exact bcg",
        ),
    ),
    "decomposition:PlanarHand-v0": _sweeps(
        "PlanarHand-v0",
        tuple(
            f"{line} --horizons 1 8 32 64 --out baselines/results/PlanarHand-v0/moreau_decomposition"
            for line in (
                "--contact-model moreau --estimators exact",
                "--contact-model moreau --levels moreau=300 --estimators exact --contact-options friction=regularized",
                "--contact-model moreau --levels moreau=300 --estimators exact --contact-options contact_margin=0.01",
                "--contact-model penalty --levels penalty=300 --estimators exact",
                "--contact-model penalty --levels penalty=300 --estimators exact --contact-options baumgarte=0",
                "--contact-model penalty --levels penalty=300 --estimators exact --contact-options slip_velocity=0.01",
                "--contact-model penalty --levels penalty=300 --estimators exact --contact-options slip_velocity=0.1",
                "--contact-model penalty --levels penalty=300 --estimators exact "
                "--contact-options baumgarte=0 slip_velocity=0.1",
                "--contact-model penalty --levels penalty=50 penalty=3000 penalty=30000 --estimators exact "
                "--contact-options slip_velocity=0.1",
            )
        ),
    ),
    "gradient:G1Jump-v0/moreau": _sweeps(
        "G1Jump-v0",
        (
            "--contact-model moreau --levels moreau=300 moreau=50 --estimators exact "
            "--out baselines/results/G1Jump-v0/moreau",
            "--contact-model moreau --levels moreau=100 moreau=1000 moreau=3000 --estimators exact "
            "--out baselines/results/G1Jump-v0/moreau",
            "--contact-model moreau --levels moreau=300 --estimators bcg --out baselines/results/G1Jump-v0/moreau",
            "--contact-model moreau --levels moreau=300 --estimators exact --out baselines/results/G1Jump-v0/moreau "
            "--starts-policy assets/policies/G1Jump-v0.shac_exact.npz",
            "--contact-model moreau --levels moreau=300 --estimators bcg --out baselines/results/G1Jump-v0/moreau "
            "--starts-policy assets/policies/G1Jump-v0.shac_exact.npz",
        ),
    ),
    "references": "python -m baselines.report --references",
}
