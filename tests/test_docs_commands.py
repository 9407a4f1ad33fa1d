"""Every command the documentation shows still parses, and the files it reads exist.

Each ```bash block of README.md, docs/*.md and the results page is expanded by bash itself
(loops, variables and line continuations, as a reader's shell would), with ``python`` and
``bcg-envs`` replaced by functions that record their arguments. Each recorded
``python -m MODULE ARGS`` and ``bcg-envs ARGS`` is handed to that module's ``main``, which
stops as soon as its argument parser has accepted them: nothing is trained or written.
Every ``--env`` names a registered environment.
A renamed flag, a removed choice or a moved config file fails here instead of in a reader's
shell.
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
from pathlib import Path
from typing import List, Tuple

import pytest

import bcg_envs

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "baselines" / "results" / "README.md"]

_FENCE = re.compile(r"^```(?:bash|sh|shell)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_UNIT, _RECORD = "\x1f", "\x1e"
#: Shell functions standing in for the commands of a block: the two entry points record
#: their arguments; the rest keep the command they wrap (``taskset``, ``nice``) or do nothing.
_STANDINS = f"""
python() {{ printf '%s{_UNIT}' python "$@"; printf '{_RECORD}'; }}
bcg-envs() {{ printf '%s{_UNIT}' bcg-envs "$@"; printf '{_RECORD}'; }}
bash() {{ printf '%s{_UNIT}' bash "$@"; printf '{_RECORD}'; }}
taskset() {{ shift 2; "$@"; }}
nice() {{ if [ "$1" = -n ]; then shift 2; fi; "$@"; }}
cd() {{ :; }}
cp() {{ :; }}
git() {{ :; }}
pip() {{ :; }}
source() {{ :; }}
"""
#: Flags whose value is a file the command reads (written ones, such as ``--out``, are not).
#: Only paths inside the repository's folders are checked: ``--config shac.json`` in a
#: usage example is the reader's own file.
_INPUT_FLAGS = {"--config", "--grids", "--references"}


class _Parsed(Exception):
    """Raised by the patched parser once it has accepted the arguments."""


def documented_commands(page: Path) -> List[List[str]]:
    """The argument vectors of the commands in ``page``'s shell blocks, after bash expands them."""
    commands = []
    for block in _FENCE.findall(page.read_text()):
        # ". .venv/bin/activate" cannot be shadowed by a function.
        block = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith(". "))
        out = subprocess.run(["bash", "-c", _STANDINS + block], capture_output=True, text=True, check=False)
        assert out.returncode == 0 and not out.stderr, f"{page.name}: bash could not expand\n{block}\n{out.stderr}"
        commands += [rec.split(_UNIT)[:-1] for rec in out.stdout.split(_RECORD) if rec]
    return commands


def command_problem(argv: List[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """Why ``argv`` would fail before doing any work ("" if it parses and its inputs exist)."""
    inputs = [v for flag, v in zip(argv, argv[1:]) if flag in _INPUT_FLAGS and "/" in v]
    missing = [v for v in inputs if (ROOT / v.split("/")[0]).is_dir() and not (ROOT / v).exists()]
    if missing:
        return f"reads a file that does not exist: {missing}"
    unknown = [v for flag, v in zip(argv, argv[1:]) if flag == "--env" and f"bcg_envs/{v}" not in bcg_envs.list_envs()]
    if unknown:
        return f"names an environment that is not registered: {unknown}"
    if argv[0] == "bash":
        return "" if (ROOT / argv[1]).exists() else f"no script {argv[1]}"
    if argv[0] == "bcg-envs":
        module, args = "bcg_envs.cli", argv[1:]
    elif argv[1:2] == ["-m"]:
        module, args = argv[2], argv[3:]
    elif argv[1:2] == ["-c"]:
        return ""
    else:
        return "" if (ROOT / argv[1]).exists() else f"no script {argv[1]}"
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        parse(self, args, namespace)
        raise _Parsed

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
        try:
            importlib.import_module(module).main(args)
        except _Parsed:
            return ""
        except SystemExit as err:
            return f"its parser refused the arguments (exit {err.code})"
    return "its main returned without parsing arguments"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_commands_parse(page, monkeypatch, capsys):
    problems: List[Tuple[str, str]] = []
    for argv in documented_commands(page):
        problem = command_problem(argv, monkeypatch)
        if problem:
            problems.append((" ".join(argv), problem + "\n" + capsys.readouterr().err[-500:]))
    assert problems == []


def test_a_renamed_flag_is_caught(monkeypatch, capsys):
    good = ["python", "-m", "baselines.compare", "--env", "BoxPush-v0", "--algos", "shac_bcg"]
    assert command_problem(good, monkeypatch) == ""
    assert "refused" in command_problem(good + ["--no-such-flag"], monkeypatch)
    assert "does not exist" in command_problem(good + ["--config", "baselines/configs/nope.json"], monkeypatch)
    assert "not registered" in command_problem([*good[:4], "BoxPush-v9"], monkeypatch)


def test_the_pages_show_commands():
    """The check reads what it is meant to read: the reproduction docs and the results page
    list dozens of commands."""
    assert len(documented_commands(ROOT / "baselines" / "results" / "README.md")) > 50
    assert len(documented_commands(ROOT / "docs" / "reproducing.md")) > 10
