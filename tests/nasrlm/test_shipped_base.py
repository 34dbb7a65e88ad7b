"""The base model shipped in the package: it loads offline, never saw NB201 accuracy, and is what
``predict`` (no model directory) and ``train`` (no ``--init``) start from."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
import torch

from nasrlm.cli import main
from nasrlm.data import BenchmarkTable, Objective
from nasrlm.priors.transfer import ACCURACY_RANK
from nasrlm.rlm.bases import SHIPPED_BASE, ModelNotFoundError, shipped_base
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.pretraining import is_excluded
from search_spaces import NasBench201

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a socket fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("the shipped base must load and predict without the network")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_the_shipped_base_loads_offline_and_fits_the_size_limit(no_network) -> None:
    path = shipped_base()
    assert sum(f.stat().st_size for f in path.iterdir()) <= 10 * 10**6
    predictor = RLMPredictor.load(path)
    assert next(predictor.lm.model.parameters()).dtype.is_floating_point
    assert ACCURACY_RANK.name in predictor.lm.normalizers and "nb201" in predictor.spaces


def test_the_shipped_base_never_saw_nb201_accuracy() -> None:
    record = json.loads((shipped_base() / "pretraining.json").read_text())
    assert "nb201:*acc*" in record["exclude"] and record["rows"]["nb201"] > 0  # its structure, latencies
    predictor = RLMPredictor.load(shipped_base())
    seen = [t for t in predictor.lm.model.config.objectives if is_excluded(t, ["nb201:*acc*"])]
    assert seen == []
    if predictor.transfer is not None:  # its cross-space accuracy forests
        assert "nb201" not in {s.space for s in predictor.transfer.sources}


def test_a_missing_shipped_base_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import nasrlm.rlm.bases

    monkeypatch.setattr(nasrlm.rlm.bases, "SHIPPED_BASE", tmp_path / "base")
    with pytest.raises(ModelNotFoundError, match="lacks its base model"):
        shipped_base()


def test_predict_with_no_model_directory_is_zero_shot(capsys, no_network) -> None:
    code, out, err = run(capsys, "predict", "--space", "nb201", "--arch", ARCH, "--samples", "4", "-q")
    assert code == 0, err
    assert "zero-shot with the shipped base model (nb201): accuracy_rank" in err
    assert "pixel3" in err  # the columns --objectives may name
    prediction = json.loads(out)[ARCH]
    assert list(prediction) == ["accuracy_rank"]
    assert 0 <= prediction["accuracy_rank"]["median"] <= 1
    code, out, err = run(capsys, "predict", "--space", "nb201", "--arch", ARCH, "--samples", "4", "-q",
                         "--objectives", "pixel3,accuracy_rank")
    assert code == 0 and list(json.loads(out)[ARCH]) == ["pixel3", "accuracy_rank"], err
    assert json.loads(out)[ARCH]["pixel3"]["unit"] == "ms"
    code, _, err = run(capsys, "predict", "--space", "nb201", "--arch", ARCH, "--objectives", "nb101:acc",
                       "-q")
    assert code == 2 and "never trained on nb101:acc" in err and err.count("\n") == 2  # the zero-shot line


def test_zero_shot_reads_an_accuracy_through_equivalent_texts_so_equivalents_agree(capsys) -> None:
    space = NasBench201()
    dead = "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"  # one of 341 equivalent cells
    other = space.arch_id(space.equivalents(space.parse(dead))[5])
    archs = ("--arch", dead, "--arch", other)
    code, out, err = run(capsys, "predict", "--space", "nb201", *archs, "--samples", "8", "-q")
    assert code == 0, err
    first, second = json.loads(out).values()
    assert first == second  # the same texts read for both
    code, out, err = run(capsys, "predict", "--space", "nb201", *archs, "--samples", "8", "-q",
                         "--equivalents", "1")
    first, second = json.loads(out).values()
    assert code == 0 and first != second, err  # each through its own text: the model sees two networks


def test_zero_shot_orders_a_space_s_columns_under_their_plain_names() -> None:
    predictor = RLMPredictor.zero_shot("nb201")
    assert predictor.predicts == (ACCURACY_RANK.name,)
    columns = predictor.space_columns()
    assert "pixel3" in columns and not [c for c in columns if ":" in c or c == "params_m"]


def test_zero_shot_samples_after_its_own_greedy_reading_of_the_free_labels(monkeypatch) -> None:
    import nasrlm.rlm.language_model as module
    from nasrlm.free_labels import texts_and_free_labels

    predictor = RLMPredictor.zero_shot("nb201")
    assert predictor.lm.reads_first == ("params_m", "macs_m")
    texts, labels = texts_and_free_labels(NasBench201(), [ARCH])
    calls = []
    real = module.sample_scaled

    def spy(*args, given=None, reads=(), **kwargs):
        calls.append((given, reads))
        return real(*args, given=given, reads=reads, **kwargs)

    monkeypatch.setattr(module, "sample_scaled", spy)
    predictor.sample(texts, num_samples=4)
    assert calls[0] == (None, ("params_m", "macs_m"))
    predictor.sample(texts, num_samples=4, given={"params_m": labels[:, 0]})  # what is given is not read
    (names, tokens), reads = calls[1]
    assert names == ("params_m",) and reads == ("macs_m",)
    assert torch.equal(tokens, torch.as_tensor(predictor.lm.targets(labels[:, :1], ("params_m",))))


@pytest.mark.slow
def test_train_blends_the_language_model_with_the_forest_by_default(capsys, tmp_path: Path) -> None:
    space = NasBench201()
    ids = space.sample_ids(12, seed=5)
    table = BenchmarkTable("nb201", ids, [Objective("eyeriss", "ms", "toy latency", "test", False)],
                           np.linspace(1, 3, 12)[:, None])
    data = str(table.to_csv(tmp_path / "few.csv"))
    code, _, err = run(capsys, "train", "--data", data, "-o", str(tmp_path / "m"), "--epochs", "1", "-q")
    assert code == 0 and "beside the language model, which learns each objective from the text alone" in err
    assert "the language model's share of each prediction (weighed on 5 cross-fits): eyeriss" in err, err
    predictor, base = RLMPredictor.load(tmp_path / "m"), RLMPredictor.load(SHIPPED_BASE).lm.model
    part = predictor.prior_part
    assert part.mode == "blend" and part.inputs  # a forest on the free and graph labels
    assert not set(predictor.lm.decode_order) & set(part.inputs)  # the model decodes none of them
    encoder = dict(base.named_parameters())
    for name, p in predictor.lm.model.named_parameters():  # blended, the model trains its decoder only
        if name.startswith("t5.encoder."):
            assert torch.equal(p, encoder[name]), name
    code, out, _ = run(capsys, "predict", str(tmp_path / "m"), "--space", "nb201", "--arch", ARCH,
                       "--samples", "8")
    assert code == 0 and "eyeriss" in out


def test_train_fine_tunes_the_shipped_base_unless_told_otherwise(capsys, tmp_path: Path) -> None:
    ids = NasBench201().sample_ids(12, seed=5)
    table = BenchmarkTable("nb201", ids, [Objective("acc", "%", "toy accuracy", "test", True)],
                           np.linspace(60, 90, 12)[:, None])
    data = str(table.to_csv(tmp_path / "few.csv"))
    code, _, err = run(capsys, "train", "--data", data, "-o", str(tmp_path / "m"), "--epochs", "1", "-q",
                       "--prior", "none")
    assert code == 0 and "fine-tuning the shipped base model on 12 architectures" in err, err
    model, base = RLMPredictor.load(tmp_path / "m").lm.model, RLMPredictor.load(SHIPPED_BASE).lm.model
    encoder = dict(base.named_parameters())
    for name, p in model.named_parameters():  # the language model alone trains the decoder only
        if name.startswith("t5.encoder."):
            assert torch.equal(p, encoder[name]), name
    code, _, err = run(capsys, "train", "--data", data, "-o", str(tmp_path / "s"), "--epochs", "1", "-q",
                       "--scratch")
    assert code == 0 and "training on 12 architectures" in err, err
    with pytest.raises(SystemExit) as stop:
        main(["train", "--data", data, "-o", str(tmp_path / "t"), "--size", "tiny", "--init",
              str(SHIPPED_BASE)])
    assert stop.value.code == 2 and "--init: not allowed with argument --size" in capsys.readouterr().err


def test_the_shipped_base_is_named_shipped_and_none_is_no_base() -> None:
    import warnings

    from nasrlm.rlm.bases import SHIPPED, base_directory

    acc = [Objective("acc", "%", "accuracy", "test", True)]
    assert base_directory(SHIPPED) == SHIPPED_BASE and base_directory("runs/x") == Path("runs/x")
    named = RLMPredictor.from_base("shipped", acc, space="nb201")
    with pytest.warns(DeprecationWarning, match='from_base\\("shipped"'):  # the old name, for one release
        unnamed = RLMPredictor.from_base(None, acc, space="nb201")
    assert unnamed.lm.model.config == named.lm.model.config
    with pytest.warns(DeprecationWarning, match="path= is now base="):
        RLMPredictor.zero_shot("nb201", path=SHIPPED_BASE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RLMPredictor.zero_shot("nb201").predicts == RLMPredictor.zero_shot("nb201", SHIPPED).predicts
