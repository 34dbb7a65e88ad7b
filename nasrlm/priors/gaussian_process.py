"""Gaussian-process regression on a few hundred rows, numpy throughout: one of the models a
:class:`~nasrlm.priors.feature_prior.FeaturePrior` fits per objective (``kind="gp"``, or as ``"auto"``
chooses)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nasrlm.numerics import kernel_independent

#: The Gaussian process's grid: length scales (in units of the root of the input count), weights of its
#: linear kernel, and noise variances (in normal scores, whose variance is 1).
GP_LENGTHS = (0.25, 0.5, 1.0, 2.0, 4.0)
GP_LINEAR = (0.0, 0.3, 1.0)
GP_NOISES = (0.01, 0.03, 0.1, 0.3, 1.0)
#: The most rows a Gaussian process is fitted on (a random subset of more).
GP_MAX_ROWS = 2000


def _kernel(squared: np.ndarray, dot: np.ndarray, length: float, linear: float) -> np.ndarray:
    """The Gaussian process's kernel (without its noise) from squared distances and inner products of
    standardised inputs, both divided by the input count."""
    return np.exp(-squared / (2 * length**2)) + linear * dot


@dataclass(frozen=True)
class GaussianProcess:
    """Gaussian-process regression of normal scores on standardised inputs: a squared-exponential kernel
    (unit variance, one length scale for every input) plus a linear kernel plus noise, the three chosen
    on a grid by exact leave-one-out error. The linear part carries predictions past the trials, as a
    trend forest's line does; the posterior's standard deviation (:meth:`std`) says how far each
    architecture lies from the trials, in the same normal scores.
    """

    centre: np.ndarray  # (f,) the training inputs' means
    scale: np.ndarray  # (f,) their standard deviations (1 for a constant input)
    train: np.ndarray  # (n, f) the standardised training inputs
    weights: np.ndarray  # (n,) K⁻¹ (z - mean)
    inverse: np.ndarray  # (n, n) K⁻¹, for the posterior variance
    mean: float
    length: float  # in units of the root of the input count: d² / (2 length² f)
    linear: float  # the linear kernel's weight, x·x' / f
    noise: float

    #: The fields kept as arrays beside the JSON (:meth:`arrays`).
    MATRICES = ("centre", "scale", "train", "weights", "inverse")

    @classmethod
    def fit(cls, x: np.ndarray, z: np.ndarray) -> tuple[GaussianProcess, np.ndarray]:
        """From inputs ``x`` and normal scores ``z``: the process and its leave-one-out predictions.

        One eigendecomposition per kernel of the grid; each noise then costs O(n²), so a thousand rows
        fit in seconds."""
        centre, scale = x.mean(axis=0), x.std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        u = (x - centre) / scale
        f, mean = u.shape[1], float(z.mean())
        raw = u @ u.T
        norms = np.diag(raw)
        squared, dot = np.maximum(norms[:, None] + norms[None, :] - 2 * raw, 0.0) / f, raw / f
        best = None
        for length in GP_LENGTHS:
            for linear in GP_LINEAR:
                values, vectors = np.linalg.eigh(_kernel(squared, dot, length, linear))
                projected = vectors.T @ (z - mean)
                for noise in GP_NOISES:
                    inverted = 1.0 / np.maximum(values + noise, 1e-9)
                    weights = vectors @ (inverted * projected)  # K⁻¹ (z - mean)
                    diagonal = (vectors**2) @ inverted  # the diagonal of K⁻¹
                    held_out = z - weights / diagonal
                    error = float(kernel_independent(np.mean((z - held_out) ** 2)))  # as a ridge's
                    if best is None or error < best[0]:
                        best = (error, float(length), float(linear), float(noise), weights, held_out,
                                vectors, inverted)
        _, length, linear, noise, weights, held_out, vectors, inverted = best
        inverse = (vectors * inverted) @ vectors.T
        return cls(centre, scale, u, weights, inverse, mean, length, linear, noise), held_out

    @classmethod
    def fit_rows(cls, x: np.ndarray, z: np.ndarray, seed: int) -> tuple[GaussianProcess, np.ndarray]:
        """:meth:`fit` on at most :data:`GP_MAX_ROWS` rows (a seeded random subset of more): their
        leave-one-out predictions, and the process's plain predictions of the rows left out, which it
        never saw either. The fit's cost grows with the cube of its rows."""
        if len(z) <= GP_MAX_ROWS:
            return cls.fit(x, z)
        rows = np.random.default_rng(seed).choice(len(z), GP_MAX_ROWS, replace=False)
        process, held = cls.fit(x[rows], z[rows])
        held_out = process.predict(x)
        held_out[rows] = held
        return process, held_out

    def _cross(self, x: np.ndarray) -> np.ndarray:
        u = (x - self.centre) / self.scale
        f, raw = u.shape[1], u @ self.train.T
        norms = (u**2).sum(axis=1)[:, None] + (self.train**2).sum(axis=1)[None, :]
        return _kernel(np.maximum(norms - 2 * raw, 0.0) / f, raw / f, self.length, self.linear)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The posterior mean, (n,) normal scores."""
        return self.mean + self._cross(x) @ self.weights

    def std(self, x: np.ndarray) -> np.ndarray:
        """The posterior standard deviation of the mean function, (n,) in normal scores."""
        u = (x - self.centre) / self.scale
        cross = self._cross(x)
        prior = 1.0 + self.linear * (u**2).sum(axis=1) / u.shape[1]
        return np.sqrt(np.maximum(prior - ((cross @ self.inverse) * cross).sum(axis=1), 0.0))

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.{name}": getattr(self, name) for name in self.MATRICES}

    def to_dict(self) -> dict:
        return {"mean": self.mean, "length": self.length, "linear": self.linear, "noise": self.noise}

    @classmethod
    def from_dict(cls, data: dict, arrays: dict[str, np.ndarray], prefix: str) -> GaussianProcess:
        matrices = (arrays[f"{prefix}.{name}"] for name in cls.MATRICES)
        return cls(*matrices, *(float(data[name]) for name in ("mean", "length", "linear", "noise")))
