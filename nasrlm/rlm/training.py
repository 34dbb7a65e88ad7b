"""Teacher-forced training of a :class:`~nasrlm.rlm.model.RegressionLM`, with early stopping or not.

AdamW, linear warm-up then cosine decay, gradient clipping, a held-out validation split that picks
the best epoch (or, ``keep_best=False``, is only measured while the last epoch is kept), and a time
budget. Same data, config and seed → same weights (single process; torch CPU kernels are deterministic
for these ops). The optimiser step itself (:class:`Stepper`) is the one pre-training takes too
(:func:`nasrlm.rlm.pretraining.pretrain`), which draws its batches and sets its learning rate in its
own way.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from nasrlm.rlm.model import RegressionLM
from nasrlm.rlm.recipes import TrainConfig

#: Parameter-name prefixes that ``TrainConfig(freeze_encoder=True)`` keeps as they are: the encoder and the
#: token embeddings it shares with the decoder.
FROZEN_WITH_THE_ENCODER = ("t5.encoder.", "t5.shared.")


@dataclass
class TrainReport:
    """What happened: per-epoch losses, the epoch whose weights were kept, and the time taken."""

    train_loss: list[float] = field(default_factory=list)
    validation_loss: list[float] = field(default_factory=list)
    best_epoch: int = -1
    seconds: float = 0.0
    stopped_by: str = "max_epochs"
    validation_rows: list[int] = field(default_factory=list)  # indices of the held-out examples
    # the cross-fits that calibrated the spread, and weighed a blended prior (RLMPredictor.fit; 0: none)
    cross_fits: int = 0


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token lists into ``(input_ids, attention_mask)``."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return ids, mask


def _batches(order: np.ndarray, size: int) -> list[np.ndarray]:
    return [order[k : k + size] for k in range(0, len(order), size)]


def derived_sources(derived_from: Sequence[int] | None, rows: int) -> np.ndarray:
    """``derived_from`` as an array, checked: one entry per row, each -1 (an original) or the index
    of an original row. ``None`` means every row is an original."""
    if derived_from is None:
        return np.full(rows, -1, dtype=np.int64)
    source = np.asarray(derived_from, dtype=np.int64).reshape(-1)
    if source.size != rows:
        raise ValueError(f"derived_from has {source.size} entries for {rows} rows")
    derived = source[source >= 0]
    if derived.size and (derived.max() >= rows or np.any(source[derived] >= 0)):
        raise ValueError("derived_from must name original rows (those marked -1)")
    return source


def validation_size(originals: int, fraction: float) -> int:
    """How many of ``originals`` rows :func:`train` holds out for validation with ``fraction``."""
    if fraction <= 0:
        return 0
    return min(originals - 1, max(1, round(fraction * originals)))


class Stepper:
    """AdamW over the parameters of ``model`` that require a gradient, one step per batch: the learning rate
    of the step, then zero the gradients, backpropagate, clip the gradient norm, step. What :func:`train`
    and pre-training share; each sets the learning rate of every step itself."""

    def __init__(self, model: torch.nn.Module, *, weight_decay: float, clip_norm: float) -> None:
        self.model = model
        self.clip_norm = clip_norm
        model.zero_grad(set_to_none=True)  # an earlier training's gradients, a frozen parameter's too
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                           weight_decay=weight_decay)

    def step(self, loss: torch.Tensor, learning_rate: float) -> None:
        """One optimiser step on the gradient of ``loss`` (a batch's mean loss)."""
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)  # frozen ones hold none
        self.optimizer.step()

    def save(self, path: Path) -> None:
        """The optimiser's state as a safetensors file (no pickles): its tensors, and its scalars (each
        parameter's step count) as metadata, keyed ``"{parameter index}.{name}"``."""
        tensors, scalars = {}, {}
        for index, values in self.optimizer.state_dict()["state"].items():
            for key, value in values.items():
                if torch.is_tensor(value) and value.dim() > 0:
                    tensors[f"{index}.{key}"] = value.detach().cpu().contiguous()
                else:
                    scalars[f"{index}.{key}"] = str(float(value))
        if not tensors and not scalars:  # no step since it was made (a run resumed only to ship): none kept,
            path.unlink(missing_ok=True)  # and a resume starts a fresh one, as it does without the file
            return
        save_file(tensors, path, metadata=scalars)

    def load(self, path: Path) -> None:
        """The optimiser's state as :meth:`save` wrote it, for the same parameters in the same order."""
        tensors = load_file(path)
        with safe_open(path, "pt") as f:
            scalars = f.metadata() or {}
        state: dict[int, dict] = {}
        for key, value in tensors.items():
            index, name = key.split(".", 1)
            state.setdefault(int(index), {})[name] = value
        for key, value in scalars.items():
            index, name = key.split(".", 1)
            state.setdefault(int(index), {})[name] = torch.tensor(float(value))
        saved = self.optimizer.state_dict()
        saved["state"] = state
        self.optimizer.load_state_dict(saved)


class EncoderStates:
    """The encoder's states of rows of ``inputs``, each computed once (in eval mode: no dropout) and reused:
    what a fine-tune that leaves the encoder as it is feeds :meth:`RegressionLM.decoder_loss`."""

    def __init__(self, model: RegressionLM, inputs: Sequence[Sequence[int]]) -> None:
        self.model = model
        self.inputs = inputs
        self._states: dict[int, torch.Tensor] = {}

    def __call__(self, index: np.ndarray, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(len(index), ids' width, d_model) states of rows ``index``, whose padded ``ids`` and ``mask``
        (as :func:`pad_batch` makes them, on the model's device) are given."""
        new = [k for k, i in enumerate(index) if int(i) not in self._states]
        if new:
            training = self.model.training
            self.model.eval()
            with torch.no_grad():
                memory = self.model.encode(ids[new], mask[new])
            self.model.train(training)
            self._states.update((int(index[k]), memory[j, : len(self.inputs[index[k]])])
                                for j, k in enumerate(new))
        memory = torch.zeros(len(index), ids.shape[1], self.model.config.d_model, device=ids.device)
        for k, i in enumerate(index):
            memory[k, : len(self.inputs[i])] = self._states[int(i)]
        return memory


def train(model: RegressionLM, inputs: Sequence[Sequence[int]], targets: np.ndarray,
          objectives: tuple[str, ...], config: TrainConfig | None = None, *,
          derived_from: Sequence[int] | None = None, member: int = 0) -> TrainReport:
    """Fit ``model`` to number-token ``targets`` (n, objectives, digits; -1 = missing) of ``inputs``.

    The model ends up with the weights of the epoch with the lowest validation loss (``keep_best``; else,
    or with no validation split, the last epoch's). ``derived_from``
    marks augmented rows: the index of the row each one was made from, -1 for an original. Only
    originals are held out for validation, and the rows made from a held-out one are left out
    altogether, so that the validation loss measures what the model makes of unseen architectures.
    ``member`` k > 0 draws its validation split, batch order and dropout from ``(seed, k)`` instead of
    ``seed``: one more member of an ensemble, each holding out rows of its own.
    """
    config = config or TrainConfig()
    if len(inputs) != len(targets):
        raise ValueError(f"{len(inputs)} inputs but {len(targets)} target rows")
    source = derived_sources(derived_from, len(inputs))
    originals = np.flatnonzero(source < 0)
    if len(originals) < 2:
        raise ValueError("training needs at least two examples")
    seed = np.random.SeedSequence([config.seed, member]) if member else config.seed
    rng = np.random.default_rng(seed)
    torch.manual_seed(int(rng.integers(2**31)) if member else config.seed)
    order = rng.permutation(len(originals))
    n_val = validation_size(len(originals), config.validation_fraction)
    val_idx = originals[order[:n_val]]
    held_out = np.isin(np.arange(len(inputs)), val_idx) | np.isin(source, val_idx)
    train_idx = np.flatnonzero(~held_out)
    if derived_from is None:  # the order of the original split, so that old seeds reproduce
        train_idx = originals[order[n_val:]]
    report = TrainReport(validation_rows=sorted(int(i) for i in val_idx))
    device = next(model.parameters()).device  # batches go where the model is
    targets_t = torch.as_tensor(targets, dtype=torch.long)
    pad = model.config.text_pad_id

    steps_per_epoch = math.ceil(len(train_idx) / config.batch_size)
    total_steps = steps_per_epoch * config.max_epochs
    warmup = max(1, round(config.warmup_fraction * total_steps))
    frozen = [p for n, p in model.named_parameters()
              if config.freeze_encoder and n.startswith(FROZEN_WITH_THE_ENCODER) and p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    stepper = Stepper(model, weight_decay=config.weight_decay, clip_norm=config.clip_norm)

    def schedule(step: int) -> float:  # linear warm-up, then cosine decay to zero
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total_steps - warmup))))

    states = EncoderStates(model, inputs)  # with a frozen encoder: each row encoded once

    def loss_on(index: np.ndarray) -> torch.Tensor:
        ids, mask = pad_batch([inputs[i] for i in index], pad)
        ids, mask, target = ids.to(device), mask.to(device), targets_t[index].to(device)
        if not frozen:
            return model(ids, mask, objectives, target)
        memory = states(index, ids, mask)
        if model.training and config.state_dropout > 0:  # not on the validation rows
            memory = torch.nn.functional.dropout(memory, config.state_dropout)
        return model.decoder_loss(memory, mask, objectives, target)

    best_state, best_loss, stale = None, math.inf, 0
    start = time.perf_counter()
    bar = tqdm(range(config.max_epochs), desc="training", unit="epoch", disable=not config.progress)
    for epoch in bar:
        model.train()
        running = 0.0
        for k, index in enumerate(_batches(rng.permutation(train_idx), config.batch_size)):
            loss = loss_on(index)
            stepper.step(loss, config.learning_rate * schedule(epoch * steps_per_epoch + k))
            running += loss.item() * len(index)
        report.train_loss.append(running / len(train_idx))
        if n_val == 0:  # nothing held out: the latest epoch is the one kept
            report.best_epoch = epoch
            bar.set_postfix(train=f"{report.train_loss[-1]:.3f}")
        else:
            model.eval()
            with torch.no_grad():
                batches = _batches(val_idx, 4 * config.batch_size)
                val = sum(loss_on(b).item() * len(b) for b in batches) / n_val
            report.validation_loss.append(val)
            bar.set_postfix(train=f"{report.train_loss[-1]:.3f}", val=f"{val:.3f}",
                            best=report.best_epoch + 1)
            if not config.keep_best:
                report.best_epoch = epoch
            elif val < best_loss - 1e-4:
                best_loss, stale, report.best_epoch = val, 0, epoch
                best_state = copy.deepcopy(model.state_dict())
            else:
                stale += 1
        elapsed = time.perf_counter() - start
        if stale >= config.patience:
            report.stopped_by = "early_stopping"
            break
        if config.max_minutes is not None and elapsed > 60 * config.max_minutes:
            report.stopped_by = "time_budget"
            break
    bar.close()
    for p in frozen:
        p.requires_grad_(True)
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    report.seconds = time.perf_counter() - start
    return report
