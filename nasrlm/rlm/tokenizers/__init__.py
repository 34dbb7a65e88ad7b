"""Tokenizers: a sentencepiece model learned on ONNX text (the input) and a digit format (the output)."""

from nasrlm.rlm.tokenizers._digits import DigitTokenizer
from nasrlm.rlm.tokenizers._onnx import OnnxTokenizer

__all__ = ["DigitTokenizer", "OnnxTokenizer"]
