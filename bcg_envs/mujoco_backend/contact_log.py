"""The contact log of one control step on MuJoCo C: per contact and per contact event (a
pair of bodies), the normal forces behind ``info["max_contact_force"]``/``"max_contact_rise"``
and the ``bcg`` trigger."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import mujoco
import numpy as np

from bcg_envs.gradients.config import BundleConfig


class ContactLog:
    """Contacts of a control step (``bcg_envs.physics.simulator.ContactReport``'s twin).

    Per contact, the largest normal force over the substeps (MuJoCo's ``mj_contactForce``)
    with its point and geoms (keyed by geom pair and rank within the pair; MJX keys them
    by collision slot); per contact event (a pair of bodies, all their contacts summed),
    the largest force over the substeps, the largest force of one of its contacts
    (``point_events``) and the force at the step's start (``start``).
    """

    __slots__ = ("best", "_buf", "events", "point_events", "_start", "_points", "_body")

    def __init__(self, points: bool = True, body: Optional[Sequence[int]] = None, buf: Optional[np.ndarray] = None):
        """``points=False`` skips ``best`` (the contact points that only the bundle samplers
        read); ``body``: the model's ``geom_bodyid`` as a list and ``buf`` a (6,) float64
        scratch, both optional (the single-env step passes its own to save ~1 us each)."""
        self.best: Dict[tuple, list] = {}
        self._buf = np.zeros(6) if buf is None else buf
        self.events: Dict[tuple, float] = {}
        self._start: Dict[tuple, float] = {}
        self.point_events: Dict[tuple, float] = {}
        self._points = points
        self._body = body

    def _forces(self, m: mujoco.MjModel, d: mujoco.MjData):
        """(contact index, normal force, geom pair, body pair) of every active contact."""
        con = d.contact
        address, geoms = con.efc_address.tolist(), con.geom.tolist()
        body = m.geom_bodyid.tolist() if self._body is None else self._body
        buf, force = self._buf, mujoco.mj_contactForce
        out = []
        for i in range(d.ncon):
            if address[i] < 0:
                continue
            force(m, d, i, buf)
            g1, g2 = geoms[i]
            b1, b2 = body[g1], body[g2]
            out.append((i, buf.item(0), (g1, g2), (b1, b2) if b1 <= b2 else (b2, b1)))
        return out

    @staticmethod
    def _sums(forces) -> Dict[tuple, float]:
        sums: Dict[tuple, float] = {}
        for _, force, _, bodies in forces:
            sums[bodies] = sums.get(bodies, 0.0) + force
        return sums

    def start(self, m: mujoco.MjModel, d: mujoco.MjData) -> None:
        """Event forces at the step's start (``d`` holds the previous step's last substep)."""
        self._start = self._sums(self._forces(m, d)) if d.ncon else {}

    def record(self, m: mujoco.MjModel, d: mujoco.MjData) -> None:
        if not d.ncon:
            return
        forces = self._forces(m, d)
        if self._points:
            pos = d.contact.pos
            seen: Dict[tuple, int] = {}
            for i, force, pair, bodies in forces:
                rank = seen.get(pair, 0)
                seen[pair] = rank + 1
                key = pair + (rank,)
                old = self.best.get(key)
                if old is None or force > old[0]:
                    self.best[key] = [force, pos[i].copy(), pair, bodies]
        sums: Dict[tuple, float] = {}
        points = self.point_events
        for _, force, _, bodies in forces:
            sums[bodies] = sums.get(bodies, 0.0) + force
            if force > points.get(bodies, 0.0):
                points[bodies] = force
        events = self.events
        for bodies, total in sums.items():
            events[bodies] = max(events.get(bodies, 0.0), total)

    @property
    def max_force(self) -> float:
        """Largest contact-event force of the step, N."""
        return max(self.events.values(), default=0.0)

    @property
    def max_point_force(self) -> float:
        """Largest force of a single contact in the step, N."""
        return max(self.point_events.values(), default=0.0)

    def rises(self) -> Dict[tuple, float]:
        """Per event, its largest force minus its force at the step's start, N."""
        return {b: f - self._start.get(b, 0.0) for b, f in self.events.items()}

    @property
    def max_rise(self) -> float:
        """Largest rise of a contact event's force within the step, N (0 if none rose)."""
        if not self.events:
            return 0.0
        return max([0.0, *self.rises().values()])

    def pressing(self, cfg: BundleConfig) -> set:
        """Body pairs whose event fires the ``bcg`` trigger (``BundleConfig.trigger``)."""
        if not self.events:
            return set()
        if cfg.trigger == "onset":
            measure = self.rises()
        else:
            measure = self.events if cfg.trigger == "force" else self.point_events
        return {b for b, f in measure.items() if f > cfg.force_threshold}
