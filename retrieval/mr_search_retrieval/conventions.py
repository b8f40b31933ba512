"""Encoder conventions (prefixes, pooling, normalisation) of an index built elsewhere: from flags, the encoder
folder's sentence-transformers config, or its name (the rules FlashRAG and Search-R1 encode wiki-18 with)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, fields
from pathlib import Path

logger = logging.getLogger(__name__)

BGE_QUERY = "Represent this sentence for searching relevant passages: "


@dataclass(frozen=True)
class Conventions:
    """What turns a text into the vector an index holds; None = not known from this source."""

    query_prefix: str | None = None
    passage_prefix: str | None = None
    pooling: str | None = None
    normalize: bool | None = None

    def over(self, other: Conventions) -> Conventions:
        """These values, with `other`'s where these are unknown."""
        return Conventions(
            **{f.name: v if (v := getattr(self, f.name)) is not None else getattr(other, f.name) for f in fields(self)}
        )

    def known(self) -> dict[str, str | bool]:
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}


# FlashRAG's defaults for any other encoder (Search-R1's retrieval server is FlashRAG's): no prefix, mean pooling,
# L2 normalisation.
FLASHRAG_DEFAULT = Conventions(query_prefix="", passage_prefix="", pooling="mean", normalize=True)


def from_name(name: str) -> Conventions:
    """FlashRAG's per-model rules, matched on the folder's name (e5-base-v2, bge-large-en-v1.5, dpr-..., ...)."""
    name = name.lower()
    if "e5" in name:
        return Conventions("query: ", "passage: ", "mean", True)
    if "bge" in name:
        return Conventions(BGE_QUERY, "", "cls", True)
    if "dpr" in name:
        return Conventions("", "", "pooler", False)
    if "contriever" in name:
        return Conventions("", "", "mean", True)
    return Conventions()


def from_sentence_transformers(model_dir: Path) -> Conventions:
    """Pooling and normalisation from modules.json + its Pooling module's config; prompts from
    config_sentence_transformers.json. Empty when the folder is not a sentence-transformers one."""
    modules_file = model_dir / "modules.json"
    if not modules_file.is_file():
        return Conventions()
    try:
        modules = json.loads(modules_file.read_text())
        types = [str(m.get("type", "")) for m in modules]
        pooling = None
        for m in modules:
            if str(m.get("type", "")).endswith("Pooling"):
                cfg = json.loads((model_dir / m.get("path", "") / "config.json").read_text())
                pooling = _pooling_mode(cfg, model_dir / m.get("path", "") / "config.json")
        prompts = {}
        st_config = model_dir / "config_sentence_transformers.json"
        if st_config.is_file():
            prompts = json.loads(st_config.read_text()).get("prompts") or {}
    except (OSError, json.JSONDecodeError, AttributeError) as err:
        raise ValueError(
            f"sentence-transformers config in {model_dir} is unreadable ({err}); pass --pooling and --normalize"
        ) from err
    passage = prompts.get("passage", prompts.get("document"))
    return Conventions(
        query_prefix=prompts.get("query"),
        passage_prefix=passage,
        pooling=pooling,
        normalize=any(t.endswith("Normalize") for t in types),
    )


def _pooling_mode(cfg: dict, path: Path) -> str:
    if cfg.get("pooling_mode_mean_tokens"):
        return "mean"
    if cfg.get("pooling_mode_cls_token"):
        return "cls"
    modes = [k for k, v in cfg.items() if k.startswith("pooling_mode") and v]
    raise ValueError(f"pooling {modes} of {path} is not supported (mean or cls); pass --pooling mean|cls|pooler")


def infer(model_dir: Path, flags: Conventions) -> Conventions:
    """Flags first, then the folder's sentence-transformers config, then its name, then FlashRAG's defaults."""
    name = model_dir.name if model_dir.name != "model" else model_dir.parent.name
    st, by_name = from_sentence_transformers(model_dir), from_name(name)
    result = flags.over(st).over(by_name).over(FLASHRAG_DEFAULT)
    layers = [("flag", flags), ("sentence-transformers config", st), (f"name {name!r}", by_name)]
    layers.append(("FlashRAG default", FLASHRAG_DEFAULT))
    sources = {key: next(label for label, c in layers if key in c.known()) for key in result.known()}
    said = ", ".join(f"{k}={v!r} ({sources[k]})" for k, v in result.known().items())
    logger.info("encoder conventions for %s: %s", model_dir, said)
    return result
