"""The warm start: realistic synthetic meta-episodes, masks on model tokens only, a loss that falls, a cached model."""

from __future__ import annotations

import random
import re

import pytest

from mr_search_embedded.warmstart.batches import pad_batch
from mr_search_embedded.warmstart.render import encode, encode_all
from mr_search_embedded.warmstart.train import (
    WarmStartConfig,
    causal_lm_loss,
    ensure_warmstart,
    shared_prefix_length,
    supervised_pass,
)
from mr_search_embedded.warmstart.transcripts import TranscriptBuilder, TranscriptConfig, build_transcripts


def test_lookup_ranks_the_asked_entity_first(index):
    assert index.search("Where was Alda Venn born", 3)[0]["title"] == "Alda Venn"
    assert index.search("Kumholt", 1)[0]["title"] == "Kumholt"  # the title counts double


def test_transcripts_are_deterministic_and_mix_wrong_then_right(index, mini_questions):
    config = TranscriptConfig(attempts=3, p_wrong=0.5, seed=7)
    first = build_transcripts(mini_questions, index, 40, config)
    assert first == build_transcripts(mini_questions, index, 40, config)
    patterns = {t.correct for t in first}
    # At most the first attempt slips; every later attempt is right, so the last one always is.
    assert patterns <= {(True, True, True), (False, True, True)}
    assert len(patterns) == 2, "the warm start must show both first-try successes and corrections"


def test_single_attempt_transcripts_are_always_right(index, mini_questions):
    transcripts = build_transcripts(mini_questions, index, 20, TranscriptConfig(attempts=1, p_wrong=0.9))
    assert {t.correct for t in transcripts} == {(True,)}


def _model_text(attempt) -> str:
    return "".join(turn.text for turn in attempt if turn.role == "model")


def test_queries_and_answers_are_spans_the_policy_can_copy(index, mini_questions):
    """Every trained query is a span of the question or of a passage already shown; every trained answer is in a
    passage shown (slips are context only)."""
    for transcript in build_transcripts(mini_questions, index, 40, TranscriptConfig(attempts=3, p_wrong=0.5)):
        seen = transcript.question
        for attempt in transcript.attempts:
            for turn in attempt:
                if turn.role == "information":
                    seen += turn.text
                    continue
                if not turn.trained:
                    continue
                for query in re.findall(r"<search> (.*?) </search>", turn.text):
                    assert query in seen, f"query {query!r} is not copied from the context"
                for answer in re.findall(r"<answer> (.*?) </answer>", turn.text):
                    assert answer in seen, f"answer {answer!r} is not read from a passage shown"


def test_a_two_hop_slip_stops_at_the_bridge_and_the_retry_goes_on(index, mini_questions):
    builder = TranscriptBuilder(index, mini_questions, TranscriptConfig(attempts=2, p_wrong=0.9, p_partial=0.0))
    two_hop = next(q for q in mini_questions if q["hops"] == 2)
    transcript = builder.build(two_hop, random.Random(0))
    assert transcript.correct == (False, True)
    wrong, right = transcript.attempts
    answer = two_hop["golden_answers"][0]
    # The slip searches the asked-about entity and answers the bridge entity read in its passage.
    assert wrong[0].text.endswith("<search> Aldo Venn </search>")
    assert wrong[-1].text.endswith("<answer> Kumholt </answer>")
    assert wrong[0].trained and not wrong[-1].trained, "the right query is learnt, the wrong answer is context only"
    # The retry goes on with the second hop and answers from the passage it finds.
    assert [t.role for t in right] == ["model", "information", "model"]
    assert right[0].text.endswith("<search> Kumholt </search>")
    assert answer in right[1].text
    assert right[-1].text.endswith(f"<answer> {answer} </answer>")


def test_first_right_attempt_searches_the_entity_then_the_bridge(index, mini_questions):
    builder = TranscriptBuilder(index, mini_questions, TranscriptConfig(attempts=1))
    two_hop = next(q for q in mini_questions if q["hops"] == 2)
    (attempt,) = builder.build(two_hop, random.Random(0)).attempts
    assert [t.role for t in attempt] == ["model", "information", "model", "information", "model"]
    assert attempt[0].text.endswith("<search> Aldo Venn </search>")
    assert attempt[2].text.endswith("<search> Kumholt </search>")
    assert attempt[-1].text.endswith(f"<answer> {two_hop['golden_answers'][0]} </answer>")


def test_a_one_hop_misread_is_answered_from_a_twin_and_retried_with_the_name(index, mini_questions):
    builder = TranscriptBuilder(index, mini_questions, TranscriptConfig(attempts=2, p_wrong=0.9, p_partial=0.0))
    row = next(q for q in mini_questions if q["question"] == "Where was Aldo Venn born?")
    wrong, right = builder.build(row, random.Random(0)).attempts
    # The twin Alda Venn's passage shows Ristead, another birthplace: the slip answers it.
    assert "Alda Venn" in wrong[1].text and wrong[-1].text.endswith("<answer> Ristead </answer>")
    assert right[0].text.endswith("<search> Aldo Venn </search>"), "a short name the policy can copy"
    assert right[-1].text.endswith("<answer> Kumholt </answer>")


def test_a_partial_query_misses_and_the_retry_searches_the_full_name(index, mini_questions):
    config = TranscriptConfig(attempts=3, p_wrong=0.99, p_partial=1.0, p_verify=0.0)
    builder = TranscriptBuilder(index, mini_questions, config)
    row = next(q for q in mini_questions if q["question"] == "In which country was Alda Venn born?")
    transcript = builder.build(row, random.Random(0))
    assert transcript.correct == (False, True, True)
    wrong, right, keep = transcript.attempts
    assert wrong[0].text.endswith("<search> Alda </search>") and not wrong[0].trained, "the bad query is not learnt"
    assert '(Title: "Alda Venn")' not in wrong[1].text, "the partial query misses the entity's passage"
    answer = re.search(r"<answer> (.*?) </answer>", wrong[-1].text).group(1)
    assert answer != "Vodikica" and answer not in wrong[1].text and not wrong[-1].trained
    assert "not in the passages" in right[0].text and right[0].text.endswith("<search> Alda Venn </search>")
    assert right[-1].text.endswith("<answer> Vodikica </answer>")
    assert [t.role for t in keep] == ["model"], "after a right attempt the answer is kept"


def test_every_wrong_attempt_is_followed_by_a_search(index, mini_questions):
    """What v5 teaches: a retry after a wrong answer searches again (a new query after a bridge or partial slip); an
    attempt after a right one keeps the answer or checks it with a search."""
    transcripts = build_transcripts(mini_questions, index, 200, TranscriptConfig(attempts=3, p_wrong=0.6, seed=5))
    new_queries = checks = keeps = 0
    for transcript in transcripts:
        for k in range(1, len(transcript.attempts)):
            first = transcript.attempts[k][0]
            searched = re.findall(r"<search> (.*?) </search>", first.text)
            if transcript.correct[k - 1]:
                checks += bool(searched)
                keeps += not searched
                continue
            old = set(re.findall(r"<search> (.*?) </search>", "".join(t.text for t in transcript.attempts[k - 1])))
            assert first.trained and len(searched) == 1, f"a retry after a wrong answer must search: {first.text!r}"
            new_queries += searched[0] not in old
    wrong_first = sum(not t.correct[0] for t in transcripts)
    assert 0.45 < wrong_first / len(transcripts) < 0.75, "about p_wrong of first attempts slip"
    assert new_queries > wrong_first / 3, "bridge and partial slips are retried with a query not searched before"
    assert checks > 50 and keeps > 50, "after a right attempt, about half keep the answer and half check it"


def test_mask_covers_exactly_the_model_written_tokens(index, mini_questions, tokenizer):
    from mr_search.agent.tokens import EnvEncoder

    env = EnvEncoder(tokenizer)
    transcripts = build_transcripts(mini_questions, index, 12, TranscriptConfig(attempts=3, seed=1))
    assert any(not turn.trained for t in transcripts for a in t.attempts for turn in a), "slips must be covered"
    for transcript in transcripts:
        encoded = encode(transcript, tokenizer, env)
        assert len(encoded.input_ids) == len(encoded.loss_mask)
        assert not any(encoded.loss_mask[: encoded.prompt_length]), "the question prompt must not be trained"
        runs, current = [], []
        for token, trained in zip(encoded.input_ids, encoded.loss_mask, strict=True):
            if trained:
                current.append(token)
            elif current:
                runs.append(current)
                current = []
        if current:
            runs.append(current)
        model_turns = [t.text for attempt in transcript.attempts for t in attempt if t.role == "model" and t.trained]
        assert [tokenizer.decode(run) for run in runs] == model_turns
        # Everything else (passages, reflection turns) is environment text, as the agent loop renders it.
        text = tokenizer.decode(encoded.input_ids[encoded.prompt_length :])
        assert text.count("<information>") == sum(t.role == "information" for a in transcript.attempts for t in a)
        assert text.count("Reflect on your previous attempt") == len(transcript.attempts) - 1


def test_encoding_many_at_once_gives_the_same_tokens(index, mini_questions, tokenizer):
    transcripts = build_transcripts(mini_questions, index, 12, TranscriptConfig(attempts=3, seed=2))
    assert encode_all(transcripts, tokenizer) == [encode(t, tokenizer) for t in transcripts]


def test_the_cheaper_loss_equals_the_models_own_on_a_padded_batch(index, mini_questions, tokenizer, tiny_policy):
    """Shared instruction, no padding mask, LM head on labelled tokens: the same loss and gradients as HF's pass."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_policy)
    examples = [encode(t, tokenizer) for t in build_transcripts(mini_questions, index, 6, TranscriptConfig(seed=3))]
    ids, attention, labels, env_labels = pad_batch(examples, tokenizer.pad_token_id, 1024)
    assert (attention == 0).any(), "the batch must hold padded rows for this check"
    assert shared_prefix_length(ids, labels) > 20, "the rows start with the same instruction, run once"
    for weight in (0.0, 0.5):
        model.zero_grad()
        reference = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        if weight:
            reference = reference + weight * model(input_ids=ids, attention_mask=attention, labels=env_labels).loss
        reference.backward()
        expected = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        loss = causal_lm_loss(model, ids, labels, env_labels, weight)
        loss.backward()
        assert torch.allclose(loss, reference, atol=1e-5)
        for got, want in zip((p.grad for p in model.parameters()), expected, strict=True):
            assert torch.allclose(got, want, atol=1e-5)


def test_environment_labels_cover_the_passages_and_reflections_after_the_question(index, mini_questions, tokenizer):
    transcripts = build_transcripts(mini_questions, index, 8, TranscriptConfig(seed=4))
    assert any(not turn.trained for t in transcripts for a in t.attempts for turn in a), "slips must be covered"
    examples = [encode(t, tokenizer) for t in transcripts]
    env_labels = pad_batch(examples, tokenizer.pad_token_id, 1024).env_labels
    for row, example in enumerate(examples):
        env = env_labels[row].tolist()
        assert all(label == -100 for label in env[: example.prompt_length]), "the question prompt is not trained"
        for position, (token, trained, is_env) in enumerate(
            zip(example.input_ids, example.loss_mask, example.env_mask, strict=True)
        ):
            assert not (trained and is_env)
            if position >= example.prompt_length:
                assert env[position] == (token if is_env else -100), "env labels: exactly the environment's tokens"
        assert all(label == -100 for label in env[len(example.input_ids) :]), "padding is not trained"
        text = tokenizer.decode([t for t in env if t != -100])
        assert "<information>" in text and "Doc 1(Title:" in text
        assert "</think>" not in text, "a slipped (context-only) model turn is not trained as environment text"


def test_the_shared_prefix_stops_before_rows_differ_or_a_label():
    import torch

    ids = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 1, 2]])
    labels = torch.full_like(ids, -100)
    assert shared_prefix_length(ids, labels) == 3
    labels[:, 2] = 7
    assert shared_prefix_length(ids, labels) == 1, "token 2 is a label: position 1 predicts it, so it is not shared"
    assert shared_prefix_length(ids[:1], torch.full_like(ids[:1], -100)) == 4, "one token is left to run"


def test_supervised_pass_lowers_the_loss(index, mini_questions, tokenizer, tiny_policy):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_policy)
    examples = [encode(t, tokenizer) for t in build_transcripts(mini_questions, index, 8, TranscriptConfig())]
    import torch

    config = WarmStartConfig(window_steps=10, window_batch_size=8, steps=20, batch_size=4, lr=1e-2, warmup_steps=2)
    threads = torch.get_num_threads()
    losses = supervised_pass(model, examples, config, tokenizer.pad_token_id, threads=1)
    assert torch.get_num_threads() == threads, "the pass gives torch its thread setting back"
    assert len(losses) == 30, "the window stage's steps, then the whole transcripts' steps"
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5


def test_ensure_warmstart_saves_a_loadable_policy_once(tmp_path, tiny_policy, mini_world):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = WarmStartConfig(
        num_transcripts=8, window_steps=2, window_batch_size=4, steps=3, batch_size=4, warmup_steps=1
    )
    out = ensure_warmstart(base_model=tiny_policy, out_dir=tmp_path / "ws", config=config, world=mini_world)
    assert (out / ".complete").is_file()
    model = AutoModelForCausalLM.from_pretrained(out)
    assert AutoTokenizer.from_pretrained(out).chat_template
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    again = ensure_warmstart(base_model=tiny_policy, out_dir=tmp_path / "ws", config=config, world=mini_world)
    assert again == out and (out / "model.safetensors").stat().st_mtime_ns == stamp, "cached: not retrained"
    assert model.config.vocab_size > 0


def test_invalid_settings_are_rejected_with_the_reason():
    with pytest.raises(ValueError, match="steps"):
        WarmStartConfig(steps=0)
    with pytest.raises(ValueError, match="env_loss_weight"):
        WarmStartConfig(env_loss_weight=-1.0)
    with pytest.raises(ValueError, match="window_steps"):
        WarmStartConfig(window_steps=-1)
    with pytest.raises(ValueError, match="window_length"):
        WarmStartConfig(window_length=1)
    with pytest.raises(ValueError, match="warmup_steps"):
        WarmStartConfig(window_steps=2, steps=3, warmup_steps=6)
    with pytest.raises(ValueError, match="p_wrong"):
        TranscriptConfig(p_wrong=1.0)
    with pytest.raises(ValueError, match="p_verify"):
        TranscriptConfig(p_verify=-0.1)
    with pytest.raises(ValueError, match="p_partial"):
        TranscriptConfig(p_partial=1.5)


def test_a_batch_without_environment_labels_adds_no_environment_term(index, mini_questions, tokenizer, tiny_policy):
    """The decision windows score no environment text: the environment term must vanish, not turn NaN."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_policy)
    examples = [encode(t, tokenizer) for t in build_transcripts(mini_questions, index, 3, TranscriptConfig(seed=3))]
    ids, _, labels, env_labels = pad_batch(examples, tokenizer.pad_token_id, 1024)
    none = torch.full_like(env_labels, -100)
    loss = causal_lm_loss(model, ids, labels, none, 0.5)
    assert torch.isfinite(loss) and torch.allclose(loss, causal_lm_loss(model, ids, labels, None, 0.0))


def _unpadded(batch, pad_token_id: int) -> list[list[int]] | None:
    """The token ids of each row of a padded batch without its padding (None for no batch)."""
    return None if batch is None else [[i for i in row.tolist() if i != pad_token_id] for row in batch.ids]


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")  # the fake step does not step
def test_mixed_decision_windows_come_with_every_whole_transcript_step(
    index, mini_questions, tokenizer, tiny_policy, monkeypatch
):
    """Each whole-transcript step gets ``decision_windows_per_step`` decision windows, in order and from the first
    again when used up, at the stage's learning rate; window steps get none."""
    import torch
    from transformers import AutoModelForCausalLM

    from mr_search_embedded.warmstart import train as train_module

    model = AutoModelForCausalLM.from_pretrained(tiny_policy)
    examples = [encode(t, tokenizer) for t in build_transcripts(mini_questions, index, 6, TranscriptConfig(seed=3))]
    decision = [encode(t, tokenizer) for t in build_transcripts(mini_questions, index, 3, TranscriptConfig(seed=5))]
    seen: list[tuple[int, list[list[int]] | None, float]] = []

    def fake_step(model, optimizer, batch, config, mixed=None):
        seen.append((batch.ids.shape[0], _unpadded(mixed, tokenizer.pad_token_id), optimizer.param_groups[0]["lr"]))
        return torch.tensor(0.0)

    monkeypatch.setattr(train_module, "train_step", fake_step)
    config = WarmStartConfig(
        window_steps=2,
        window_batch_size=2,
        window_length=16,
        steps=2,
        batch_size=3,
        decision_windows_per_step=2,
        lr=6e-3,
        warmup_steps=0,
    )
    assert config.decision_count == 4 and config.total_steps == 4
    train_module._train(model, examples, config, tokenizer.pad_token_id, None, None, decision)
    assert [(size, rows is None) for size, rows, _ in seen] == [(2, True), (2, True), (3, False), (3, False)]
    expected = [decision[i].input_ids for i in (0, 1, 2, 0)]
    assert [row for _, rows, _ in seen[2:] for row in rows] == expected
    assert [lr for *_, lr in seen] == pytest.approx([6e-3, 6e-3, 6e-3, 6e-3])
    with pytest.raises(ValueError, match="decision_windows_per_step=2 but no decision windows were given"):
        train_module.supervised_pass(model, examples, config, tokenizer.pad_token_id)
    with pytest.raises(ValueError, match="decision_windows_per_step=-1"):
        WarmStartConfig(decision_windows_per_step=-1)


def test_a_mixed_step_adds_the_decision_windows_own_mean_loss(index, mini_questions, tokenizer, tiny_policy):
    import torch
    from transformers import AutoModelForCausalLM

    from mr_search_embedded.warmstart.train import train_step

    model = AutoModelForCausalLM.from_pretrained(tiny_policy)
    whole = pad_batch(
        [encode(t, tokenizer) for t in build_transcripts(mini_questions, index, 3, TranscriptConfig())], 0, 512
    )
    mixed = pad_batch(
        [encode(t, tokenizer) for t in build_transcripts(mini_questions, index, 2, TranscriptConfig(seed=9))], 0, 512
    )
    config = WarmStartConfig(bf16=False, env_loss_weight=0.5)
    with torch.no_grad():
        parts = [causal_lm_loss(model, b.ids, b.labels, b.env_labels, 0.5) for b in (whole, mixed)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    loss = train_step(model, optimizer, whole, config, mixed)
    assert float(loss.detach()) == pytest.approx(float(parts[0] + parts[1]), rel=1e-5)
    assert float(parts[1]) > 0.1, "the windows' loss is a term of its own, not lost in the transcripts' mean"


def test_the_device_is_resolved_and_a_missing_gpu_is_named() -> None:
    import torch

    from mr_search_embedded.warmstart.batches import Batch
    from mr_search_embedded.warmstart.train import on_device, resolve_device

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device 'gpu' is not one of auto, cpu, cuda"):
        resolve_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch sees no GPU; use --device cpu"):
            resolve_device("cuda")
    batch = Batch(*(torch.zeros(2, 3, dtype=torch.long) for _ in range(4)))
    moved = on_device(batch, torch.device("cpu"))
    assert isinstance(moved, Batch) and all(t.device.type == "cpu" for t in moved)
