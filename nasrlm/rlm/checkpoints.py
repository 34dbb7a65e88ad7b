"""The checkpoints of :class:`~nasrlm.rlm.predictor.RLMPredictor`: a directory of plain files
(``config.json``, ``model.safetensors``, ``tokenizer.model``, and a prior's or transfer forest's arrays)
that loads without unpickling anything, read and written here only, as a :class:`Checkpoint` of the
predictor's parts.

:meth:`RLMPredictor.save <nasrlm.rlm.predictor.RLMPredictor.save>` and
:meth:`RLMPredictor.load <nasrlm.rlm.predictor.RLMPredictor.load>` are the way in.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

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
from nasrlm.priors.feature_prior import FeaturePrior
from nasrlm.priors.prior import FreeLabelPrior
from nasrlm.priors.transfer import TRANSFER_FILE, TRANSFER_LABEL, AccuracyTransfer, TransferFileError
from nasrlm.rlm._members import own_weights
from nasrlm.rlm._residuals import PRIOR_MODES, PriorPart
from nasrlm.rlm.bases import ModelFileError, ModelNotFoundError
from nasrlm.rlm.calibration import Spread
from nasrlm.rlm.language_model import LanguageModel
from nasrlm.rlm.model import RegressionLM, RLMConfig
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.tokenizers import OnnxTokenizer

#: Where a feature prior's forests are saved, beside ``config.json``.
PRIOR_FILE = "prior.safetensors"
#: Where the weights of a fit's other decoders (``RLMPredictor.members``) are saved, keyed ``"{k}/{name}"``.
MEMBERS_FILE = "members.safetensors"


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


@dataclass
class Checkpoint:
    """What a predictor is made of, as it is saved: the language model, the prior beside it, the spread
    calibrated per objective, the cross-space accuracy forest its prior may read, and the search spaces it
    was trained on. :meth:`write` and :meth:`read` are the one place its files are written and read."""

    lm: LanguageModel
    prior_part: PriorPart | None = None
    spreads: dict[str, Spread] = field(default_factory=dict)
    transfer: AccuracyTransfer | None = None
    spaces: tuple[str, ...] = ()

    def write(self, path: str | Path, *, half: bool = False) -> Path:
        """Write the files into directory ``path`` (which: :meth:`RLMPredictor.save
        <nasrlm.rlm.predictor.RLMPredictor.save>`).

        The files are written into a staging directory first, so no file is ever seen truncated. A new
        ``path`` appears whole: the staging directory, made beside it, is renamed to it. An existing one gets
        the staged files, made inside it (same file system), each renamed over its namesake, ``config.json``
        last, and files of the model's that it no longer has removed after that; a crash between two renames
        can leave new weights beside the old ``config.json``. Other files in ``path`` (a pre-training's
        optimiser state) stay.
        """
        path = Path(path)
        exists = path.is_dir()
        if not exists:
            path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-" if exists else f".{path.name}.",
                                        dir=path if exists else path.parent))
        try:
            self._write_files(staging, half=half)
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
            # config.json no longer names them
            for name in {PRIOR_FILE, TRANSFER_FILE, MEMBERS_FILE} - written:
                (path / name).unlink(missing_ok=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return path

    def _write_files(self, path: Path, *, half: bool = False) -> None:
        """The files of :meth:`write`, into the empty directory ``path``."""
        lm = self.lm
        device = lm.device
        model = copy.deepcopy(lm.model).cpu().half() if half else lm.model.cpu()
        save_model(model, path / "model.safetensors")  # de-duplicates the tied embeddings
        sort_metadata(path / "model.safetensors")  # which names were tied, in the same order every time
        lm.model.to(device)
        (path / "tokenizer.model").write_bytes(lm.tokenizer.to_bytes())
        meta = {
            "format": "nasrlm-rlm",
            "nasrlm_version": __version__,
            "model": lm.model.config.to_dict(),
            "objectives": [asdict(o) for o in lm.objectives.values()],
            "normalizers": {k: v.to_dict() for k, v in lm.normalizers.items()},
            "decode_order": list(lm.decode_order),
            "spaces": list(self.spaces),
            "spreads": {k: v.to_dict() for k, v in self.spreads.items()},
        }
        if lm.reads_first:  # absent otherwise, as models saved before it existed
            meta["reads_first"] = list(lm.reads_first)
        if lm.members:  # the same
            meta["members"] = len(lm.members)
            dtype = torch.float16 if half else torch.float32
            save_tensors({f"{k}/{name}": value.to(dtype).contiguous()
                          for k, weights in enumerate(lm.members) for name, value in weights.items()},
                         path / MEMBERS_FILE)
        arrays = {}
        part = self.prior_part
        if part is not None:
            meta["prior"] = {"inputs": list(part.inputs), "predicts": list(part.objectives),
                             "fit": part.prior.to_dict(), "residual_weights": dict(part.weights),
                             "mode": part.mode}
            arrays = part.prior.arrays() if isinstance(part.prior, FeaturePrior) else {}
        if arrays:
            save_arrays(arrays, path / PRIOR_FILE)
        if self.transfer is not None:
            self.transfer.save(path / TRANSFER_FILE)
        (path / "config.json").write_text(json.dumps(meta, indent=2) + "\n")

    @classmethod
    def read(cls, path: str | Path) -> Checkpoint:
        """The checkpoint in directory ``path`` (what is checked: :meth:`RLMPredictor.load
        <nasrlm.rlm.predictor.RLMPredictor.load>`)."""
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
            reads_first = tuple(str(name) for name in meta.get("reads_first", ()))
            unread = [name for name in reads_first if name not in normalizers]
            if unread:
                raise ValueError(f"reads_first {unread} have no normaliser")
            lm = LanguageModel(tokenizer, model, [Objective(**o) for o in meta["objectives"]], normalizers,
                               meta["decode_order"], reads_first)
            checkpoint = cls(lm, _read_prior(path, meta["prior"]) if "prior" in meta else None,
                             {k: Spread.from_dict(v) for k, v in meta.get("spreads", {}).items()},
                             spaces=tuple(str(name) for name in meta.get("spaces", ())))
        except (AttributeError, KeyError, TypeError, ValueError, SafetensorError) as error:
            raise ModelFileError(f"{files[0]}: not a nasrlm model config ({type(error).__name__}: "
                                 f"{error})") from None
        if meta.get("members"):  # its own errors name its own file
            lm.members = _load_members(path, meta["members"], own_weights(model))
        inputs = checkpoint.prior_part.inputs if checkpoint.prior_part is not None else ()
        if (path / TRANSFER_FILE).is_file():
            try:
                checkpoint.transfer = AccuracyTransfer.load(path / TRANSFER_FILE)
            except TransferFileError as error:
                raise ModelFileError(str(error)) from None
        elif TRANSFER_LABEL in inputs:
            raise ModelNotFoundError(f"{path} is not a complete nasrlm model directory: missing "
                                     f"{TRANSFER_FILE} (the transfer forest its prior reads)")
        return checkpoint


def _load_members(path: Path, count: int, mine: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """The ``count`` members' weights of :meth:`Checkpoint.read`, in float32, each checked against the
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


def _read_prior(path: Path, meta: dict) -> PriorPart:
    """The prior part of :meth:`Checkpoint.read`: ``meta`` is the ``"prior"`` entry of ``config.json``."""
    fit = meta["fit"]
    if fit.get("kind") == "feature":
        arrays = load_arrays(path / PRIOR_FILE) if (path / PRIOR_FILE).is_file() else {}
        if any(m["kind"] not in ("ridge", "line") for m in fit["models"]) and not arrays:
            raise ModelNotFoundError(f"{path} is not a complete nasrlm model directory: missing "
                                     f"{PRIOR_FILE} (the prior's forests)")
        prior = FeaturePrior.from_dict(fit, arrays)
    else:
        prior = FreeLabelPrior.from_dict(fit)
    mode = str(meta.get("mode", "residual"))  # models saved before "blend" existed
    if mode not in PRIOR_MODES:
        raise ValueError(f"prior mode {mode!r}: expected one of {', '.join(PRIOR_MODES)}")
    return PriorPart(prior, tuple(meta["inputs"]), tuple(meta["predicts"]), mode,
                     dict(meta.get("residual_weights", {})))
