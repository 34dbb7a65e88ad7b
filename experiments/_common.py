"""What the benchmark scripts share: the gradient-boosted-trees baseline and a cache of graph labels."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from nasrlm.free_labels import FREE_LABELS_VERSION, texts_and_free_labels
from search_spaces import SearchSpace


def gbdt_predict(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, seed: int) -> np.ndarray:
    """Predictions (len(x_test), objectives); each objective is fitted on its known (non-NaN) rows."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    out = np.empty((len(x_test), y_train.shape[1]))
    for k in range(y_train.shape[1]):
        known = ~np.isnan(y_train[:, k])
        leaf = max(2, min(20, int(known.sum()) // 20))  # sklearn's default of 20 starves small N
        model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, min_samples_leaf=leaf,
                                              random_state=seed)
        model.fit(x_train[known], y_train[known, k])
        out[:, k] = model.predict(x_test)
    return out


def encoded(space: SearchSpace, ids: list[str], cache: Path) -> tuple[list[str], np.ndarray]:
    """Texts and every free label (graph labels included) of ``ids``, computed once and kept in ``cache``."""
    key = hashlib.sha256("\n".join([f"v{FREE_LABELS_VERSION}", *ids]).encode()).hexdigest()[:16]
    path = cache / f"{space.name}-{key}.npz"
    if path.exists():
        z = np.load(path, allow_pickle=False)
        return [str(t) for t in z["texts"]], z["free"]
    print(f"  {space.name}: texts and free labels of {len(ids):,} architectures", flush=True)
    texts, free = texts_and_free_labels(space, ids, graph=True, progress=True)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, texts=np.array(texts), free=free)
    return texts, free
