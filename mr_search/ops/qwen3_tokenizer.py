"""Qwen3's token layout and chat template for locally built tokenizers (docs/qwen3.md#thinking-tokens)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

# Qwen3's BPE size: the first added token's id.
BPE_SIZE: Final = 151643
# (content, special) at ids BPE_SIZE, BPE_SIZE + 1, ... (Qwen3's tokenizer_config.json added_tokens_decoder).
ADDED_TOKENS: Final[tuple[tuple[str, bool], ...]] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
THINK_ID: Final = BPE_SIZE + [c for c, _ in ADDED_TOKENS].index("<think>")  # 151667
THINK_END_ID: Final = THINK_ID + 1  # 151668
# Qwen3's additional_special_tokens (what all_special_ids holds beside eos and pad).
ADDITIONAL_SPECIAL: Final = tuple(c for c, special in ADDED_TOKENS if special and c != "<|endoftext|>")

# Qwen3's chat template, in its semantics: reasoning rendered only after the last user query, and
# ``enable_thinking=false`` closing an empty thinking block in the generation prompt.
CHAT_TEMPLATE: Final = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n" }}
    {{- "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within " }}
    {{- "<tool_call></tool_call> XML tags:\\n<tool_call>\\n" }}
    {{- '{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string
        and not (message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- set content = message.content if message.content is string else '' %}
    {%- if message.role == "user" or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- elif '</think>' in content %}
            {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index and (loop.last or reasoning_content) %}
            {{- '<|im_start|>assistant\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' }}
            {{- content.lstrip('\\n') }}
        {%- else %}
            {{- '<|im_start|>assistant\\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}{{- '\\n' }}{%- endif %}
                {%- set call = tool_call.function if tool_call.function else tool_call %}
                {{- '<tool_call>\\n{"name": "' + call.name + '", "arguments": ' }}
                {{- call.arguments if call.arguments is string else call.arguments | tojson }}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or messages[loop.index0 - 1].role != "tool" %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != "tool" %}{{- '<|im_end|>\\n' }}{%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}
"""


def to_qwen3_layout(data: dict[str, Any]) -> None:
    """Rewrites a parsed BPE tokenizer.json into Qwen3's id layout, in place (ValueError if not BPE or too large)."""
    from mr_search.ops.shaped_model import PAD_TOKEN_FORMAT

    model = data.get("model") or {}
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise ValueError("only a BPE tokenizer.json (model.type BPE with a vocab) can take Qwen3's layout")
    added = {content for content, _ in ADDED_TOKENS}
    kept = [token for token, _ in sorted(model["vocab"].items(), key=lambda item: item[1]) if token not in added]
    if len(kept) > BPE_SIZE:
        raise ValueError(f"the BPE has {len(kept)} entries, more than Qwen3's {BPE_SIZE}")
    vocab = {token: i for i, token in enumerate(kept)}
    for i in range(len(kept), BPE_SIZE):
        vocab[PAD_TOKEN_FORMAT.format(i)] = i
    data["added_tokens"] = []
    for offset, (content, special) in enumerate(ADDED_TOKENS):
        vocab[content] = BPE_SIZE + offset
        data["added_tokens"].append(
            {
                "id": BPE_SIZE + offset,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": special,
            }
        )
    model["vocab"] = vocab


def protocol_tokenizer(out: str | Path, bpe_size: int = 1024) -> Path:
    """Saves a BPE of the protocol's texts in Qwen3's layout and template (151,669 ids) to ``out``."""
    from transformers import PreTrainedTokenizerFast

    from mr_search.cpu.chatml_tokenizer import train_chatml_bpe
    from mr_search.ops.shaped_model import protocol_texts

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    bpe = train_chatml_bpe(protocol_texts() * 4, bpe_size)
    data = json.loads(bpe.backend_tokenizer.to_str())
    to_qwen3_layout(data)
    path = out / "tokenizer.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    fast = PreTrainedTokenizerFast(
        tokenizer_file=str(path),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=list(ADDITIONAL_SPECIAL),
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return out
