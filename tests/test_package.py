"""The package imports quietly and exposes its public names."""

import subprocess
import sys


def test_import_prints_nothing():
    """MJX's "Failed to import warp" line (no GPU backend on CPU installs) stays hidden."""
    out = subprocess.run([sys.executable, "-c", "import bcg_envs"], capture_output=True, text=True, check=True)
    assert out.stdout == ""
    assert "warp" not in out.stderr


def test_public_names():
    import bcg_envs

    assert {"BundleConfig", "ESTIMATORS", "list_envs", "make_jax"} <= set(bcg_envs.__all__)
    assert len(bcg_envs.list_envs()) == 6


def test_wheel_installs_and_makes_every_env(tmp_path):
    """A wheel (not an editable install) carries the models and clips and no top-level
    ``baselines``: installed into a bare folder and imported from outside the repository,
    it makes every id (and G1Jump on the MuJoCo C backend, which loads the clips too). Dependencies come from this environment."""
    import shutil
    import zipfile
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    source, wheels, site = tmp_path / "source", tmp_path / "wheels", tmp_path / "site"
    # a copy of what the build reads, so that the build leaves nothing in the repository
    shutil.copytree(repo / "bcg_envs", source / "bcg_envs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(repo / "assets", source / "assets", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, source / name)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run(
        pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("bcg_envs-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"bcg_envs"}
    assert not any(n.startswith("baselines/") for n in names)
    for asset in (
        "box_push/box_push.xml",
        "planar_hand/planar_hand.xml",
        "g1/g1.xml",
        "motions/g1_jump.csv",
        "policies/G1Jump-v0.npz",
        "policies/BoxPush-v0.shac_exact.npz",
    ):
        assert f"bcg_envs/assets/{asset}" in names
    subprocess.run(pip + ["install", "--no-deps", "--target", str(site), str(wheel)], check=True, capture_output=True)
    code = (
        "import gymnasium as gym, bcg_envs, pathlib, sys\n"
        f"assert pathlib.Path(bcg_envs.__file__).is_relative_to({str(site)!r}), bcg_envs.__file__\n"
        "for i in bcg_envs.list_envs():\n"
        "    gym.make(i).close()\n"
        "gym.make('bcg_envs/G1Jump-v0', backend='mujoco').close()\n"
        "try:\n    import baselines\nexcept ImportError:\n    pass\nelse:\n    sys.exit('baselines importable')\n"
        "print('made', len(bcg_envs.list_envs()))\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env={**env, "PYTHONPATH": str(site)}
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "made 6" in out.stdout


def test_the_package_list_names_every_package():
    """pyproject.toml lists the packages by hand (it maps the top-level assets/ into the
    wheel as bcg_envs.assets): the list must name every package folder and every asset
    folder (an unlisted importable folder makes setuptools warn at install)."""
    from pathlib import Path

    import tomllib
    from setuptools import find_packages

    repo = Path(__file__).resolve().parents[1]
    listed = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assets = {
        f"bcg_envs.assets.{p.name}" for p in (repo / "assets").iterdir() if p.is_dir() and p.name != "__pycache__"
    }
    found = set(find_packages(str(repo), include=["bcg_envs*"])) | {"bcg_envs.assets"} | assets
    assert set(listed) == found
