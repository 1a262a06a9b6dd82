"""Online grouping of gap questions by meaning: each new question joins the nearest group whose
centroid is at least `threshold` similar (cosine of unit vectors), or starts a group of its own.

A group's centroid is the normalised mean of its members' vectors, updated as each member joins,
so the cost of a new question is one embedding and one matrix-vector product against the groups:
nothing is recomputed from scratch. The threshold is tuned on the dev split of the planted set
(benchmarks/insights.py) for the default embedder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


@dataclass
class Centroid:
    group_id: str
    vector: Vector  # unit length
    members: int  # gap questions that shaped it
    changed: bool = False


@dataclass
class Grouper:
    """The groups' centroids as one matrix; `place` and `join` keep it current."""

    threshold: float
    centroids: list[Centroid] = field(default_factory=list)
    merge_threshold: float | None = None  # groups this close merge (`meeting`); None: never
    _matrix: Vector | None = None

    def _rows(self) -> Vector:
        if self._matrix is None:
            dim = self.centroids[0].vector.shape[0]
            self._matrix = (
                np.stack([c.vector for c in self.centroids])
                if self.centroids
                else np.zeros((0, dim), np.float32)
            )
        return self._matrix

    def nearest(self, vector: Vector) -> tuple[Centroid | None, float]:
        """The most similar group and the similarity; (None, 0.0) when there is none at all."""
        if not self.centroids:
            return None, 0.0
        sims = self._rows() @ vector
        best = int(np.argmax(sims))
        return self.centroids[best], float(sims[best])

    def place(self, vector: Vector) -> tuple[Centroid | None, float]:
        """The group a question belongs to (None: it is unlike every group)."""
        found, sim = self.nearest(vector)
        return (found, sim) if found is not None and sim >= self.threshold else (None, sim)

    def join(self, group: Centroid, vector: Vector) -> None:
        mean = group.vector * group.members + vector
        norm = float(np.linalg.norm(mean))
        group.vector = (mean / norm).astype(np.float32) if norm else group.vector
        group.members += 1
        group.changed = True
        if self._matrix is not None:
            self._matrix[self.centroids.index(group)] = group.vector

    def start(self, group_id: str, vector: Vector) -> Centroid:
        group = Centroid(group_id, vector.astype(np.float32), 1, changed=True)
        self.centroids.append(group)
        if self._matrix is not None:
            self._matrix = np.vstack([self._matrix, group.vector[None, :]])
        return group

    def meeting(self) -> tuple[Centroid, Centroid] | None:
        """The closest pair of groups, one of them changed since loaded, whose centroids are within
        the merge threshold of each other (None when there is none): only changed groups can have come
        closer, so the cost follows the changes."""
        changed = [i for i, c in enumerate(self.centroids) if c.changed]
        if self.merge_threshold is None or not changed or len(self.centroids) < 2:
            return None
        rows = self._rows()
        sims = rows[changed] @ rows.T
        for row, i in enumerate(changed):
            sims[row, i] = -1.0  # not itself
        best = np.unravel_index(int(np.argmax(sims)), sims.shape)
        if sims[best] < self.merge_threshold:
            return None
        return self.centroids[changed[int(best[0])]], self.centroids[int(best[1])]

    def absorb(self, survivor: Centroid, absorbed: Centroid) -> None:
        """`absorbed`'s members join `survivor` (a weighted mean); `absorbed` is gone."""
        mean = survivor.vector * survivor.members + absorbed.vector * absorbed.members
        norm = float(np.linalg.norm(mean))
        survivor.vector = (mean / norm).astype(np.float32) if norm else survivor.vector
        survivor.members += absorbed.members
        survivor.changed = True
        self.centroids.remove(absorbed)
        self._matrix = None

    def add(self, group_id: str, vector: Vector) -> tuple[Centroid, bool]:
        """Place a gap question: join the nearest group above the threshold or start one.
        Returns the group and whether it is new."""
        found, _ = self.place(vector)
        if found is not None:
            self.join(found, vector)
            return found, False
        return self.start(group_id, vector), True


def cluster(vectors: Sequence[Vector], threshold: float, merge_threshold: float | None = None) -> list[int]:
    """The group of each vector, in order, by the same online rule (for tuning and tests): each
    joins or starts a group, then groups that came within the threshold merge (the larger one,
    else the older, survives), as a refresh does after each batch (here after each question)."""
    grouper = Grouper(threshold, merge_threshold=merge_threshold)
    labels: list[str] = []
    into: dict[str, str] = {}
    for i, vector in enumerate(vectors):
        group, _ = grouper.add(str(i), vector)
        labels.append(group.group_id)
        while (pair := grouper.meeting()) is not None:
            a, b = sorted(pair, key=lambda c: (-c.members, int(c.group_id)))
            grouper.absorb(a, b)
            into[b.group_id] = a.group_id
        for c in grouper.centroids:
            c.changed = False

    def final(gid: str) -> str:
        while gid in into:
            gid = into[gid]
        return gid

    names = {gid: n for n, gid in enumerate(dict.fromkeys(final(g) for g in labels))}
    return [names[final(g)] for g in labels]


def encode(vector: Vector) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def decode(data: bytes) -> Vector:
    return np.frombuffer(bytes(data), dtype="<f4").astype(np.float32)
