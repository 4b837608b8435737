"""Attention's share of a GPT's forward FLOPs: the S² part (QKᵀ and AV) against the parts
linear in the sequence length (projections, MLP, LM head), from the per-layer counts."""

from __future__ import annotations

from dataclasses import dataclass

from .counter import flops_by_layer

#: The parts of a GPT's forward matmul FLOPs that an attention share compares.
GPT_FLOP_PARTS = ("QKᵀ + AV", "attention projections", "MLP", "LM head")


@dataclass(frozen=True)
class AttentionShare:
    """Where a GPT's forward matmul FLOPs go at one sequence length (what the explorer shows).

    ``parts`` maps each of :data:`GPT_FLOP_PARTS` to its FLOPs; ``share`` is QKᵀ + AV's
    fraction of the total; ``break_even`` is the sequence length at which QKᵀ + AV (∝ S²)
    equal the projections + MLP (∝ S): S · (projections + MLP) / (QKᵀ + AV), 6·d for a GPT.
    """

    seq_len: int
    d_model: int
    n_layer: int
    parts: dict[str, int]

    @property
    def total(self) -> int:
        """All forward matmul FLOPs: Σ parts."""
        return sum(self.parts.values())

    @property
    def share(self) -> float:
        """QKᵀ + AV's fraction of the forward matmul FLOPs."""
        return self.parts["QKᵀ + AV"] / self.total

    @property
    def break_even(self) -> float:
        """S · (projections + MLP) / (QKᵀ + AV): where the S² part catches up."""
        linear = self.parts["attention projections"] + self.parts["MLP"]
        return self.seq_len * linear / self.parts["QKᵀ + AV"]


def gpt_flop_parts(model, seq_len: int, batch: int = 1) -> dict[str, int]:
    """Sum the counted forward FLOPs of a GPT's report rows into :data:`GPT_FLOP_PARTS`."""
    parts = dict.fromkeys(GPT_FLOP_PARTS, 0)
    for row in flops_by_layer(model, (batch, seq_len)):
        if row.type == "MultiHeadAttention":
            parts["QKᵀ + AV"] += row.matmul
        elif row.type == "Linear":
            parts["attention projections" if ".attn." in row.name else "MLP"] += row.matmul
        elif row.type == "TiedLMHead":
            parts["LM head"] += row.matmul
        elif row.matmul:
            raise ValueError(f"{row.type} '{row.name}' does matmul work outside "
                             f"{GPT_FLOP_PARTS}")
    return parts


def attention_share(model, seq_len: int, batch: int = 1) -> AttentionShare:
    """:class:`AttentionShare` of a GPT-style ``model`` on ``batch`` sequences of ``seq_len``
    tokens, counted layer by layer (a shape-only model is enough)."""
    return AttentionShare(seq_len, model.config.d_model, model.config.n_layer,
                          gpt_flop_parts(model, seq_len, batch))


__all__ = ["GPT_FLOP_PARTS", "AttentionShare", "attention_share", "gpt_flop_parts"]
