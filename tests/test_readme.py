"""The README's front door holds: its Python snippets run, it stays short, and the relative
links of README.md and docs/*.md point to files (and headings) that exist in the repository.

The snippet test is in the integration tier (``-m integration``): each snippet's first
``grad_step`` or ``jax.grad`` is an XLA compile of about a minute. The length and link
checks are cheap and run in the default tier.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Markdown files whose relative links are checked.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
#: The README is a five-minute read.
MAX_README_LINES = 200
#: Seconds one snippet may take (compiles included; the snippets take 1-2 min on 2 cores).
SNIPPET_TIMEOUT_S = 600

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def python_blocks(text: str) -> List[str]:
    """The bodies of the ```python fenced blocks of a Markdown text, in order."""
    return _FENCE.findall(text)


def relative_links(text: str) -> List[str]:
    """Link targets of a Markdown text, outside code, that are neither URLs nor same-page
    anchors."""
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```[ \t]*$", "", text, flags=re.S | re.M))
    return [t for t in _LINK.findall(prose) if not re.match(r"^(?:[a-z][a-z0-9+.-]*:|#)", t)]


def heading_anchors(text: str) -> set:
    """GitHub's anchors of a Markdown text's headings: lower case, punctuation dropped,
    spaces turned into hyphens (code blocks skipped)."""
    anchors = set()
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"^#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def broken_links(page: Path) -> List[Tuple[str, str]]:
    """``(link, reason)`` for every relative link of ``page`` that does not resolve to a
    file inside the repository (or names a heading its target lacks)."""
    bad = []
    for link in relative_links(page.read_text()):
        path_part, _, anchor = link.partition("#")
        target = (page.parent / path_part).resolve()
        if ROOT not in target.parents and target != ROOT:
            bad.append((link, "points outside the repository"))
        elif not target.exists():
            bad.append((link, "no such file"))
        elif anchor and target.suffix == ".md" and anchor not in heading_anchors(target.read_text()):
            bad.append((link, f"no heading #{anchor} in {target.relative_to(ROOT)}"))
    return bad


def test_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES}); move detail to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    assert broken_links(page) == []


def test_readme_has_snippets():
    assert python_blocks(README.read_text()), "README.md lost its quickstart (no ```python block)"


@pytest.mark.integration
@pytest.mark.parametrize("index", range(len(python_blocks(README.read_text()))), ids=lambda i: f"block{i}")
def test_readme_snippet_runs(index, tmp_path):
    """Each ```python block of README.md runs on its own in a fresh interpreter."""
    code = python_blocks(README.read_text())[index]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=SNIPPET_TIMEOUT_S
    )
    assert result.returncode == 0, f"README block {index} failed:\n{code}\n--- stderr ---\n{result.stderr[-4000:]}"
