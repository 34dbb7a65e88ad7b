"""The regression language model: a small T5 encoder–decoder that reads ONNX text and writes numbers.

Input: the canonical ONNX text of one architecture, tokenized by
:class:`~nasrlm.rlm.tokenizers.OnnxTokenizer`.
Output: for each objective in a fixed order, an objective tag followed by one number in the fixed-length
digit format of :class:`~nasrlm.rlm.tokenizers.DigitTokenizer` (a normalised label in [1, 10), 8.712 here)::

    <start> <obj:acc> 8 7 1 2  <obj:pixel3> 3 1 4 1  ...

Tags are given (teacher-forced at training and at inference), digits are predicted, each conditioned
on everything before it — so latency is predicted knowing the predicted accuracy. The head scores
digit tokens only, and any digits make a valid number, so every decoded sequence is one.

One vocabulary serves both sides: the text pieces first, then the decoder block ``<start>``,
``<missing>`` (stands in for an unknown label so later objectives still train), one tag per objective,
and the ten digit tokens. The model is randomly initialised from a ``transformers.T5Config``; nothing is
downloaded.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

import torch
from torch import nn
from transformers import T5Config, T5Model

from nasrlm.rlm.recipes import SIZES, size_options  # noqa: F401 - re-exported beside the config
from nasrlm.rlm.tokenizers import DigitTokenizer

#: The most parameters an :class:`RLMConfig` may ask for (4 GiB of float32 weights): a config file
#: with absurd sizes is refused before torch allocates them.
MAX_PARAMETERS = 1_000_000_000


@dataclass
class RLMConfig:
    """Everything needed to rebuild the network (saved as JSON in every checkpoint)."""

    text_vocab_size: int  # pieces of the ONNX tokenizer; text ids live in [0, text_vocab_size)
    text_pad_id: int  # padding id of the ONNX tokenizer
    objectives: tuple[str, ...]  # every objective the decoder has a tag for (decode order is per call)
    number: dict = field(default_factory=lambda: DigitTokenizer().to_dict())  # digit format
    d_model: int = 128  # width of every layer
    num_heads: int = 4  # attention heads (d_model / num_heads = 32 per head)
    d_ff: int = 512  # hidden size of the gated feed-forward blocks
    encoder_layers: int = 3  # reading ~150-token ONNX texts needs little depth
    decoder_layers: int = 2  # the decoder only writes a few dozen digits
    dropout: float = 0.1
    max_input_tokens: int = 1024  # longer texts are an error, never silently truncated

    def __post_init__(self) -> None:
        self.objectives = tuple(self.objectives)
        if len(set(self.objectives)) != len(self.objectives):
            raise ValueError(f"objectives must be distinct, got {self.objectives}")
        sizes = ("text_vocab_size", "d_model", "num_heads", "d_ff", "encoder_layers", "decoder_layers",
                 "max_input_tokens")
        for name in sizes:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by num_heads {self.num_heads}")
        if self.approximate_parameters > MAX_PARAMETERS:
            raise ValueError(f"these sizes make about {self.approximate_parameters:,} parameters, more "
                             f"than the {MAX_PARAMETERS:,} a regression model may have (checked before "
                             "allocating)")

    @property
    def approximate_parameters(self) -> int:
        """Weights of the network these sizes make (embeddings, attention, gated feed-forward blocks)."""
        d, ff = self.d_model, self.d_ff
        vocab = self.text_vocab_size + len(self.objectives) + 1000  # and the decoder's number tokens
        return vocab * d + self.encoder_layers * (4 * d * d + 3 * d * ff) + \
            self.decoder_layers * (8 * d * d + 3 * d * ff)

    def to_dict(self) -> dict:
        return asdict(self)


class DecoderVocab:
    """Ids of the decoder block inside the shared vocabulary (see the module docstring)."""

    def __init__(self, config: RLMConfig) -> None:
        self.numbers = DigitTokenizer.from_dict(config.number)
        self.start = config.text_vocab_size
        self.missing = self.start + 1
        self.first_tag = self.start + 2
        self.tags = {name: self.first_tag + k for k, name in enumerate(config.objectives)}
        self.first_number = self.first_tag + len(config.objectives)
        self.size = self.first_number + self.numbers.vocab_size  # of the whole shared vocabulary
        self.span = 1 + self.numbers.length  # tag + digits, per objective

    def number_ids(self, number_tokens: torch.Tensor) -> torch.Tensor:
        return number_tokens + self.first_number


class RegressionLM(nn.Module):
    """T5 encoder–decoder plus a head over the digit tokens only (never over text pieces)."""

    def __init__(self, config: RLMConfig) -> None:
        super().__init__()
        self.config = config
        self.vocab = DecoderVocab(config)
        t5 = T5Config(
            vocab_size=self.vocab.size,
            d_model=config.d_model,
            d_kv=config.d_model // config.num_heads,
            d_ff=config.d_ff,
            num_layers=config.encoder_layers,
            num_decoder_layers=config.decoder_layers,
            num_heads=config.num_heads,
            dropout_rate=config.dropout,
            # T5 v1.1's gated GELU, its tanh form computed by torch's fused kernel: "gated-gelu" means the
            # same formula spelt in five tensor operations, 2.3x slower forward and backward on CPU
            feed_forward_proj="gated-gelu_pytorch_tanh",
            pad_token_id=config.text_pad_id,
            decoder_start_token_id=self.vocab.start,
            tie_word_embeddings=False,
        )
        self.t5 = T5Model(t5)
        self.head = nn.Linear(config.d_model, self.vocab.numbers.vocab_size, bias=False)  # digit logits

    # --- pieces used by training and inference -------------------------------------------------
    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if input_ids.shape[1] > self.config.max_input_tokens:
            raise ValueError(f"input of {input_ids.shape[1]} tokens exceeds max_input_tokens="
                             f"{self.config.max_input_tokens}")
        return self.t5.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def decoder_inputs(self, objectives: tuple[str, ...], targets: torch.Tensor) -> torch.Tensor:
        """Teacher-forcing sequence ``<start> <tag> d d d … <tag> d d d …`` minus its last token.

        ``targets`` holds digit ids (batch, objectives, length), -1 where the label is missing.
        """
        batch = targets.shape[0]
        digits = torch.where(targets >= 0, self.vocab.number_ids(targets.clamp(min=0)),
                             torch.full_like(targets, self.vocab.missing))
        tags = torch.tensor([self.vocab.tags[o] for o in objectives], device=targets.device)
        seq = torch.cat([tags.expand(batch, -1).unsqueeze(-1), digits], dim=-1).reshape(batch, -1)
        start = torch.full((batch, 1), self.vocab.start, dtype=seq.dtype, device=seq.device)
        return torch.cat([start, seq], dim=1)[:, :-1]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, objectives: tuple[str, ...],
                targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of the known digits (missing labels are masked out)."""
        return self.decoder_loss(self.encode(input_ids, attention_mask), attention_mask, objectives, targets)

    def decoder_loss(self, memory: torch.Tensor, attention_mask: torch.Tensor, objectives: tuple[str, ...],
                     targets: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` from encoder states already computed (``memory``, as :meth:`encode` returns):
        a fine-tune that leaves the encoder as it is encodes each text once, not once per step."""
        decoded = self.t5.decoder(input_ids=self.decoder_inputs(objectives, targets),
                                  encoder_hidden_states=memory, encoder_attention_mask=attention_mask)
        # (batch, K * span, d); within each objective's span, position 1 + j predicts digit j
        hidden = decoded.last_hidden_state
        hidden = hidden.reshape(targets.shape[0], len(objectives), self.vocab.span, -1)[:, :, 1:, :]
        logits = self.head(hidden)
        known = targets >= 0
        return nn.functional.cross_entropy(logits[known], targets[known])

    # --- new objectives ---------------------------------------------------------------------------
    def with_objectives(self, objectives: tuple[str, ...], *, renamed: dict[str, str] | None = None,
                        like: dict[str, str] | None = None) -> RegressionLM:
        """A copy whose decoder has a tag for each of ``objectives``: every weight is kept, a tag keeps
        its learned embedding (under its new name where ``renamed`` maps old name → new), and a new
        tag starts as the existing tag ``like`` names for it (a new accuracy column as the base's
        cross-space accuracy rank), else at the mean of the existing ones, i.e. as "some objective"
        the model already knows.

        This is how a pre-trained base model meets a table with columns it never saw.
        """
        renamed, like = dict(renamed or {}), dict(like or {})
        unknown = sorted(set(like.values()) - set(self.config.objectives))
        if unknown:
            raise ValueError(f"like: {unknown} are not tags of this model")
        current = {renamed.get(name, name): name for name in self.config.objectives}
        if len(current) != len(self.config.objectives):
            raise ValueError(f"renaming {renamed} makes two tags share a name")
        config = RLMConfig(**{**self.config.to_dict(), "objectives": tuple(objectives)})
        model = RegressionLM(config)
        state = {k: v for k, v in self.state_dict().items() if k not in _EMBEDDINGS}
        model.load_state_dict(state, strict=False)
        old, new = self.vocab, model.vocab
        with torch.no_grad():
            source, target = self.t5.shared.weight, model.t5.shared.weight
            target[: old.first_tag] = source[: old.first_tag]  # text pieces, <start>, <missing>
            target[new.first_number:] = source[old.first_number:]
            known = source[old.first_tag : old.first_number]
            for name, index in new.tags.items():
                if name in current:
                    target[index] = source[old.tags[current[name]]]
                elif name in like:
                    target[index] = source[old.tags[like[name]]]
                else:
                    target[index] = known.mean(0)
        model.train(self.training)
        return model

    def deepened(self, encoder_layers: int) -> RegressionLM:
        """A copy with ``encoder_layers`` encoder blocks that computes exactly what this model does: its
        own blocks evenly spread (3 of 6 at places 0, 2, 4), each new block's attention and feed-forward
        output projections at zero. A T5 block is residual, so a new one passes its input through until
        training moves it: a larger model that goes on from what this one reads, instead of relearning it.
        """
        old = self.config.encoder_layers
        if encoder_layers <= old:
            raise ValueError(f"encoder_layers {encoder_layers}: the model already has {old}")
        places = [round(k * encoder_layers / old) for k in range(old)]
        model = RegressionLM(replace(self.config, encoder_layers=encoder_layers))
        state = {}
        for name, value in self.state_dict().items():
            block = _ENCODER_BLOCK.match(name)
            state[f"t5.encoder.block.{places[int(block[1])]}.{block[2]}" if block else name] = value
        new = set(range(encoder_layers)) - set(places)
        missing, unexpected = model.load_state_dict(state, strict=False)  # new blocks keep fresh weights ...
        placed = [_ENCODER_BLOCK.match(name) for name in missing]  # only the new blocks' may be missing
        if unexpected or any(block is None or int(block[1]) not in new for block in placed):
            raise RuntimeError(f"deepening left weights unplaced: {unexpected or missing}")
        with torch.no_grad():
            for k in new:
                block = model.t5.encoder.block[k]  # ... but write nothing into the residual stream
                block.layer[0].SelfAttention.o.weight.zero_()
                block.layer[1].DenseReluDense.wo.weight.zero_()
        model.train(self.training)
        return model


#: A state-dict key of one encoder block: its index, and the rest of the name.
_ENCODER_BLOCK = re.compile(r"^t5\.encoder\.block\.(\d+)\.(.*)$")
#: State-dict keys of the shared vocabulary embedding (the encoder and decoder read the same tensor).
_EMBEDDINGS = ("t5.shared.weight", "t5.encoder.embed_tokens.weight", "t5.decoder.embed_tokens.weight")
