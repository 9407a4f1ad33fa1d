"""Training-progress sinks: ``log_dir/progress.csv`` and TensorBoard events.

``ProgressLog(log_dir, fields)`` is called like a ``progress_fn``:
``log(num_steps, row)`` appends ``row`` to the CSV (columns ``fields``, other keys
ignored, missing ones left empty) and writes its finite numeric values, except
``num_steps``, as TensorBoard scalars at step ``num_steps`` (tensorboardX, optional: a
warning if it is not installed). ``train(log_dir=...)`` builds one and calls it every
iteration.
"""

from __future__ import annotations

import csv
import logging
import math
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence, Union

logger = logging.getLogger(__name__)


class ProgressLog:
    """CSV (``log_dir/progress.csv``) and TensorBoard (tensorboardX) sink of metric rows.

    Args:
      log_dir: folder to write to (created).
      fields: the CSV columns; ``None`` takes the first row's keys.
      append: continue an existing non-empty ``progress.csv`` (its header wins) instead
        of overwriting it; a resumed run appends.
    """

    def __init__(self, log_dir: Union[str, Path], fields: Optional[Sequence[str]] = None, *, append: bool = False):
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.log_dir / "progress.csv"
        self._append = append
        self._csv_file = None
        self._writer: Optional[csv.DictWriter] = None
        self._tb = None
        if fields is not None:
            self._open_csv(list(fields))
        try:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(self.log_dir))
        except ImportError:  # pragma: no cover - tensorboardX is optional
            logger.warning("tensorboardX is not installed; TensorBoard logging disabled")

    def _open_csv(self, fields: List[str]) -> None:
        path = self.path
        if self._append and path.exists() and path.stat().st_size:
            with path.open() as f:
                fields = next(csv.reader(f), fields)
            self._csv_file = path.open("a", newline="")
            self._writer = csv.DictWriter(self._csv_file, fields, extrasaction="ignore")
        else:
            self._csv_file = path.open("w", newline="")
            self._writer = csv.DictWriter(self._csv_file, fields, extrasaction="ignore")
            self._writer.writeheader()

    def __call__(self, num_steps: int, row: Mapping[str, Any]) -> None:
        """Write ``row`` (the metrics after ``num_steps`` env steps) to both sinks."""
        if self._writer is None:
            self._open_csv(list(row))
        self._writer.writerow(row)
        self._csv_file.flush()
        if self._tb is not None:
            for k, v in row.items():
                if k != "num_steps" and isinstance(v, (int, float)) and math.isfinite(v):
                    self._tb.add_scalar(k, v, num_steps)

    def close(self) -> None:
        """Close the CSV file and the TensorBoard writer."""
        if self._csv_file is not None:
            self._csv_file.close()
        if self._tb is not None:
            self._tb.close()

    def __enter__(self) -> "ProgressLog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
