"""Batched sampling of numbers from a :class:`~nasrlm.rlm.model.RegressionLM`.

Each input is encoded once and all its ``num_samples`` decoder rows advance together, one digit per
step, through :class:`_IncrementalDecoder`: the model's own T5 decoder weights, run with preallocated
key/value caches and with the samples of one input sharing its cross-attention keys and values.
Objective tags are fed, never sampled; digits are drawn from the head's distribution over the ten
digit tokens, and any digits make a valid number. Values to be *read* first (decoded greedily, once per
input, and then conditioned on) are decoded in the same pass, before the rows fan out to the samples.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional

from nasrlm.rlm.model import RegressionLM


def sample_scaled(model: RegressionLM, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  objectives: tuple[str, ...], num_samples: int, *, temperature: float = 1.0,
                  generator: torch.Generator | None = None,
                  given: tuple[tuple[str, ...], torch.Tensor] | None = None,
                  reads: tuple[str, ...] = (), memory: torch.Tensor | None = None) -> np.ndarray:
    """Decoded numbers in the model's scaled space, shape (batch, num_samples, len(objectives)).

    ``temperature=0`` decodes greedily (then all samples of an input are equal). ``given``, ``reads``
    and ``memory`` are passed on to :func:`sample_digits`.
    """
    digits = sample_digits(model, input_ids, attention_mask, objectives, num_samples,
                           temperature=temperature, generator=generator, given=given, reads=reads,
                           memory=memory)
    return model.vocab.numbers.decode_many(digits.cpu().numpy())


@torch.no_grad()
def sample_digits(model: RegressionLM, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  objectives: tuple[str, ...], num_samples: int, *, temperature: float = 1.0,
                  generator: torch.Generator | None = None,
                  given: tuple[tuple[str, ...], torch.Tensor] | None = None,
                  reads: tuple[str, ...] = (), memory: torch.Tensor | None = None) -> torch.Tensor:
    """Digit ids, shape (batch, num_samples, len(objectives), digits per number).

    ``given = (names, tokens)`` decodes conditioned on known values: their tags and digit ids
    (batch, len(names), digits) are fed first, as in training, and ``objectives`` are sampled after
    them — e.g. accuracy given the parameter count, which is free for every architecture.

    ``reads`` are decoded greedily after ``given``, one row per input shared by all its samples, and
    ``objectives`` are sampled conditioned on that reading (which is not returned): the same numbers
    as decoding ``reads`` with ``temperature=0`` and passing them as ``given``, with one encoding.

    ``memory``: the encoder's states of ``input_ids``, already computed (decoders that share an encoder
    decode from one encoding).
    """
    model.eval()
    vocab = model.vocab
    batch, length = input_ids.shape[0], vocab.numbers.length
    rows = batch * num_samples
    device = input_ids.device
    pending = torch.full((batch, 1), vocab.start, dtype=torch.long, device=device)  # not yet fed, per input
    if given is not None:
        names, tokens = given
        if tokens.shape != (batch, len(names), length):
            raise ValueError(f"given tokens have shape {tuple(tokens.shape)}, expected "
                             f"{(batch, len(names), length)}")
        tags = torch.tensor([vocab.tags[n] for n in names], dtype=torch.long, device=device)
        fed = vocab.number_ids(tokens.to(device))
        prefix = torch.cat([tags.expand(batch, -1)[..., None], fed], dim=-1)
        pending = torch.cat([pending, prefix.reshape(batch, -1)], dim=1)
    total = pending.shape[1] + (len(reads) + len(objectives)) * vocab.span - 1  # the last digit is never fed
    if memory is None:
        memory = model.encode(input_ids, attention_mask)
    decoder = _IncrementalDecoder(model, memory, attention_mask, num_samples, total)
    for name in reads:  # greedy, once per input: every sample's prefix stays the same
        pending = torch.cat([pending, torch.full((batch, 1), vocab.tags[name], dtype=torch.long,
                                                 device=device)], dim=1)
        for _ in range(length):
            token = model.head(decoder.feed(pending, shared=True)).argmax(dim=-1)
            pending = vocab.number_ids(token)[:, None]
    digits = torch.empty(rows, len(objectives), length, dtype=torch.long, device=device)
    for k, name in enumerate(objectives):
        tag = torch.full((len(pending), 1), vocab.tags[name], dtype=torch.long, device=device)
        pending = torch.cat([pending, tag], dim=1)
        for j in range(length):
            if len(pending) == batch:  # before the first sampled digit, every sample's prefix is the same
                hidden = decoder.feed(pending, shared=True).repeat_interleave(num_samples, dim=0)
            else:
                hidden = decoder.feed(pending)
            logits = model.head(hidden)
            if temperature == 0:
                token = logits.argmax(dim=-1)
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            digits[:, k, j] = token
            pending = vocab.number_ids(token)[:, None]
    return digits.reshape(batch, num_samples, len(objectives), length)


class _IncrementalDecoder:
    """``model.t5.decoder`` (eval mode) fed a few tokens at a time, shaped for many samples per input.

    Same weights and arithmetic as the Hugging Face stack — a test holds them equal — but built for
    this loop, where the generic stack spent most of its time on bookkeeping rather than arithmetic:

    - self-attention caches are preallocated for the whole sequence, position-major
      ``(position, row, d)``, so a step appends in place and reads one contiguous block, and one new
      token per row is scored with elementwise products rather than thousands of tiny matmuls;
    - the relative position bias (with the causal mask) is computed once, and the prefix every sample
      of an input shares (start, given values, first tag) is computed once per input;
    - the ``num_samples`` rows of one input attend to its encoder states as one group, so the
      cross-attention keys and values are projected once and never repeated.
    """

    def __init__(self, model: RegressionLM, memory: torch.Tensor, memory_mask: torch.Tensor,
                 num_samples: int, max_length: int) -> None:
        stack = model.t5.decoder
        self.stack = stack
        first = stack.block[0].layer[0].SelfAttention
        self.heads, self.head_dim = first.n_heads, first.key_value_proj_dim
        self.batch, self.samples = memory.shape[0], num_samples
        self.rows = self.batch * num_samples
        shape = (self.batch, memory.shape[1], self.heads, self.head_dim)
        self.cross = [(block.layer[1].EncDecAttention.k(memory).view(shape).transpose(1, 2),
                       block.layer[1].EncDecAttention.v(memory).view(shape).transpose(1, 2))
                      for block in stack.block]  # (batch, heads, source length, head_dim) per layer
        lowest = torch.finfo(memory.dtype).min
        self.cross_bias = torch.zeros(self.batch, 1, 1, memory.shape[1], dtype=memory.dtype,
                                      device=memory.device)
        self.cross_bias.masked_fill_(memory_mask[:, None, None, :] == 0, lowest)
        causal = torch.ones(max_length, max_length, dtype=torch.bool, device=memory.device).triu(1)
        self.self_bias = first.compute_bias(max_length, max_length)[0].masked_fill(causal, lowest)
        cache = (len(stack.block), max_length, self.rows, self.heads * self.head_dim)
        # (layer, position, row, heads × head_dim)
        self.keys = torch.zeros(cache, dtype=memory.dtype, device=memory.device)
        self.values = torch.zeros(cache, dtype=memory.dtype, device=memory.device)
        self.length = 0  # tokens fed so far
        self.diverged = False  # whether the samples of an input have been fed different tokens

    def feed(self, tokens: torch.Tensor, *, shared: bool = False) -> torch.Tensor:
        """Feed ``tokens`` (rows, t); the final hidden state at the last of them, (rows, d_model).

        ``shared=True`` feeds one row per input (batch, t), the same for all its samples: computed
        once, cached for every sample. Only possible while everything fed so far was shared.
        """
        t, start = tokens.shape[1], self.length
        end = start + t
        if end > self.keys.shape[1]:
            raise ValueError(f"feeding {t} token(s) after {start} exceeds the {self.keys.shape[1]} allocated")
        if shared and self.diverged:
            raise ValueError("a shared feed must come before any per-sample one")
        self.diverged |= not shared
        samples = 1 if shared else self.samples
        if tokens.shape[0] != self.batch * samples:
            raise ValueError(f"expected {self.batch * samples} rows, got {tokens.shape[0]}")
        hidden = self.stack.embed_tokens(tokens)
        for index, block in enumerate(self.stack.block):
            hidden = hidden + self._self_attention(block.layer[0], index, hidden, start, end)
            hidden = hidden + self._cross_attention(block.layer[1], index, hidden, samples)
            hidden = hidden + block.layer[2].DenseReluDense(block.layer[2].layer_norm(hidden))
        self.length = end
        return self.stack.final_layer_norm(hidden[:, -1])

    def _self_attention(self, layer, index: int, hidden: torch.Tensor, start: int, end: int) -> torch.Tensor:
        attention, normed = layer.SelfAttention, layer.layer_norm(hidden)
        rows, t, _ = hidden.shape
        if rows == self.rows:
            self.keys[index, start:end] = attention.k(normed).transpose(0, 1)
            self.values[index, start:end] = attention.v(normed).transpose(0, 1)
            keys, values = self.keys[index, :end], self.values[index, :end]
        else:  # shared: one row per input, written for all its samples, read from its first
            by_sample = (t, self.batch, self.samples, -1)
            self.keys[index, start:end].view(by_sample)[:] = attention.k(normed).transpose(0, 1)[:, :, None]
            self.values[index, start:end].view(by_sample)[:] = attention.v(normed).transpose(0, 1)[:, :, None]
            keys = self.keys[index, :end].view(end, self.batch, self.samples, -1)[:, :, 0]
            values = self.values[index, :end].view(end, self.batch, self.samples, -1)[:, :, 0]
        keys = keys.unflatten(-1, (self.heads, self.head_dim))
        values = values.unflatten(-1, (self.heads, self.head_dim))
        query = attention.q(normed).view(rows, t, self.heads, self.head_dim)
        bias = self.self_bias[:, start:end, :end]  # (heads, t, end); T5 folds the 1/sqrt(d) into init
        if t == 1:
            scores = (keys * query.transpose(0, 1)).sum(-1) + bias[:, 0].T[:, None]  # (end, rows, heads)
            out = (torch.softmax(scores, dim=0)[..., None] * values).sum(0)
        else:
            scores = torch.einsum("rihd,krhd->rhik", query, keys) + bias
            out = torch.einsum("rhik,krhd->rihd", torch.softmax(scores, dim=-1), values)
        return attention.o(out.reshape(rows, t, -1))

    def _cross_attention(self, layer, index: int, hidden: torch.Tensor, s: int) -> torch.Tensor:
        attention, normed = layer.EncDecAttention, layer.layer_norm(hidden)
        rows, t, _ = hidden.shape
        b, heads, head_dim = self.batch, self.heads, self.head_dim
        query = attention.q(normed).view(b, s, t, heads, head_dim).permute(0, 3, 1, 2, 4)
        keys, values = self.cross[index]
        out = functional.scaled_dot_product_attention(query.reshape(b, heads, s * t, head_dim), keys, values,
                                                      attn_mask=self.cross_bias, scale=1.0)
        out = out.view(b, heads, s, t, head_dim).permute(0, 2, 3, 1, 4)
        return attention.o(out.reshape(rows, t, -1))
