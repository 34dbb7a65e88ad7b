r"""Lossless sentencepiece tokenizer for canonical ONNX text.

The regression model reads the canonical text of an architecture (~4,000 characters for NAS-Bench-201),
so the number of tokens per architecture is the main lever on training speed. Canonical ONNX text is
mostly boilerplate repeated in every model (the same local functions, one statement per line), which a
BPE model with *long* pieces (spanning spaces and line ends) swallows whole, while a *small* vocabulary
keeps the parts that differ between architectures at about one piece per statement, e.g.
``"▁=▁nb201.rcb3_16▁(t0"`` and ``")\nt3▁=▁Add▁(t1,t2"``. With the defaults (BPE, pieces of up to 256
characters, 1,024 pieces per search space, 1,000 samples per space) an NB201 architecture is ~43 tokens,
against ~3,400 for the byte-level tokenizer of the published RLM; one space's longer texts get more
pieces (:data:`TARGET_TOKENS`). A larger vocabulary barely shortens
that further but spends its extra pieces on rare combinations of statements, each seen by few
architectures (whose embeddings few labels train). ``experiments/tokenizer_stats.py`` measures this.

Lossless by construction: ``decode(encode(text)) == text`` for every string (lone surrogates, which are
not encodable as UTF-8, raise ``UnicodeEncodeError``). The model uses identity normalisation, keeps all
whitespace (no dummy prefix, no collapsing), keeps ``"\n"`` as an ordinary character (sentencepiece
0.2 does so with identity normalisation when trained from an iterator), and falls back to UTF-8 bytes for
characters never seen in training. The one character sentencepiece cannot round-trip is its own
whitespace marker ``"▁"`` (U+2581), which it decodes to a space; it is escaped before encoding (see
:func:`_escape`).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

from nasrlm._files import keep_file

__all__ = ["OnnxTokenizer"]

#: Sentencepiece's whitespace marker: it encodes " " as this and decodes this as " ".
_WS = "\u2581"
#: Escape character (Supplementary Private Use Area-A). ``ESC ESC`` stands for ``ESC``, ``ESC w`` for ``▁``.
_ESC = "\U000f0000"
_UNESCAPE = re.compile(_ESC + "(.)", re.DOTALL)
_UNESCAPED = {_ESC: _ESC, "w": _WS}

PAD_ID, UNK_ID, EOS_ID = 0, 1, 2

#: Trainer options that losslessness or the fixed special ids depend on; ``train`` refuses to change them.
_FIXED_OPTIONS: dict[str, Any] = {
    "normalization_rule_name": "identity",  # no NFKC: every character stays as written
    "remove_extra_whitespaces": False,  # keep repeated, leading and trailing spaces
    "add_dummy_prefix": False,  # no space added in front of the text
    "byte_fallback": True,  # unseen characters become UTF-8 byte pieces, never <unk>
    "pad_id": PAD_ID,
    "unk_id": UNK_ID,
    "eos_id": EOS_ID,
    "bos_id": -1,
}
_RESERVED = {"input", "model_prefix", "sentence_iterator", "model_writer", "model_file"}

#: Defaults chosen with ``experiments/tokenizer_stats.py`` (experiments/README.md); each can be overridden.
_DEFAULT_OPTIONS: dict[str, Any] = {
    "model_type": "bpe",  # unigram: 5x longer sequences and 10x slower training here
    "max_sentencepiece_length": 256,  # NB201: 43 tokens; 64: 100, 512: 33 (the most sentencepiece allows)
    "split_by_whitespace": False,  # pieces may span spaces ...
    "split_by_unicode_script": False,  # ... letters, digits and punctuation ...
    "split_by_number": False,
    "split_digits": False,  # (True: ~1,150 tokens per NB201 architecture instead of ~43)
    "allow_whitespace_only_pieces": True,
    "treat_whitespace_as_suffix": False,
    "character_coverage": 1.0,  # every character seen in training gets its own piece
    "hard_vocab_limit": False,  # a small corpus yields a smaller vocabulary instead of an error
    "num_threads": 1,  # deterministic
    "input_sentence_size": 0,  # use every text: no random subsampling
    "shuffle_input_sentence": False,
    "minloglevel": 2,  # quiet
}

#: Pieces per search space (256 of them are bytes): NB201 has its knee here (median tokens 768: 176,
#: 896: 70, 1,024: 43, 1,280: 31, 2,048: 26), and beyond it the extra pieces are rare ones.
DEFAULT_VOCAB_SIZE = 1024
#: Upper bound of the default vocabulary of :meth:`OnnxTokenizer.train_on_spaces`, however many spaces,
#: and of the vocabulary :meth:`OnnxTokenizer.train` grows to by default.
MAX_DEFAULT_VOCAB_SIZE = 8192
#: :meth:`OnnxTokenizer.train`'s default vocabulary grows (doubling from :data:`DEFAULT_VOCAB_SIZE`) until
#: the median text is at most this many tokens: spaces of long texts (OFA, FBNet: 12,000-17,000
#: characters, ~440 tokens with 1,024 pieces, ~90 with 2,048) need more pieces than NB201's knee.
TARGET_TOKENS = 128
#: 100 per space: 16 spaces train in ~18 s on two cores (1,000: ~4 min) for 2-4 % longer NB201 texts.
DEFAULT_SAMPLES_PER_SPACE = 100


def _escape(text: str) -> str:
    """Make ``text`` free of ``▁`` (which sentencepiece would decode as a space), reversibly."""
    if _WS not in text and _ESC not in text:
        return text
    return text.replace(_ESC, _ESC + _ESC).replace(_WS, _ESC + "w")


def _unescape(text: str) -> str:
    if _ESC not in text:
        return text
    return _UNESCAPE.sub(lambda m: _UNESCAPED.get(m.group(1), m.group(0)), text)


def _distinct_characters(escaped: Iterable[str]) -> int:
    return len(set().union(*map(set, escaped)))


def _least_vocab_size(chars: int) -> int:
    """Pieces a vocabulary needs at least: the specials, the 256 bytes, one per character seen."""
    return 3 + 256 + chars


def _check_utf8(texts: Iterable[str]) -> None:
    """Raise ``UnicodeEncodeError`` (not sentencepiece's opaque ``RuntimeError``) for e.g. lone surrogates."""
    for text in texts:
        text.encode("utf-8")


#: Checked on every loaded model: a model trained with other normalisation options fails it.
_PROBE = "<a:  \"b\">\n\tx = f (y,z)\r\n  \u2581 \u00e9\u6f22\U0001f642 \x00"


#: serialized models learned by :meth:`OnnxTokenizer.train_on_spaces` in this process, by arguments
_TRAINED_ON_SPACES: dict[tuple, bytes] = {}


def _kept_file(spaces: Sequence[Any], arguments: tuple) -> Path | None:
    """Where :meth:`OnnxTokenizer.train_on_spaces` keeps the model it learned with ``arguments`` on
    ``spaces``, in the label cache's folder (None where that cache is off). The name hashes each space's
    fingerprint (its class's source and one canonical text, as the label cache keys it), the arguments,
    sentencepiece's version and this file: a change to any of them learns anew."""
    from nasrlm.label_cache import default_cache_dir, space_key  # lazy, like search_spaces

    folder = default_cache_dir()
    if folder is None:
        return None
    digest = hashlib.sha256(repr((sorted(space_key(s) for s in spaces), arguments, spm.__version__)).encode())
    digest.update(Path(__file__).read_bytes())
    return folder / "tokenizers" / f"onnx_{digest.hexdigest()[:20]}.model"


def _read_kept(path: Path | None) -> bytes | None:
    """The kept model's bytes, if it is there and loads as a lossless tokenizer."""
    if path is None:
        return None
    try:
        data = path.read_bytes()
        OnnxTokenizer.from_bytes(data)
    except (OSError, RuntimeError, ValueError):
        return None
    return data


class OnnxTokenizer:
    """A sentencepiece model over canonical ONNX text, lossless on any string.

    Special ids: :attr:`pad_id` = 0, :attr:`unk_id` = 1 (never produced by :meth:`encode`, thanks to byte
    fallback), :attr:`eos_id` = 2; then the 256 byte pieces, then the learned pieces. No BOS.
    """

    pad_id: int = PAD_ID
    unk_id: int = UNK_ID
    eos_id: int = EOS_ID

    def __init__(self, processor: spm.SentencePieceProcessor) -> None:
        self._sp = processor
        if (processor.pad_id(), processor.unk_id(), processor.eos_id()) != (PAD_ID, UNK_ID, EOS_ID):
            raise ValueError(
                "sentencepiece model has special ids "
                f"pad={processor.pad_id()} unk={processor.unk_id()} eos={processor.eos_id()}, "
                f"expected pad={PAD_ID} unk={UNK_ID} eos={EOS_ID}"
            )
        if self.decode(self.encode(_PROBE)) != _PROBE:
            raise ValueError("sentencepiece model is not lossless (it must use identity normalisation, "
                             "keep whitespace and use byte fallback): train it with OnnxTokenizer.train")

    # --- training -----------------------------------------------------------------------------
    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int | None = None, *, seed: int = 0,
              **options: Any) -> OnnxTokenizer:
        """Learn a tokenizer from ``texts``, in memory.

        ``vocab_size`` ``None`` (the default): the smallest of :data:`DEFAULT_VOCAB_SIZE`, twice,
        four times ... that many pieces (up to :data:`MAX_DEFAULT_VOCAB_SIZE`) that encodes the median
        text in at most :data:`TARGET_TOKENS` tokens, so that one space's long texts do not make every
        step of the model that reads them several times slower.

        Deterministic: the same texts (in the same order) and options give a byte-identical model.
        ``options`` are sentencepiece trainer options overriding the defaults, e.g.
        ``max_sentencepiece_length=128`` or ``model_type="unigram"``; options that losslessness depends
        on cannot be changed. ``vocab_size`` is an upper bound: with ``hard_vocab_limit=False`` (default)
        a corpus too small for it yields fewer pieces (see :attr:`vocab_size`). ``seed`` seeds
        sentencepiece's random generator (only used by options that sample, e.g. ``input_sentence_size``).
        """
        if vocab_size is None:
            return cls._train_to_target(list(texts), seed=seed, **options)
        texts = [_escape(t) for t in texts]
        if not texts:
            raise ValueError("cannot train a tokenizer on no texts")
        for key in options:
            if key in _FIXED_OPTIONS or key in _RESERVED:
                raise ValueError(f"trainer option {key!r} is fixed by OnnxTokenizer and cannot be set")
        longest = max(len(t.encode("utf-8")) for t in texts)
        chars = _distinct_characters(texts)
        smallest = _least_vocab_size(chars)
        if vocab_size < smallest:
            raise ValueError(f"vocab_size {vocab_size} is too small: the texts have {chars} distinct "
                             f"characters, which with the 3 special and 256 byte pieces need {smallest}")
        kwargs = {**_DEFAULT_OPTIONS, **_FIXED_OPTIONS, **options, "vocab_size": int(vocab_size)}
        # sentencepiece silently drops training sentences longer than this (default 4,192 bytes).
        kwargs["max_sentence_length"] = max(int(kwargs.get("max_sentence_length", 4192)), longest + 1)
        spm.set_random_generator_seed(int(seed))
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=model, **kwargs)
        return cls.from_bytes(model.getvalue())

    @classmethod
    def _train_to_target(cls, texts: list[str], *, seed: int, **options: Any) -> OnnxTokenizer:
        """``train`` with the vocabulary grown until the median text fits :data:`TARGET_TOKENS`."""
        least = _least_vocab_size(_distinct_characters(_escape(t) for t in texts))
        size = DEFAULT_VOCAB_SIZE
        while size < least:  # train refuses fewer pieces than characters seen
            size *= 2
        probe = texts[:: max(1, len(texts) // 200)]  # about 200 texts say where the median lies
        while True:
            tokenizer = cls.train(texts, size, seed=seed, **options)
            if size >= MAX_DEFAULT_VOCAB_SIZE or tokenizer.vocab_size < size:  # no more pieces to learn
                return tokenizer
            lengths = sorted(len(tokenizer.encode(t)) for t in probe)
            if lengths[len(lengths) // 2] <= TARGET_TOKENS:
                return tokenizer
            size *= 2

    @classmethod
    def train_on_spaces(cls, spaces: Sequence[str] | None = None,
                        samples_per_space: int = DEFAULT_SAMPLES_PER_SPACE,
                        vocab_size: int | None = None, seed: int = 0, **options: Any) -> OnnxTokenizer:
        """Train on ``samples_per_space`` random architectures of each space (all registered by default).

        The texts are those of ``space.sample_ids(samples_per_space, seed)`` for each space in sorted name
        order, so the result is reproducible from ``seed``. ``vocab_size`` defaults to
        :data:`DEFAULT_VOCAB_SIZE` pieces per space, at most :data:`MAX_DEFAULT_VOCAB_SIZE`. The model is
        learned once per process and kept in the label cache's folder (``$NASRLM_CACHE``, see
        :mod:`nasrlm.label_cache`) for later processes.
        """
        import search_spaces  # lazy: keeps encode/decode free of the ONNX stack

        names = sorted(set(search_spaces.available_spaces() if spaces is None else spaces))
        if not names:
            raise ValueError("no search spaces to train on")
        # the same spaces (by class), sizes and seed give the same model: learn it once per process, and
        # keep it in the cache folder for the next (all 25 built-in spaces took 33 s on two shared cores,
        # mostly exporting their samples)
        built = {name: search_spaces.get_space(name) for name in names}
        spaces_by_class = tuple((name, type(space).__qualname__) for name, space in built.items())
        key = (spaces_by_class, samples_per_space, vocab_size, seed, repr(sorted(options.items())))
        if key not in _TRAINED_ON_SPACES:
            kept = _kept_file(list(built.values()), key[1:])
            learned = _read_kept(kept)
            if learned is None:
                texts: list[str] = []
                for space in built.values():
                    ids = space.sample_ids(samples_per_space, seed=seed)
                    texts.extend(space.to_text(space.parse(i)) for i in ids)
                size = vocab_size or min(MAX_DEFAULT_VOCAB_SIZE, DEFAULT_VOCAB_SIZE * len(names))
                learned = cls.train(texts, size, seed=seed, **options).to_bytes()
                if kept is not None:
                    keep_file(kept, learned)
            _TRAINED_ON_SPACES[key] = learned
        return cls.from_bytes(_TRAINED_ON_SPACES[key])

    # --- encoding -----------------------------------------------------------------------------
    def encode(self, text: str, add_eos: bool = False) -> list[int]:
        """Token ids of ``text`` (no EOS unless ``add_eos``)."""
        try:
            return self._sp.encode(_escape(text), add_eos=add_eos)
        except RuntimeError:
            _check_utf8([text])
            raise

    def encode_batch(self, texts: Sequence[str], add_eos: bool = False) -> list[list[int]]:
        """``[encode(t) for t in texts]``, on all cores."""
        escaped = [_escape(t) for t in texts]
        try:
            return self._sp.encode(escaped, add_eos=add_eos, num_threads=os.cpu_count() or 1)
        except RuntimeError:
            _check_utf8(texts)
            raise

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``; padding and EOS ids decode to nothing."""
        return _unescape(self._sp.decode([int(i) for i in ids]))

    def pieces(self, text: str) -> list[str]:
        """The pieces of ``text`` as strings (for inspection; spaces appear as ``▁``)."""
        return [self._sp.id_to_piece(i) for i in self.encode(text)]

    def id_to_piece(self, token_id: int) -> str:
        return self._sp.id_to_piece(int(token_id))

    @property
    def vocab_size(self) -> int:
        """Number of ids; every id produced by :meth:`encode` is in ``range(vocab_size)``."""
        return self._sp.get_piece_size()

    # --- serialisation ------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The serialized sentencepiece ``ModelProto`` (loadable by any sentencepiece)."""
        return self._sp.serialized_model_proto()

    @classmethod
    def from_bytes(cls, data: bytes) -> OnnxTokenizer:
        return cls(spm.SentencePieceProcessor(model_proto=bytes(data)))

    def save(self, path: str | os.PathLike[str]) -> None:
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> OnnxTokenizer:
        return cls.from_bytes(Path(path).read_bytes())

    def __reduce__(self) -> tuple[Any, ...]:  # picklable, e.g. for DataLoader workers
        return (type(self).from_bytes, (self.to_bytes(),))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OnnxTokenizer) and self.to_bytes() == other.to_bytes()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"
