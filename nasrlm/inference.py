"""Batched, constrained sampling of numbers from a :class:`~nasrlm.model.RegressionLM`.

Each input is encoded once; its encoder states are repeated for ``num_samples`` decoder rows, and all
rows advance together one digit per step with a key/value cache, so the cost per step is one small
decoder call for the whole batch. Objective tags are fed, never sampled; digits are drawn from the
positionally masked distribution, so every row decodes to valid numbers.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from nasrlm.model import RegressionLM


def sample_scaled(model: RegressionLM, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  objectives: tuple[str, ...], num_samples: int, *, temperature: float = 1.0,
                  generator: torch.Generator | None = None,
                  given: tuple[tuple[str, ...], torch.Tensor] | None = None) -> np.ndarray:
    """Decoded numbers in the model's scaled space, shape (batch, num_samples, len(objectives)).

    ``temperature=0`` decodes greedily (then all samples of an input are equal). ``given`` is passed
    on to :func:`sample_digits`.
    """
    digits = sample_digits(model, input_ids, attention_mask, objectives, num_samples,
                           temperature=temperature, generator=generator, given=given)
    return model.vocab.numbers.decode_many(digits.numpy())


@torch.no_grad()
def sample_digits(model: RegressionLM, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  objectives: tuple[str, ...], num_samples: int, *, temperature: float = 1.0,
                  generator: torch.Generator | None = None,
                  given: tuple[tuple[str, ...], torch.Tensor] | None = None) -> torch.Tensor:
    """Number-token ids, shape (batch, num_samples, len(objectives), digits per number).

    ``given = (names, tokens)`` decodes conditioned on known values: their tags and number tokens
    (batch, len(names), digits) are fed first, as in training, and ``objectives`` are sampled after
    them — e.g. accuracy given the parameter count, which is free for every architecture.
    """
    model.eval()
    vocab = model.vocab
    batch, length = input_ids.shape[0], vocab.numbers.length
    rows = batch * num_samples
    memory = model.encode(input_ids, attention_mask)
    memory_mask = attention_mask.repeat_interleave(num_samples, dim=0)
    cache = _prefilled_cache(model, memory, num_samples)
    memory = memory[:1].expand(rows, -1, -1)  # only marks cross-attention: its keys/values are cached
    digits = torch.empty(rows, len(objectives), length, dtype=torch.long)
    pending = torch.full((rows, 1), vocab.start, dtype=torch.long)  # tokens not yet fed
    if given is not None:
        names, tokens = given
        if tokens.shape != (batch, len(names), length):
            raise ValueError(f"given tokens have shape {tuple(tokens.shape)}, expected "
                             f"{(batch, len(names), length)}")
        tags = torch.tensor([vocab.tags[n] for n in names], dtype=torch.long)
        prefix = torch.cat([tags.expand(batch, -1)[..., None], vocab.number_ids(tokens)], dim=-1)
        pending = torch.cat([pending, prefix.reshape(batch, -1).repeat_interleave(num_samples, dim=0)], dim=1)
    for k, name in enumerate(objectives):
        tag = torch.full((rows, 1), vocab.tags[name], dtype=torch.long)
        pending = torch.cat([pending, tag], dim=1)
        for j in range(length):
            out = model.t5.decoder(input_ids=pending, encoder_hidden_states=memory,
                                   encoder_attention_mask=memory_mask, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits = model.digit_logits(out.last_hidden_state[:, -1], j)
            if temperature == 0:
                token = logits.argmax(dim=-1)
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            digits[:, k, j] = token
            pending = vocab.number_ids(token)[:, None]
    return digits.reshape(batch, num_samples, len(objectives), length)


def _prefilled_cache(model: RegressionLM, memory: torch.Tensor, num_samples: int) -> EncoderDecoderCache:
    """A cache whose cross-attention keys/values are projected once per input, then shared by its samples.

    Projecting the repeated encoder states instead would cost ``num_samples`` times as much and
    dominated decoding time.
    """
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    batch, length, _ = memory.shape
    for index, block in enumerate(model.t5.decoder.block):
        attention = block.layer[1].EncDecAttention
        shape = (batch, length, attention.n_heads, attention.key_value_proj_dim)
        keys = attention.k(memory).view(shape).transpose(1, 2).repeat_interleave(num_samples, dim=0)
        values = attention.v(memory).view(shape).transpose(1, 2).repeat_interleave(num_samples, dim=0)
        cache.cross_attention_cache.update(keys, values, index)
        cache.is_updated[index] = True
    return cache
