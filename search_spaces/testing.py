"""A conformance suite that every search space — built-in or yours — passes with one line.

Like ``optuna.testing``: subclass :class:`SearchSpaceTests` in a pytest module and set ``space``::

    from search_spaces.testing import SearchSpaceTests

    class TestMySpace(SearchSpaceTests):
        space = MySpace()

The suite checks the contract the rest of nasrlm relies on: ids round-trip and malformed ids fail
with ``ValueError``; sampling is reproducible; Optuna can drive ``suggest`` (and ``params_of``, where a
space has it, inverts it); ``to_onnx`` is a valid, executable, deterministic model; the canonical text
is deterministic and parses back into the same structure; ``to_torch`` computes what the ONNX model does
and trains. ``n_archs`` (default 4) sets how many
architectures each check draws.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any, ClassVar

import numpy as np
import onnx
import onnx.inliner
import onnxruntime as ort
import optuna
import pytest

from exporters import (
    FEATURE_NAMES,
    count_macs,
    count_parameters,
    describe_graph,
    from_text,
    materialize,
    to_text,
)
from search_spaces._base import SearchSpace
from search_spaces._registry import available_spaces, get_space

__all__ = ["SearchSpaceTests"]

#: Enumerate finite spaces fully in the suite only up to this size.
_ENUMERATE_LIMIT = 20_000


class SearchSpaceTests:
    """Mix-in test class: set ``space`` (an instance) in the subclass."""

    space: ClassVar[SearchSpace[Any]]
    n_archs: ClassVar[int] = 4

    def _archs(self, seed: int = 0) -> list[Any]:
        rng = np.random.default_rng(seed)
        return [self.space.sample(rng) for _ in range(self.n_archs)]

    # --- identity -------------------------------------------------------------------------
    def test_name_is_a_plain_identifier(self) -> None:
        assert isinstance(self.space.name, str)
        assert re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", self.space.name), self.space.name

    def test_ids_round_trip(self) -> None:
        for arch in self._archs():
            arch_id = self.space.arch_id(arch)
            assert isinstance(arch_id, str) and arch_id.strip() == arch_id and arch_id
            assert self.space.arch_id(self.space.parse(arch_id)) == arch_id

    @pytest.mark.parametrize("bad", ["", "not an architecture id", "\n", "|||"])
    def test_parse_rejects_malformed_ids(self, bad: str) -> None:
        with pytest.raises(ValueError) as info:
            self.space.parse(bad)
        assert str(info.value), "the error must say what is wrong"

    def test_parse_rejects_trailing_garbage(self) -> None:
        arch_id = self.space.arch_id(self._archs()[0])
        with pytest.raises(ValueError):
            self.space.parse(arch_id + "#garbage")

    # --- drawing ------------------------------------------------------------------------
    def test_sample_is_reproducible(self) -> None:
        first = [self.space.arch_id(a) for a in self._archs(seed=7)]
        again = [self.space.arch_id(a) for a in self._archs(seed=7)]
        assert first == again

    def test_sample_varies(self) -> None:
        rng = np.random.default_rng(0)
        ids = {self.space.arch_id(self.space.sample(rng)) for _ in range(20)}
        if self.space.size is None or self.space.size > 1:
            assert len(ids) > 1, "20 samples gave one architecture"

    def test_suggest_drives_optuna(self) -> None:
        seen: list[str] = []

        def objective(trial: optuna.Trial) -> float:
            arch_id = self.space.arch_id(self.space.suggest(trial))
            assert self.space.arch_id(self.space.parse(arch_id)) == arch_id
            seen.append(arch_id)
            return float(len(seen))

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        study.optimize(objective, n_trials=self.n_archs)
        # Replaying a trial's parameters gives the same architecture: the space is a pure function
        # of what the sampler suggested.
        fixed = optuna.trial.FixedTrial(study.trials[0].params)
        assert self.space.arch_id(self.space.suggest(fixed)) == seen[0]

    def test_params_of_inverts_suggest(self) -> None:
        """Where the space maps architectures back to parameters, ``suggest`` builds the same one from
        them and draws exactly those parameters."""
        for arch in self._archs():
            try:
                params = self.space.params_of(arch)
            except NotImplementedError:
                pytest.skip(f"{self.space.name} has no params_of (optional)")
            fixed = optuna.trial.FixedTrial(params)
            assert self.space.arch_id(self.space.suggest(fixed)) == self.space.arch_id(arch)
            assert set(fixed.params) == set(params)

    def test_size_and_enumerate_agree(self) -> None:
        size = self.space.size
        if size is None:
            pytest.skip(f"{self.space.name} does not state a size")
        assert isinstance(size, int) and size > 0
        if size > _ENUMERATE_LIMIT:
            pytest.skip(f"{self.space.name} has {size} architectures: too many to enumerate here")
        ids = [self.space.arch_id(a) for a in self.space.enumerate()]
        assert len(ids) == size == len(set(ids))

    # --- optional capabilities -----------------------------------------------------------
    def test_equivalents_are_a_symmetric_relation(self) -> None:
        """Each equivalent is another valid architecture, and it counts the first among its own."""
        for arch in self._archs(seed=3):
            arch_id = self.space.arch_id(arch)
            ids = [self.space.arch_id(a) for a in self.space.equivalents(arch)]
            assert arch_id not in ids and len(ids) == len(set(ids))
            for other in ids[:3]:
                assert self.space.arch_id(self.space.parse(other)) == other
                back = {self.space.arch_id(a) for a in self.space.equivalents(self.space.parse(other))}
                assert arch_id in back and set(ids) - {other} <= back

    # --- ONNX ------------------------------------------------------------------------------
    def test_onnx_is_valid_and_runs(self) -> None:
        for arch in self._archs()[:2]:
            model = self.space.to_onnx(arch)
            onnx.checker.check_model(model, full_check=True)
            declared = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
            shape = tuple(self.space.input_shape_of(arch))
            assert tuple(declared) == shape
            assert len(shape) == len(self.space.input_shape)
            session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            outputs = session.run(None, {session.get_inputs()[0].name: x})
            assert all(np.all(np.isfinite(o)) for o in outputs)
            assert count_parameters(model) > 0

    def test_onnx_is_deterministic(self) -> None:
        arch = self._archs()[0]
        first = self.space.to_onnx(arch).SerializeToString(deterministic=True)
        assert first == self.space.to_onnx(arch).SerializeToString(deterministic=True)

    def test_text_is_deterministic_and_has_no_weights(self) -> None:
        for arch in self._archs():
            text = self.space.to_text(arch)
            assert text == self.space.to_text(arch)
            assert "raw_data" not in text and not re.search(r"\{\s*-?\d+\.\d+", text)

    def test_text_is_identical_across_processes(self) -> None:
        """Ids and texts must not depend on hash randomisation (the order of sets/dicts of strings)."""
        code = (
            f"import hashlib; {self._fresh_space_code()};"
            "ids = s.sample_ids(20, seed=3);"
            "print(hashlib.sha256(''.join(i + s.to_text(s.parse(i)) for i in ids).encode()).hexdigest())"
        )
        path = os.pathsep.join(p for p in sys.path if p)
        runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env={"PYTHONHASHSEED": str(seed), "PATH": "", "PYTHONPATH": path})
                for seed in (1, 2)]  # side by side: each imports the space's stack, exports 20 architectures
        digests = set()
        for run in runs:
            out, err = run.communicate()
            if run.returncode != 0:  # say why: the child's own error, not a bare CalledProcessError
                pytest.fail(f"a fresh Python process could not rebuild the space and print its texts "
                            f"(exit {run.returncode}):\n{err.strip()[-3000:]}", pytrace=False)
            digests.add(out.strip())
        assert len(digests) == 1 and len(next(iter(digests))) == 64

    def _fresh_space_code(self) -> str:
        """Python that builds this space anew as ``s``: by registered name, else from its class."""
        name, cls = self.space.name, type(self.space)
        if name in available_spaces() and type(get_space(name)) is cls:
            return f"from search_spaces import get_space; s = get_space({name!r})"
        try:
            fresh = cls()
        except TypeError:
            pytest.skip(f"{cls.__qualname__}() needs arguments, so a fresh process cannot rebuild the space; "
                        "register it to run this check")
        arch = self._archs()[0]
        if fresh.to_text(arch) != self.space.to_text(arch):
            pytest.skip(f"{cls.__qualname__}() is not configured like the space under test")
        return f"import importlib; s = importlib.import_module({cls.__module__!r}).{cls.__qualname__}()"

    def test_text_parses_back_to_the_same_structure(self) -> None:
        for arch in self._archs()[:2]:
            text = self.space.to_text(arch)
            structural = from_text(text)
            assert to_text(structural) == text
            rebuilt, original = materialize(structural), self.space.to_onnx(arch)
            assert to_text(rebuilt) == to_text(original)
            assert _inferred_shapes(rebuilt) == _inferred_shapes(original)
            assert count_parameters(rebuilt) == count_parameters(original)

    def test_graph_labels_read_once_agree_with_onnx_inlining_and_shape_inference(self) -> None:
        """The free labels come from one read of the structural model (its functions expanded by
        ``exporters``, shapes by rule); they must equal what ONNX's inliner and shape inference give."""
        paths = [n for n in FEATURE_NAMES if not n.startswith("block")]  # blocks are lost to inlining
        for arch in self._archs()[:3]:
            structural = self.space.build_onnx(arch)
            fast = describe_graph(structural)
            assert fast.macs == count_macs(structural, onnx_shapes=True)
            inlined = onnx.inliner.inline_local_functions(materialize(structural, weights=False))
            slow = describe_graph(inlined)
            assert fast.parameters == slow.parameters == count_parameters(self.space.to_onnx(arch))
            assert [fast.features[n] for n in paths] == [slow.features[n] for n in paths]

    # --- torch -----------------------------------------------------------------------------
    def test_torch_module_computes_what_the_onnx_model_does(self) -> None:
        """``to_torch`` has the ONNX model's parameter count and, in eval mode, its outputs."""
        import torch

        arch = self._archs()[0]
        model, module = self.space.to_onnx(arch, seed=1), self.space.to_torch(arch, seed=1).eval()
        assert sum(p.numel() for p in module.parameters()) == count_parameters(model)
        x = np.random.default_rng(0).standard_normal(self.space.input_shape_of(arch)).astype(np.float32)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        expected = session.run(None, {session.get_inputs()[0].name: x})[0]
        with torch.no_grad():
            got = module(torch.from_numpy(x)).numpy()
        assert got.shape == expected.shape
        # random weights let activations grow to 1e4 in deep networks, where the two runtimes' float
        # sums part by 1e-3 relative: a wrong operator parts by order one
        scale = float(np.abs(expected).max())
        assert float(np.abs(got - expected).max()) <= 1e-2 * scale, "to_torch computes another function"

    def test_torch_module_trains(self) -> None:
        """On a batch of two: every parameter that reaches the output gets a gradient, and one SGD step
        changes the loss."""
        import torch

        arch = self._archs()[0]
        module = self.space.to_torch(arch).train()
        shape = (2, *self.space.input_shape_of(arch)[1:])
        x = torch.from_numpy(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
        def loss() -> torch.Tensor:
            return module(x).float().square().mean()
        before = loss()
        before.backward()
        no_grad = {name for name, p in module.named_parameters() if p.grad is None}
        onnx_names = getattr(module, "onnx_names", None)  # a converted ONNX model: some weights may be dead
        if onnx_names is not None:
            parameters = {onnx_names[name] for name, _ in module.named_parameters()}
            dead = _weights_not_reaching_the_output(self.space.to_onnx(arch)) & parameters
            assert {onnx_names[name] for name in no_grad} == dead
        else:
            assert not no_grad, f"no gradient reaches {sorted(no_grad)[:5]}"
        torch.optim.SGD(module.parameters(), lr=0.01).step()
        with torch.no_grad():
            assert not torch.isclose(loss(), before.detach()), "one optimiser step left the loss unchanged"


def _weights_not_reaching_the_output(model: onnx.ModelProto) -> set[str]:
    """Initializers from which no chain of nodes leads to a graph output."""
    needed = {o.name for o in model.graph.output}
    for node in reversed(model.graph.node):
        if needed & set(node.output):
            needed |= set(node.input)
    return {init.name for init in model.graph.initializer} - needed


def _inferred_shapes(model: onnx.ModelProto) -> list[tuple[int, ...]]:
    """Every intermediate and output shape (a sorted multiset: names differ between the two models).

    Strict shape inference must succeed with fully known dimensions — the text leaves intermediate
    shapes out on the promise that they can be recovered.
    """
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = []
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        dims = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
        assert all(d > 0 for d in dims), f"shape of {vi.name} not fully inferred: {dims}"
        shapes.append(dims)
    return sorted(shapes)
