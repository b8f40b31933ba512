"""Whole-word tokens: a trained byte-level BPE tokenizer extended so that given words are one token each.

A small locally trained BPE splits a made-up name into several pieces ("Vupas" -> "ĠV" "up" "as"), and a tiny policy
copies a name of 3 pieces far more often than one of 4 or 5 (the namesake world's probe, reports/compare_namesake).
``add_whole_words`` appends merges (after every trained one) that join each word, as it appears after a space
("ĠVupas"), into one vocabulary entry. Merges rather than a vocabulary flag, because the policy's tokenizer is loaded
as ``Qwen2Tokenizer`` (``AutoTokenizer`` on a model dir), which rebuilds the BPE from the vocabulary and the merges
alone.

Why the trained segmentation of other text survives: BPE applies the lowest-ranked merge present first, and the
appended merges rank after all trained ones, so a word is first split exactly as before; only then may appended
merges join its pieces. A word outside the list changes only where two of its final pieces are a pair some listed
word needed (a different split of the same text, never lost text); ``name_tokens_report`` counts them.

Measured (namesake recipe 4, reports/compare_namesake/investigation.md): the small policy then copies a name word it
wrote in training 82% of the time but an unseen one 14% (as pieces: 77% and 43%); a token it never had as a target
is one it does not write.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence


def spaced_form(word: str) -> str:
    """The byte-level form of ``word`` after a space (``"Venn"`` -> ``"ĠVenn"``); raises unless it is one
    pre-tokenized word (letters only, as the embedded world's names are)."""
    from tokenizers import pre_tokenizers

    pieces = pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(f" {word}")
    if not word or len(pieces) != 1:
        raise ValueError(
            f"whole-word token {word!r}: not one word (it pre-tokenizes to {[p for p, _ in pieces]}); pass a single "
            "word of letters, e.g. split a name on spaces"
        )
    return pieces[0][0]


def _merge_all(pieces: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """BPE on ``pieces`` with ``ranks`` (pair -> rank): the lowest-ranked present pair first, leftmost on ties."""
    while len(pieces) > 1:
        found = [(ranks[pair], i) for i, pair in enumerate(itertools.pairwise(pieces)) if pair in ranks]
        if not found:
            break
        _, i = min(found)
        pieces = [*pieces[:i], pieces[i] + pieces[i + 1], *pieces[i + 2 :]]
    return pieces


def add_whole_words(tokenizer, words: Iterable[str]):
    """Returns ``(extended, added)``: a copy of the trained BPE ``tokenizer`` (a ``tokenizers.Tokenizer``) in which
    each of ``words``, after a space, is one token, and the number of vocabulary entries added (ids after the
    existing ones). Call before adding special or added tokens (their ids must stay after the vocabulary)."""
    from tokenizers import Tokenizer

    state = json.loads(tokenizer.to_str())
    model = state["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"add_whole_words: the tokenizer's model is {model.get('type')!r}; it needs a BPE model")
    vocab: dict[str, int] = model["vocab"]
    if any(t["id"] > max(vocab.values(), default=-1) for t in state.get("added_tokens") or ()):
        raise ValueError("add_whole_words: call it before adding tokens after the BPE vocabulary (tags, specials)")
    merges: list[list[str]] = [m.split(" ", 1) if isinstance(m, str) else list(m) for m in model["merges"]]
    trained = {tuple(m) for m in merges}
    appended: dict[tuple[str, str], int] = {}
    first_id = next_id = max(vocab.values(), default=-1) + 1
    forms = list(dict.fromkeys(spaced_form(word) for word in words))
    for form in forms:
        pieces = _merge_all([t.value for t in tokenizer.model.tokenize(form)], appended)
        while len(pieces) > 1:
            pair = (pieces[0], pieces[1])
            joined = pieces[0] + pieces[1]
            if pair not in trained and pair not in appended:
                appended[pair] = len(appended)
                merges.append(list(pair))
            if joined not in vocab:
                vocab[joined] = next_id
                next_id += 1
            pieces = [joined, *pieces[2:]]
    model["merges"] = merges
    extended = Tokenizer.from_str(json.dumps(state))
    split = [form for form in forms if len(extended.model.tokenize(form)) != 1]
    if split:
        raise RuntimeError(f"add_whole_words: {len(split)} words are still split (first: {split[:3]}); please report")
    return extended, next_id - first_id


def name_tokens_report(plain, extended, texts: Sequence[str], words: Iterable[str]) -> dict[str, int]:
    """How ``extended`` (``add_whole_words(plain, words)``) splits ``texts`` against ``plain``: tokens in all,
    pre-tokenized words, and those not in ``words`` whose tokens changed (``other_words_changed``). Both are
    ``tokenizers.Tokenizer`` objects or ``PreTrainedTokenizerFast`` (their ``backend_tokenizer`` is used)."""
    plain = getattr(plain, "backend_tokenizer", plain)
    extended = getattr(extended, "backend_tokenizer", extended)
    listed = {spaced_form(w) for w in words}
    report = {"tokens_plain": 0, "tokens_extended": 0, "words": 0, "other_words_changed": 0}
    for text in texts:
        report["tokens_plain"] += len(plain.encode(text, add_special_tokens=False).ids)
        report["tokens_extended"] += len(extended.encode(text, add_special_tokens=False).ids)
        for piece, _ in extended.pre_tokenizer.pre_tokenize_str(text):
            report["words"] += 1
            if piece not in listed:
                before = [t.value for t in plain.model.tokenize(piece)]
                report["other_words_changed"] += before != [t.value for t in extended.model.tokenize(piece)]
    return report
