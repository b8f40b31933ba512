"""Padding-free encoder forward on CPU: the texts of a batch run as ONE token sequence.

Every matrix product of a BERT layer (the projections and the feed-forward, nearly all of its work) acts on each
token alone, so they run over the concatenated tokens of all texts: no padded position is computed. Only the
attention needs the texts apart; it gathers each text's rows into a padded `[texts, heads, longest, head_dim]`
block (cheap: no weights), masks the padded keys and scatters the outputs back. Queries of 10-16 tokens padded to
the longest of a batch waste ~20% of the products otherwise, and a small batch (what a server's lane often gets)
wastes the most: packed, a query costs the same in any batch.

Used by `HFEncoder` on CPU for BERT-family models (`packable`); results equal the padded forward's to float
rounding (tests/retrieval/test_packed.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

PACKED_ATTENTION = "mr_search_packed"
# Model types whose forward takes per-token position ids as they are (BERT's absolute positions). RoBERTa-style
# models derive positions from the padding index and are left on the padded path.
PACKABLE_MODEL_TYPES = ("bert",)
_PACK_KWARG = "mr_search_pack"
PACKED_POOLINGS = ("mean", "cls")  # poolings `packed_forward` computes ("pooler" needs the model's pooler head)


def _attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: `[1, heads, tokens, head_dim]` packed in, `[1, tokens, heads, head_dim]`
    out; a call without packing information (a padded batch) goes to SDPA as before."""
    pack = kwargs.pop(_PACK_KWARG, None)
    if pack is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    gather, valid, key_mask = pack

    def unpack(x: torch.Tensor) -> torch.Tensor:  # [1, h, N, d] -> [texts, h, longest, d], float32
        return x[0].transpose(0, 1)[gather].transpose(1, 2).float()

    # float32: torch's CPU attention kernel takes twice as long on bf16 inputs of these small shapes.
    out = torch.nn.functional.scaled_dot_product_attention(
        unpack(query), unpack(key), unpack(value), attn_mask=key_mask, scale=kwargs.get("scaling")
    )
    return out.transpose(1, 2)[valid].unsqueeze(0).to(query.dtype), None


def packable(model: torch.nn.Module) -> bool:
    """Whether `packed_forward` computes what the model's own padded forward does."""
    config = model.config
    return (
        config.model_type in PACKABLE_MODEL_TYPES
        and getattr(config, "position_embedding_type", "absolute") == "absolute"
        and not getattr(config, "is_decoder", False)
    )


def enable_packing(model: torch.nn.Module) -> None:
    """Route the model's attention through `_attention` (padded calls behave as with SDPA)."""
    from transformers import AttentionInterface, AttentionMaskInterface

    if not packable(model):
        raise ValueError(
            f"model type {model.config.model_type!r} cannot run packed (supported: {', '.join(PACKABLE_MODEL_TYPES)} "
            "with absolute positions); use the padded forward"
        )
    AttentionInterface.register(PACKED_ATTENTION, _attention)
    # Padded calls get SDPA's mask (transformers builds masks per attention implementation; without this entry a
    # padded batch would get no usable mask and its padding would leak into the embeddings).
    AttentionMaskInterface.register(PACKED_ATTENTION, AttentionMaskInterface._global_mapping["sdpa"])
    model.set_attn_implementation(PACKED_ATTENTION)
    if model.config._attn_implementation != PACKED_ATTENTION:  # transformers only logs a warning when it refuses
        raise RuntimeError(
            f"{type(model).__name__} did not take the attention implementation {PACKED_ATTENTION!r} (it is "
            f"{model.config._attn_implementation!r}); this transformers version may have changed its attention "
            "interface: set EncoderConfig(cpu_packed=False)"
        )


def packed_forward(model: torch.nn.Module, token_ids: Sequence[Sequence[int]], pooling: str) -> torch.Tensor:
    """float32 `[texts, hidden]` embeddings (pooled, not normalised) of tokenized texts, run as one sequence.

    `pooling`: "mean" over each text's tokens or "cls" (its first token). The model must have been through
    `enable_packing`."""
    if pooling not in PACKED_POOLINGS:
        raise ValueError(f"packed_forward pools 'mean' or 'cls', got {pooling!r}; use the padded forward")
    lengths = torch.tensor([len(t) for t in token_ids])
    if not len(lengths) or int(lengths.min()) < 1:
        raise ValueError("packed_forward needs at least one text, each of at least one token")
    count, longest = len(lengths), int(lengths.max())
    flat = torch.from_numpy(np.concatenate([np.asarray(t, dtype=np.int64) for t in token_ids]))[None]
    starts = torch.cumsum(lengths, 0) - lengths
    steps = torch.arange(longest)
    valid = steps[None, :] < lengths[:, None]  # [texts, longest]
    positions = steps.expand(count, -1)[valid][None]  # each text's own 0, 1, 2, ... in the packed order
    gather = (starts[:, None] + steps[None, :]).clamp(max=flat.shape[1] - 1)  # padded slots read any row: masked
    out = model(
        input_ids=flat,
        position_ids=positions,
        token_type_ids=torch.zeros_like(flat),
        **{_PACK_KWARG: (gather, valid, valid[:, None, None, :])},
    )
    hidden = out.last_hidden_state[0].float()  # [tokens, hidden]
    if pooling == "cls":
        return hidden[starts]
    text_of_token = torch.repeat_interleave(torch.arange(count), lengths)
    sums = torch.zeros(count, hidden.shape[1]).index_add_(0, text_of_token, hidden)
    return sums / lengths[:, None].to(sums.dtype)
