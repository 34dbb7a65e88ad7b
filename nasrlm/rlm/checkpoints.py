"""The checkpoints of :class:`~nasrlm.rlm.predictor.RLMPredictor`: a directory of plain files
(``config.json``, ``model.safetensors``, ``tokenizer.model``, and a prior's or transfer forest's arrays)
that loads without unpickling anything.

:meth:`RLMPredictor.save <nasrlm.rlm.predictor.RLMPredictor.save>` and
:meth:`RLMPredictor.load <nasrlm.rlm.predictor.RLMPredictor.load>` are the way in; the functions here do
the work, given the predictor (or its class: this module does not import the predictor's).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import torch
from safetensors import SafetensorError
from safetensors.numpy import load_file as load_arrays
from safetensors.numpy import save_file as save_arrays
from safetensors.torch import load_file as load_tensors
from safetensors.torch import load_model, save_model
from safetensors.torch import save_file as save_tensors

from nasrlm import __version__
from nasrlm._safetensors import sort_metadata
from nasrlm.data import Objective
from nasrlm.errors import NasrlmError
from nasrlm.priors.feature_prior import FeaturePrior
from nasrlm.priors.prior import FreeLabelPrior
from nasrlm.priors.transfer import TRANSFER_FILE, TRANSFER_LABEL, AccuracyTransfer, TransferFileError
from nasrlm.rlm._members import own_weights
from nasrlm.rlm._residuals import PRIOR_MODES
from nasrlm.rlm.calibration import Spread
from nasrlm.rlm.model import RegressionLM, RLMConfig
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.tokenizers import OnnxTokenizer

if TYPE_CHECKING:
    from nasrlm.rlm.predictor import RLMPredictor

    Predictor = TypeVar("Predictor", bound=RLMPredictor)

#: Where a feature prior's forests are saved, beside ``config.json``.
PRIOR_FILE = "prior.safetensors"
#: Where the weights of a fit's other decoders (``RLMPredictor.members``) are saved, keyed ``"{k}/{name}"``.
MEMBERS_FILE = "members.safetensors"


class ModelNotFoundError(NasrlmError, FileNotFoundError):
    """A model directory lacks a file it needs (config, weights, tokenizer); the message names it."""


class ModelFileError(NasrlmError, ValueError):
    """A model directory's file is there but does not make a model (truncated, of another kind)."""


def _umask() -> int:
    """The process's file-creation mask, for the modes of saved files: read from ``/proc`` where there is
    one, else by setting it and back (the only portable way) when a model is saved, never at import."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _read_model_config(path: Path) -> dict:
    """``config.json`` of a model directory as a dict, checked far enough that loading can trust it.

    Unknown model settings are refused by name here: a config edited by hand, or written by another
    version, would otherwise fail inside the model's constructor with a message that names neither.
    """
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # JSON or UTF-8
        raise ModelFileError(f"{path}: not JSON ({error})") from None
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path}: expected a JSON object, got a JSON {type(meta).__name__}")
    if meta.get("format") != "nasrlm-rlm":
        raise ModelFileError(f"{path} is not a nasrlm model config (format={meta.get('format')!r})")
    shapes = {"model": dict, "objectives": list, "normalizers": dict, "decode_order": list}
    wrong = [key for key, kind in shapes.items() if not isinstance(meta.get(key), kind)]
    optional = (("spaces", list), ("spreads", dict), ("reads_first", list), ("members", int))
    wrong += [key for key, kind in optional if not isinstance(meta.get(key, kind()), kind)]
    if wrong:
        raise ModelFileError(f"{path}: missing or malformed {', '.join(wrong)}")
    keys = {"format", "nasrlm_version", "prior", "spaces", "spreads", "reads_first", "members", *shapes}
    unknown = sorted(set(meta) - keys)
    if unknown:
        raise ModelFileError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(keys))}")
    known = {f.name for f in fields(RLMConfig)}
    unknown = sorted(set(meta["model"]) - known)
    if unknown:
        raise ModelFileError(f"{path}: unknown model setting(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
    return meta


def save_predictor(predictor: RLMPredictor, path: str | Path, *, half: bool = False) -> Path:
    """:meth:`RLMPredictor.save <nasrlm.rlm.predictor.RLMPredictor.save>`, which says how."""
    path = Path(path)
    exists = path.is_dir()
    if not exists:
        path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-" if exists else f".{path.name}.",
                                    dir=path if exists else path.parent))
    try:
        _write_files(predictor, staging, half=half)
        umask = _umask()
        for file in staging.iterdir():  # one mode for all (safetensors writes its file 0600)
            file.chmod(0o666 & ~umask)
        if not exists:
            staging.chmod(0o777 & ~umask)
            os.replace(staging, path)
            return path
        written = {f.name for f in staging.iterdir()}
        for file in sorted(staging.iterdir(), key=lambda f: f.name == "config.json"):
            os.replace(file, path / file.name)
        for name in {PRIOR_FILE, TRANSFER_FILE, MEMBERS_FILE} - written:  # config.json no longer names them
            (path / name).unlink(missing_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path


def _write_files(predictor: RLMPredictor, path: Path, *, half: bool = False) -> None:
    """The files of :func:`save_predictor`, into the empty directory ``path``."""
    device = predictor.device
    model = copy.deepcopy(predictor.model).cpu().half() if half else predictor.model.cpu()
    save_model(model, path / "model.safetensors")  # de-duplicates the tied embeddings
    sort_metadata(path / "model.safetensors")  # which names were tied, in the same order every time
    predictor.model.to(device)
    (path / "tokenizer.model").write_bytes(predictor.tokenizer.to_bytes())
    meta = {
        "format": "nasrlm-rlm",
        "nasrlm_version": __version__,
        "model": predictor.model.config.to_dict(),
        "objectives": [asdict(o) for o in predictor.objectives.values()],
        "normalizers": {k: v.to_dict() for k, v in predictor.normalizers.items()},
        "decode_order": list(predictor.decode_order),
        "spaces": list(predictor.spaces),
        "spreads": {k: v.to_dict() for k, v in predictor.spreads.items()},
    }
    if predictor.reads_first:  # absent otherwise, as models saved before it existed
        meta["reads_first"] = list(predictor.reads_first)
    if predictor.members:  # the same
        meta["members"] = len(predictor.members)
        dtype = torch.float16 if half else torch.float32
        save_tensors({f"{k}/{name}": value.to(dtype).contiguous()
                      for k, weights in enumerate(predictor.members) for name, value in weights.items()},
                     path / MEMBERS_FILE)
    arrays = {}
    if predictor.prior is not None:
        meta["prior"] = {"inputs": list(predictor.prior_inputs), "predicts": list(predictor.prior_objectives),
                         "fit": predictor.prior.to_dict(), "residual_weights": predictor.residual_weights,
                         "mode": predictor.prior_mode}
        arrays = predictor.prior.arrays() if isinstance(predictor.prior, FeaturePrior) else {}
    if arrays:
        save_arrays(arrays, path / PRIOR_FILE)
    if predictor.transfer is not None:
        predictor.transfer.save(path / TRANSFER_FILE)
    (path / "config.json").write_text(json.dumps(meta, indent=2) + "\n")


def load_predictor(cls: type[Predictor], path: str | Path) -> Predictor:
    """:meth:`RLMPredictor.load <nasrlm.rlm.predictor.RLMPredictor.load>` into an instance of ``cls``."""
    path = Path(path)
    files = [path / n for n in ("config.json", "model.safetensors", "tokenizer.model")]
    absent = [f.name for f in files if not f.is_file()]
    if absent:
        raise ModelNotFoundError(f"{path} is not a nasrlm model directory: missing {', '.join(absent)}")
    meta = _read_model_config(files[0])
    try:
        model = RegressionLM(RLMConfig(**meta["model"]))
    except (TypeError, ValueError) as error:  # a setting missing or out of range
        raise ModelFileError(f"{files[0]}: bad model settings ({error})") from None
    try:
        load_model(model, files[1])
    except (SafetensorError, RuntimeError) as error:  # not safetensors, or tensors of other shapes
        raise ModelFileError(f"{files[1]}: not the weights of the model {files[0].name} describes "
                             f"({' '.join(str(error).split())[:200]})") from None
    model.eval()
    try:
        tokenizer = OnnxTokenizer.from_bytes(files[2].read_bytes())
    except RuntimeError:  # sentencepiece's "ParseFromArray" failure
        raise ModelFileError(f"{files[2]}: not a sentencepiece tokenizer model") from None
    try:
        normalizers = {k: Normalizer.from_dict(v) for k, v in meta["normalizers"].items()}
        predictor = cls(tokenizer, model, [Objective(**o) for o in meta["objectives"]], normalizers,
                        meta["decode_order"])
        if "prior" in meta:
            _load_prior(predictor, path, meta["prior"])
        predictor.spaces = tuple(str(name) for name in meta.get("spaces", ()))
        predictor.reads_first = tuple(str(name) for name in meta.get("reads_first", ()))
        unread = [name for name in predictor.reads_first if name not in normalizers]
        if unread:
            raise ValueError(f"reads_first {unread} have no normaliser")
        predictor.spreads = {k: Spread.from_dict(v) for k, v in meta.get("spreads", {}).items()}
    except (AttributeError, KeyError, TypeError, ValueError, SafetensorError) as error:
        raise ModelFileError(f"{files[0]}: not a nasrlm model config ({type(error).__name__}: "
                             f"{error})") from None
    if meta.get("members"):  # its own errors name its own file
        predictor.members = _load_members(path, meta["members"], own_weights(model))
    if (path / TRANSFER_FILE).is_file():
        try:
            predictor.transfer = AccuracyTransfer.load(path / TRANSFER_FILE)
        except TransferFileError as error:
            raise ModelFileError(str(error)) from None
    elif TRANSFER_LABEL in predictor.prior_inputs:
        raise ModelNotFoundError(f"{path} is not a complete nasrlm model directory: missing "
                                 f"{TRANSFER_FILE} (the transfer forest its prior reads)")
    return predictor


def _load_members(path: Path, count: int, mine: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """The ``count`` members' weights of :func:`load_predictor`, in float32, each checked against the
    model's own (``mine``): the same names and shapes."""
    file = path / MEMBERS_FILE
    if count < 1:
        raise ModelFileError(f"{path / 'config.json'}: members must be at least 1, got {count}")
    if not file.is_file():
        raise ModelNotFoundError(f"{path} is not a complete nasrlm model directory: missing {MEMBERS_FILE} "
                                 f"(the weights of {count} more decoders, config.json says)")
    try:
        tensors = load_tensors(file)
    except SafetensorError as error:
        raise ModelFileError(f"{file}: not safetensors ({error})") from None
    members = []
    for k in range(count):
        weights = {name: tensors.get(f"{k}/{name}") for name in mine}
        wrong = [n for n, v in weights.items() if v is None or v.shape != mine[n].shape]
        if wrong or len(tensors) != count * len(mine):
            raise ModelFileError(f"{file}: not the weights of {count} members of the model config.json "
                                 f"describes ({', '.join(wrong[:3]) or 'other tensors'})")
        members.append({n: v.float() for n, v in weights.items()})
    return members


def _load_prior(predictor: RLMPredictor, path: Path, meta: dict) -> None:
    """The prior part of :func:`load_predictor`: ``meta`` is the ``"prior"`` entry of ``config.json``."""
    fit = meta["fit"]
    if fit.get("kind") == "feature":
        arrays = load_arrays(path / PRIOR_FILE) if (path / PRIOR_FILE).is_file() else {}
        if any(m["kind"] != "ridge" for m in fit["models"]) and not arrays:
            raise ModelNotFoundError(f"{path} is not a complete nasrlm model directory: missing "
                                     f"{PRIOR_FILE} (the prior's forests)")
        predictor.prior = FeaturePrior.from_dict(fit, arrays)
    else:
        predictor.prior = FreeLabelPrior.from_dict(fit)
    predictor.prior_inputs = tuple(meta["inputs"])
    predictor.prior_objectives = tuple(meta["predicts"])
    predictor.residual_weights = dict(meta.get("residual_weights", {}))
    predictor.prior_mode = str(meta.get("mode", "residual"))  # models saved before "blend" existed
    if predictor.prior_mode not in PRIOR_MODES:
        raise ValueError(f"prior mode {predictor.prior_mode!r}: expected one of {', '.join(PRIOR_MODES)}")
