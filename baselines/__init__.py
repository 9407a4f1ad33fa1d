"""Experiments run from the repository root (``python -m baselines.<script>``); not installed."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterable, Sequence


def write_csv(path: Path, fields: Sequence[str], rows: Iterable[dict]) -> None:
    """Write ``rows`` to a new CSV at ``path`` with ``fields`` as its header (replacing it)."""
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, list(fields))
        writer.writeheader()
        writer.writerows(rows)


def append_csv(path: Path, fields: Sequence[str], rows: Iterable[dict]) -> None:
    """Append ``rows`` to the CSV at ``path`` (header written when the file is new; an
    existing file must have exactly ``fields`` as its header, else ValueError)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = not path.exists() or path.stat().st_size == 0
    if not fresh:
        with path.open(newline="") as f:
            header = next(csv.reader(f), [])
        if header != list(fields):
            raise ValueError(
                f"{path}: its columns {header} differ from {list(fields)}; move it aside or pick another file"
            )
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, list(fields))
        if fresh:
            writer.writeheader()
        writer.writerows(rows)
