"""Whether a run's wall-clock is a timing: its own CPU time and other processes' CPU time
on the CPUs it may run on, over training with evaluation left out.

On a shared machine wall-clock measures the machine as much as the learner. A run records
its own CPU seconds (``time.process_time``, all threads) and the CPU seconds every other
process spent on its CPUs (Linux ``/proc/stat`` minus its own); a wall-clock counts as a
timing only where others took at most ``ALONE`` of those CPUs (``ran_alone``), e.g. runs
pinned one per core with ``taskset -c N`` and nothing else on their cores, and only for a
run that was never resumed (``resumes``): a resumed run's clocks include another start-up.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

#: A run's wall-clock is a timing only when other processes took at most this share of the
#: CPUs it could run on (``contention``).
ALONE = 0.05
Row = Dict[str, float]


def busy_cpu_seconds(cpus: frozenset) -> float:
    """CPU seconds every process has spent on ``cpus`` since boot (Linux ``/proc/stat``:
    user, nice, system, irq, softirq and steal ticks); nan where it cannot be read."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return float("nan")
    ticks = 0
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
            ticks += user + nice + system + irq + softirq + steal
    return ticks / hz


class CpuMeter:
    """Training-time clocks of one run, with evaluation left out: wall-clock, this process's
    CPU time (all threads), and the CPU time other processes spent on the CPUs this process
    may run on (``os.sched_getaffinity``). ``pause()`` before an evaluation, ``resume()``
    after it; ``totals()`` is ``(wall, own CPU, others' CPU)`` in seconds so far."""

    def __init__(self) -> None:
        self.cpus = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
        self._totals = np.zeros(3)
        self._mark: Optional[np.ndarray] = None
        self.resume()

    def _now(self) -> np.ndarray:
        return np.array([time.perf_counter(), time.process_time(), busy_cpu_seconds(self.cpus)])

    def resume(self) -> None:
        self._mark = self._now()

    def pause(self) -> None:
        if self._mark is not None:
            self._totals += self._now() - self._mark
            self._mark = None

    def totals(self) -> Tuple[float, float, float]:
        wall, own, busy = self._totals + (self._now() - self._mark if self._mark is not None else 0.0)
        return float(wall), float(own), max(float(busy - own), 0.0)


def contention(row: Row) -> float:
    """Share of the run's CPUs that other processes used while it trained, at ``row``
    (nan for CSVs written before it was measured)."""
    capacity = float(row["wall_clock"]) * float(row.get("cpus", float("nan")))
    return float(row.get("others_cpu_time", float("nan"))) / capacity if capacity > 0 else float("nan")


def ran_alone(seeds: List[List[Row]]) -> bool:
    """Whether every run's wall-clock is a timing: at most ``ALONE`` of its CPUs taken by
    other processes (``contention``) over the whole run, and never resumed where the CSV
    counts resumes (``resumes``; a CSV from before the count is judged by contention alone).
    A resumed run's wall-clock and CPU time count the new process's start-up and compiles
    again, and its ``cpus`` is the last process's while ``others_cpu_time`` sums over all
    of them, so its contention is not comparable."""
    return all(contention(rows[-1]) <= ALONE and not resumed(rows[-1]) for rows in seeds)


def resumed(row: Row) -> bool:
    """Whether the run had been resumed by ``row`` (False where its CSV predates the count)."""
    return float(row.get("resumes", float("nan"))) > 0
