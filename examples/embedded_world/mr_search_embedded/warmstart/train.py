"""The supervised warm start: a short causal-LM pass over synthetic transcripts, cached as an HF model dir.

Three configs are built: the default world's (``WarmStartConfig()``), the namesake world's
(``namesake_warmstart_config``) and the threehop world's (``threehop_warmstart_config``); ``warmstart_config`` picks
one for a world, either with outcome feedback. Each reads its world's training questions only (``inputs.py``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mr_search.agent.tokens import EnvEncoder
from mr_search_embedded.tiny_model import cache_root, ensure_tiny_model
from mr_search_embedded.warmstart.batches import Batch, WindowSampler, bucketed_batches, pad_batch
from mr_search_embedded.warmstart.decision import presence_windows, world_name_words
from mr_search_embedded.warmstart.inputs import warmstart_inputs
from mr_search_embedded.warmstart.lookup import LexicalIndex
from mr_search_embedded.warmstart.render import Encoded, encode_all
from mr_search_embedded.warmstart.threads import ThreadTuner, TunerConfig, default_candidates
from mr_search_embedded.warmstart.transcripts import TranscriptConfig, build_transcripts

logger = logging.getLogger(__name__)


# Bump when transcripts, layout or training change in a way the config does not show: rebuilds caches.
# 2: entity-name queries; Search-R1 layout of the mr_search agent loop (agent/tokens.py).
# 3: grounded slips only, single-attempt transcripts, length-bucketed batches, warm-up-stable-decay schedule.
# 4: a next-token loss on the environment's text too (env_loss_weight), AdamW beta2 0.95, 700 steps at lr 6e-3.
# 5: retries search again: after every wrong first attempt (60% of the multi-attempt transcripts; v4: 35%) the next
#    attempt searches with a better query (the bridge entity, the whole question, or the entity's full name after a new
#    slip that searched only the first word of the name and answered what the passages do not show); every retry's
#    thought differs from the kept answer's at its first word; slipped turns are context only (no loss, not environment
#    text); torch threads chosen by timing steps (threads.py).
# 6: a window stage first (short slices of the transcripts' bodies, where copying is learned cheaply), then whole
#    transcripts; bf16 autocast.
# 7: the transcripts' search hides every passage that names a dev or test entity (inputs.py); max_hops.
WARMSTART_VERSION = 7


@dataclass(frozen=True)
class WarmStartConfig:
    """The supervised pass. Defaults take about 2 minutes on 2 free CPU cores for the tiny policy (cached).

    Two stages (v6). First ``window_steps`` steps on ``window_batch_size`` windows of ``window_length`` tokens cut
    from the transcripts after their shared instruction: a share ``window_anchor_share`` of them starts at the
    question, the rest anywhere after the instruction. The
    policy learns to copy there (the entity into its query, titles and answers out of passages) on 3,072 tokens
    a step with short attention. Then ``steps`` steps on whole transcripts (the instruction in front, the attempts
    in order), which teach the full protocol. bf16 autocast where the CPU has native bf16 (~12% faster a step;
    SDPA still gets float32 queries, keys and values under it, checked with a spy: no slower bf16 attention).

    Build time (``python -m mr_search_embedded.warmstart``, 2-core AMD EPYC with AVX512-BF16, otherwise idle): v6 117 s
    of training (122 s for the command; 679 steps on 2 threads, 21 on 1 in the thread tuner's trials); v5 (900
    whole-transcript steps, float32) ~4.5 minutes (437 s on the shared box). ``python
    benchmarks/bench_warmstart_recipe.py`` times both recipes' steps interleaved on the same machine.

    How v6 was chosen (one run each, 2-core box, ``python -m mr_search_embedded.warmstart.probe``-style greedy probe on
    100 held-out questions: EM@1/2/3, searches again after attempt 1; training seconds on a box shared with other
    jobs): v5's 900 whole steps in bf16: 38/15/10, 100%, 424 s. Windows from the first label on (no question in
    view), 400 window steps x 32 + 500 whole: 33/15/15, 98%, 204 s; 300 + 300: 18/16/16, 0%; 300 + 500 with 8
    transcripts a step: 15/15/16, 0%. Windows after the instruction, half at the question: 500 + 300: 32/33/33,
    0% (copies better, never retries); 400 + 400: 36/36/35, 0%. Anchors at reflection turns too: 500 + 300:
    34/32/32, 0%; 500 + 200: 33/11/10, 100%, 148 s; 400 + 200: 31/11/5, 100%; 500 x 24 + 200: 35/13/6, 100%,
    120 s. The default is that last recipe with question anchors only (reflection-turn anchors were meant to be
    in it, but a plumbing slip never passed them to the build; what was built and measured below is this).
    Whether greedy retries flips between runs (the kept and the retried thought differ at
    one token, 37% vs 63% of reflection turns). The default's own build (python -m mr_search_embedded.warmstart):
    greedy 25/12/7, searches again 100%; sampled (5 a question) EM 15.6/6.6/5.2, searches again 77%, groups
    with unequal rewards 42% (v5: greedy 30/17/13; sampled 25.8/16.6/12.2, 76%, 51%).

    The tiny policy starts from random weights and must learn to copy names (the asked-about entity into its
    query, the answer out of a passage). Trained on its own turns only (v3: lr 3e-3, AdamW beta2 0.999), that
    ability appeared abruptly after roughly 10,000 transcripts (1000 steps x 16 gave 32% of held-out queries
    right). A next-token loss on the environment's text as well (passages and reflection turns after the
    question, weight ``env_loss_weight``) brings it earlier: the passages repeat each title in their text, so the
    policy learns to copy from them too. Measured on held-out transcripts (teacher-forced greedy: first query /
    bridge query / answer exactly right; sweeps ran in float32 on a GPU for speed), 4 seeds: 700 steps at lr
    6e-3, beta2 0.95, weight 0.5 gave query 34-41%, bridge 1-64%, answer 18-76% (v3's policy: 32% / 0% / 20%);
    without it, 500 steps copied nothing and 1000 steps gave 23% / 0% / 10%; weight 0.25 gave 20% query at 700;
    lr 1e-2 copied nothing at 500; 600 steps gave 21-37% query and fewer answers. Each step is cheap: the
    shared instruction runs once per batch, the LM head only where a label is (``causal_lm_loss``).

    ``python -m mr_search_embedded.warmstart.probe`` on the CPU build (100 held-out questions, 5 samples each), v4
    against
    v3: greedy EM@1..3 31/34/32% (v3: 1/3/1%), query names the entity 42% (33%), gold passage found 64% (60%),
    sampled EM@1..3 15.2/14.2/13.2% (4.0/4.4/4.6%), mixed-reward groups 46% (41%), distinct answers 46 (51).

    v5 (retries search again) against v4: greedy EM@1..3 30/17/13% (31/34/32%); greedy meta-episodes that search
    again after attempt 1: 100% (0%), sampled 76% (3%), sampled after a wrong first attempt 78% (3%); sampled
    EM@1..3 25.8/16.6/12.2% (15.2/14.2/13.2%), mixed-reward groups 51% (46%), query names the entity 42% (42%),
    gold passage found 56% (64%), distinct answers 52 (46). Its retries copy the name worse than first tries do
    (the same first query as attempt 1 in 6 of the 30 right first attempts; 17 of those 30 end wrong at attempt
    2): greedy EM falls after attempt 1, which training across attempts can fix and single-attempt training
    cannot see. On the way there: with 30% multi-attempt transcripts (70% one-attempt),
    700 steps copied no answer (greedy EM@1 1%); with every retry's thought starting "My previous answer is ..."
    like the kept answer's, greedy attempts 2-3 never searched (the first differing token went to the majority);
    with checks of a right answer at half the later attempts and 700 steps, sampled attempts 2-3 searched in 45%
    of meta-episodes but greedy ones in 1%, greedy EM@1 15%; 900 steps gave greedy EM@1 39% and searches after
    attempt 1 in all greedy meta-episodes, but those retries searched the whole question, which the tiny policy
    cannot copy ("In which country is Fizar born"): greedy EM@2/@3 fell to 9/5%. Retries now search a name.

    Attributes:
        num_transcripts: synthetic meta-episodes drawn from the training questions.
        single_attempt_share: share of them that stop after one attempt: shorter and cheaper, they carry the
            copying that every attempt needs; the rest show all K attempts (reflection, corrections).
        window_steps: optimizer steps of the window stage (0: none), before ``steps``.
        window_length: tokens in a window.
        window_batch_size: windows per step.
        window_anchor_share: share of windows that start at the question.
        decision_windows_per_step: the namesake world's decision windows (``decision.presence_windows``: a freshly
            drawn namesake group each, ending with the decision whether the question's profession word is in the
            passages) added to every whole-transcript step, in a forward pass of their own whose mean loss is added
            to the transcripts' at the stage's learning rate (0: none, the default world's).
        steps: optimizer steps on whole transcripts.
        batch_size: transcripts per step (batches group transcripts of similar length).
        lr: peak learning rate (AdamW, linear warm-up, constant, then linear decay to 10% over the last 20%).
        adam_beta2: AdamW's second-moment decay (0.95 follows the loss's quick changes as copying appears).
        env_loss_weight: weight of the next-token loss on the environment's text after the question (0: off).
        warmup_steps: linear warm-up steps.
        max_length: transcripts are cut to this many tokens.
        bf16: run the forward pass under bf16 autocast (weights, optimizer and loss stay float32) where the CPU
            has native bf16 (AVX512-BF16 or AMX; elsewhere float32, which is faster there).
        transcripts: how the transcripts are drawn (attempts K, top-k, slip and check rates, seed).
        seed: torch seed (batch order and initialisation of the optimizer state).
        max_hops: transcripts are drawn from the training questions of at most this many hops (None: all; the
            threehop world's: 2, so no transcript holds a three-hop question).
    """

    num_transcripts: int = 5000
    single_attempt_share: float = 0.85
    window_steps: int = 500
    window_length: int = 128
    window_batch_size: int = 24
    window_anchor_share: float = 0.5
    decision_windows_per_step: int = 0
    steps: int = 200
    batch_size: int = 16
    lr: float = 6e-3
    adam_beta2: float = 0.95
    env_loss_weight: float = 0.5
    warmup_steps: int = 50
    max_length: int = 1024
    bf16: bool = True
    transcripts: TranscriptConfig = field(default_factory=TranscriptConfig)
    seed: int = 0
    max_hops: int | None = None

    def __post_init__(self) -> None:
        positive = ("num_transcripts", "steps", "batch_size", "max_length", "window_batch_size")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"WarmStartConfig.{name}={getattr(self, name)}: use a positive integer")
        if self.window_steps < 0:
            raise ValueError(f"WarmStartConfig.window_steps={self.window_steps}: use 0 (no window stage) or more")
        if self.max_hops is not None and self.max_hops < 1:
            raise ValueError(f"WarmStartConfig.max_hops={self.max_hops}: use None (every question) or at least 1")
        if self.decision_windows_per_step < 0:
            raise ValueError(
                f"WarmStartConfig.decision_windows_per_step={self.decision_windows_per_step}: use 0 (none) or more"
            )
        if not 0.0 <= self.window_anchor_share <= 1.0:
            raise ValueError(f"WarmStartConfig.window_anchor_share={self.window_anchor_share}: use a share in [0, 1]")
        if self.window_length < 2:
            raise ValueError(f"WarmStartConfig.window_length={self.window_length}: use at least 2 tokens")
        if not 0.0 <= self.single_attempt_share <= 1.0:
            raise ValueError(f"WarmStartConfig.single_attempt_share={self.single_attempt_share}: use a share in [0, 1]")
        if self.env_loss_weight < 0.0:
            raise ValueError(f"WarmStartConfig.env_loss_weight={self.env_loss_weight}: use a weight >= 0 (0: off)")
        if not 0.0 < self.adam_beta2 < 1.0:
            raise ValueError(f"WarmStartConfig.adam_beta2={self.adam_beta2}: use a value in (0, 1)")
        if not 0.0 < self.lr < 1.0:
            raise ValueError(f"WarmStartConfig.lr={self.lr}: use a learning rate in (0, 1)")
        if not 0 <= self.warmup_steps <= self.total_steps:
            raise ValueError(
                f"WarmStartConfig.warmup_steps={self.warmup_steps}: use a value in [0, window_steps + steps]"
            )

    @property
    def decision_count(self) -> int:
        """How many decision windows the build draws: ``decision_windows_per_step`` for each whole-transcript step."""
        return self.steps * self.decision_windows_per_step

    @property
    def total_steps(self) -> int:
        """Optimizer steps in all: the window stage, then whole transcripts."""
        return self.window_steps + self.steps

    def key(self) -> str:
        """The cache key of what this config trains: a hash of every field and ``WARMSTART_VERSION``."""
        payload = json.dumps({"version": WARMSTART_VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


def namesake_warmstart_config(outcome_feedback: bool = False) -> WarmStartConfig:
    """The namesake world's warm start (``MR_SEARCH_WORLD=namesake``; ``make compare`` with ``POLICY=small``).

    Its transcripts (``transcripts.py``) script every behaviour the namesake world asks for. A namesake question's
    first attempt searches the name N and, after N's passages, says whether the question's profession word is in
    them: absent, it searches "<profession> N" and answers from B's article wherever it stands among the passages;
    present (a control question), it answers. Some first attempts slip the hasty way: they answer the city N's own
    article gives (context only, never trained), and the next attempt fixes it. Every retry and check searches the
    whole question, which the agent's dense index ranks right, and reads the passage that answers it first; the
    reflection turns restate the question just before it (train and evaluate with
    ``mr_search.episode.reflection_restates_question``, which ``make compare`` sets from the warm start). A right
    answer that fixed a wrong one, or any right answer to a namesake question, is checked again at a tenth of the
    time, not half. Half of the one- and two-hop transcripts have their asked-about entity renamed with a fresh
    name none of whose words the corpus holds (``rename.py``), so copying a name cannot be learnt as memorising it.

    Against the default's: 70% of the transcripts stop after one attempt (85%), so more of them show the retries;
    every whole-transcript step adds 24 decision windows (``decision.presence_windows``: freshly drawn groups with
    names recombined from every name word of the world), 12 transcripts a step; and it is three times as long:
    15,000 transcripts, 1,500 window steps and 1,500 whole-transcript steps (about 25 minutes on 2 CPU cores, 5 on
    one H100 with ``--device cuda``).
    """
    transcripts = TranscriptConfig(
        outcome_feedback=outcome_feedback,
        p_verify_found=0.1,
        retry_question=True,
        reflection_question=True,
        p_rename=0.5,
    )
    return WarmStartConfig(
        num_transcripts=15_000,
        single_attempt_share=0.7,
        window_steps=1_500,
        decision_windows_per_step=24,
        steps=1_500,
        batch_size=12,
        transcripts=transcripts,
    )


def threehop_warmstart_config(outcome_feedback: bool = False) -> WarmStartConfig:
    """The threehop world's warm start (``MR_SEARCH_WORLD=threehop``): the default world's, drawn from the threehop
    world's one- and two-hop training questions only (``max_hops=2``). It supervises the format, searching the
    asked-about entity and then a bridge entity within one attempt, and the default's retries after a wrong first
    attempt (a two-hop slip continued from its passages at the next attempt included); no transcript holds a
    three-hop question, so none shows one solved, in one attempt or across attempts. 80% of the transcripts ask
    about a freshly named entity (``p_rename``, as the namesake world's) and the window stage is 800 steps: the tiny
    policy's first query names a dev entity exactly in 61% of questions (without renaming 9%; half renamed and 500
    window steps 47%; reports/threehop_dev_probe, dev split)."""
    base = warmstart_config(outcome_feedback)
    return replace(base, max_hops=2, window_steps=800, transcripts=replace(base.transcripts, p_rename=0.8))


def control_warmstart_config(outcome_feedback: bool = True) -> WarmStartConfig:
    """The default world's warm start for a positive control (``--recipe control``): the default's transcripts with
    the threehop recipe's renaming (80% of the transcripts about a freshly named entity, 800 window steps) and half
    of them three attempts long (the default: 15%), so retries are common in what RL samples. Chosen on dev against
    the default's, both with outcome feedback (reports/feedback_warmstart_dev_probe, dev split): the first query
    names a dev entity exactly in 42% of questions (9%), sampled EM rises across attempts 18.2 -> 19.8 (falls 10.9 ->
    8.3), and a right first answer is broken in 6% of sampled retries (33%)."""
    base = WarmStartConfig(transcripts=TranscriptConfig(outcome_feedback=outcome_feedback))
    return replace(
        base, window_steps=800, single_attempt_share=0.5, transcripts=replace(base.transcripts, p_rename=0.8)
    )


RECIPES = ("world", "control")  # the world's own warm start; the default world's positive-control one


def warmstart_config(outcome_feedback: bool = False, world: str = "default", recipe: str = "world") -> WarmStartConfig:
    """The warm start of ``world`` (``MR_SEARCH_WORLD``: ``default``, ``namesake`` or ``threehop``): the default
    world's ``WarmStartConfig()``, ``namesake_warmstart_config()`` or ``threehop_warmstart_config()``;
    ``outcome_feedback``: its reflection turns say whether the previous answer was right, for training and evaluating
    with ``mr_search.episode.outcome_feedback`` (MAGE-style; paper: off). ``recipe="control"``: the default world's
    ``control_warmstart_config()``."""
    if recipe not in RECIPES:
        raise ValueError(f"warm start: recipe {recipe!r} is not one of {', '.join(RECIPES)}")
    if recipe == "control":
        if world != "default":
            raise ValueError(f"warm start: the control recipe is the default world's; MR_SEARCH_WORLD={world}")
        return control_warmstart_config(outcome_feedback)
    if world == "namesake":
        return namesake_warmstart_config(outcome_feedback)
    if world == "threehop":
        return threehop_warmstart_config(outcome_feedback)
    if world != "default":
        raise ValueError(f"warm start: no config for the world {world!r}; use default, namesake or threehop")
    return WarmStartConfig(transcripts=TranscriptConfig(outcome_feedback=outcome_feedback))


def shared_prefix_length(ids, labels) -> int:
    """How many leading tokens all rows share before any label (the instruction every transcript starts with)."""
    import torch

    same = (ids == ids[:1]).all(dim=0)
    length = int(torch.cumprod(same.long(), dim=0).sum())
    labelled = (labels != -100).any(dim=0).nonzero()
    if len(labelled):
        length = min(length, int(labelled[0]) - 1)  # the prefix's last position must not predict a label
    return max(0, min(length, ids.shape[1] - 1))


def causal_lm_loss(model, ids, labels, env_labels=None, env_weight: float = 0.0):
    """The mean next-token loss on ``labels`` (as ``model(..., labels=labels).loss``), computed cheaper, plus
    ``env_weight`` times the mean loss on ``env_labels`` when given.

    The rows of the batch start with the same instruction (half the tokens of a one-attempt transcript): it is
    run once, and its keys and values are shared by every row. The batch is right-padded, so under the causal
    mask no real token sees a pad: no padding mask is needed. The LM head and the softmax run only where a label
    is (an eighth of the tokens in warm-start transcripts) instead of on every position.
    """
    import torch
    from transformers import DynamicCache

    # A batch without environment text to predict (the decision windows, whose passages are not scored) adds no term:
    # the mean over no positions would be NaN.
    extra = env_labels is not None and env_weight > 0 and bool((env_labels != -100).any())
    prefix = shared_prefix_length(ids, torch.maximum(labels, env_labels) if extra else labels)
    body = model.base_model
    if prefix >= 2:
        cache = DynamicCache(config=model.config)
        body(input_ids=ids[:1, :prefix], past_key_values=cache, use_cache=True)
        cache.batch_repeat_interleave(ids.shape[0])
        hidden = body(input_ids=ids[:, prefix:], past_key_values=cache, use_cache=True).last_hidden_state
    else:
        prefix = 0
        hidden = body(input_ids=ids).last_hidden_state
    hidden = hidden[:, :-1]
    head = model.get_output_embeddings()

    def mean_loss(targets):
        keep = targets[:, prefix + 1 :] != -100
        return torch.nn.functional.cross_entropy(head(hidden[keep]).float(), targets[:, prefix + 1 :][keep])

    loss = mean_loss(labels)
    return loss + env_weight * mean_loss(env_labels) if extra else loss


def supervised_pass(
    model,
    examples: Sequence[Encoded],
    config: WarmStartConfig,
    pad_id: int,
    on_step: Callable[[int, float], None] | None = None,
    threads: int | None = 0,
    decision: Sequence[Encoded] = (),
) -> list[float]:
    """Trains ``model`` in place on ``examples`` (and, with ``config.decision_windows_per_step``, on ``decision``:
    the decision windows, that many a whole-transcript step in order, from the first again when used up); returns the
    loss per step.

    The loss is on model-written tokens, plus ``config.env_loss_weight`` times the loss on the environment's
    text after the question. ``threads``: torch intra-op threads during the pass; 0 (the default): chosen by
    timing steps as the machine's load changes (``threads.ThreadTuner``: all cores are about twice as fast as
    one on free cores, and 3-10x slower than one while another process keeps a core busy); None: leave torch's
    setting. Torch's own setting is given back afterwards.
    """

    import torch

    if not examples:
        raise ValueError("supervised_pass: no examples to train on")
    if config.decision_count and not decision:
        raise ValueError(
            f"supervised_pass: decision_windows_per_step={config.decision_windows_per_step} but no decision windows "
            "were given; pass decision=decision_windows(...) or set decision_windows_per_step=0"
        )
    if threads is not None and threads < 0:
        raise ValueError(f"supervised_pass: threads={threads}; use 0 (timed choice), a positive count, or None")
    previous_threads = torch.get_num_threads()
    tuner = None
    if threads == 0:
        tuner = ThreadTuner(TunerConfig(candidates=tuple(default_candidates())), torch.set_num_threads)
    elif threads:
        torch.set_num_threads(threads)
    try:
        return _train(model, examples, config, pad_id, on_step, tuner, decision)
    finally:
        if tuner is not None:
            logger.info("warm start: steps per thread count %s", tuner.steps_per_count)
        torch.set_num_threads(previous_threads)


def transcript_mix(questions: Sequence[dict], index: LexicalIndex, config: WarmStartConfig, count: int = 0) -> list:
    """The warm start's transcripts: ``count`` (default ``config.num_transcripts``), a ``single_attempt_share`` of
    them one attempt long, the rest with all K attempts, over the ``questions`` of at most ``config.max_hops`` hops."""
    count = count or config.num_transcripts
    if config.max_hops is not None:
        questions = [q for q in questions if int(q["hops"]) <= config.max_hops]
    single = round(count * config.single_attempt_share)
    one_attempt = replace(config.transcripts, attempts=1, seed=config.transcripts.seed + 1)
    return build_transcripts(questions, index, single, one_attempt) + build_transcripts(
        questions, index, count - single, config.transcripts
    )


def decision_windows(
    questions: Sequence[dict],
    index: LexicalIndex,
    config: WarmStartConfig,
    tokenizer,
    env: EnvEncoder | None = None,
    name_words: tuple[Sequence[str], Sequence[str]] | None = None,
) -> list[Encoded]:
    """The decision windows, encoded (``config.decision_count`` of them, in training order; none without
    ``decision_windows_per_step``). ``name_words``: the words the fresh names recombine (first names, surnames:
    ``decision.world_name_words``). No loss on their passages: their environment text is not scored."""
    count = config.decision_count
    if not count:
        return []
    if name_words is None:
        raise ValueError("decision_windows: the windows need name_words (decision.world_name_words(meta))")
    drawn = presence_windows(questions, index, count, name_words, seed=config.transcripts.seed + 2)
    encoded = encode_all(drawn, tokenizer, env)
    return [replace(e, env_mask=[0] * len(e.env_mask)) for e in encoded]


def train_step(model, optimizer, batch: Batch, config: WarmStartConfig, mixed: Batch | None = None):
    """One optimizer step on ``batch`` (forward under bf16 autocast if ``config.bf16``, gradient clipped to 1), plus
    the mean loss of ``mixed`` (the step's decision windows, a forward pass of their own) when given; returns the
    loss tensor."""
    import torch

    with torch.autocast(batch.ids.device.type, dtype=torch.bfloat16, enabled=config.bf16):
        loss = causal_lm_loss(model, batch.ids, batch.labels, batch.env_labels, config.env_loss_weight)
        if mixed is not None:
            loss = loss + causal_lm_loss(model, mixed.ids, mixed.labels, mixed.env_labels, config.env_loss_weight)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def _train(model, examples, config, pad_id, on_step, tuner: ThreadTuner | None, decision=()) -> list[float]:
    import torch

    torch.manual_seed(config.seed)
    order = random.Random(config.seed)
    windows = WindowSampler(examples, config.window_length, config.window_anchor_share, random.Random(config.seed + 1))
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(0.9, config.adam_beta2), weight_decay=0.0, foreach=True
    )
    total = config.total_steps
    decay_from = max(config.warmup_steps, int(0.8 * total))

    def schedule(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / (config.warmup_steps + 1)
        if step < decay_from:
            return 1.0
        return 1.0 - 0.9 * (step - decay_from) / max(1, total - decay_from)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    device = next(model.parameters()).device
    model.train()
    losses: list[float] = []
    batches: list[list[int]] = []
    drawn = 0  # decision windows used so far
    per_step = config.decision_windows_per_step
    # Two stages: windows, then whole transcripts (with their decision windows).
    for step in range(total):
        mixed = None
        if step == config.window_steps and step and tuner is not None:
            tuner.forget()  # each stage costs differently per token: compare thread counts afresh
        if step < config.window_steps:
            batch = windows.batch(config.window_batch_size, pad_id)
        else:
            if not batches:
                batches = bucketed_batches(examples, config.batch_size, order)
            batch = pad_batch([examples[i] for i in batches.pop()], pad_id, config.max_length)
            if per_step:
                rows = [decision[(drawn + i) % len(decision)] for i in range(per_step)]
                drawn += per_step
                mixed = pad_batch(rows, pad_id, config.max_length)
        if device.type != "cpu":
            batch, mixed = (None if b is None else on_device(b, device) for b in (batch, mixed))
        if tuner is not None:
            tuner.start(step)
        loss = train_step(model, optimizer, batch, config, mixed)
        scheduler.step()
        losses.append(float(loss.detach()))
        if tuner is not None:
            tuner.finish(batch.ids.numel() + (0 if mixed is None else mixed.ids.numel()))
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    return losses


def on_device(batch: Batch, device) -> Batch:
    """``batch`` with its tensors on ``device`` (the model's)."""
    return Batch(*(t.to(device, non_blocking=True) for t in batch))


def resolve_device(device: str) -> str:
    """``auto``: ``cuda`` when torch sees a GPU, else ``cpu``; ``cpu`` and ``cuda`` as given."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"warm start: device {device!r} is not one of auto, cpu, cuda")
    if device == "cpu":
        return device
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("warm start: device cuda asked for, but torch sees no GPU; use --device cpu (or auto)")
    return device


def _fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def warmstart_key(config: WarmStartConfig, base: Path, world, device: str = "cpu") -> tuple[str, dict[str, Any]]:
    """``(key, payload)``: the cache key of the warm start ``config`` trains from the tiny policy in ``base`` on
    ``world`` (a ``WorldPaths``) on ``device`` (``cpu`` or ``cuda``: other arithmetic, keyed apart); the payload
    names the config's key and fingerprints of the base's config and tokenizer and of the world's corpus, training
    questions and held-out names (``inputs.py`` hides their passages). On the CPU the key leaves the arithmetic out
    (``config.bf16`` asks for bf16 autocast where the CPU has native bf16, float32 elsewhere; both are keyed as
    float32), so a warm start built on one host serves every other; ``warmstart.json`` records which arithmetic ran."""
    payload = {
        **({"device": device} if device != "cpu" else {}),
        "config": (replace(config, bf16=False) if device == "cpu" else config).key(),
        "base": _fingerprint(base / "config.json") + _fingerprint(base / "tokenizer.json"),
        "world": _fingerprint(world.corpus) + _fingerprint(world.train) + _fingerprint(world.held_out),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12], payload


def ensure_warmstart(
    base_model: Path | str | None = None,
    out_dir: Path | str | None = None,
    config: WarmStartConfig = WarmStartConfig(),
    world=None,
    threads: int | None = 0,
    device: str = "cpu",
) -> Path:
    """Returns the warm-started policy's HF model dir, training it once (cached, keyed by everything it uses).

    Args:
        base_model: the tiny policy to start from (default: ``ensure_tiny_model()``).
        out_dir: where to save (default: ``$MR_SEARCH_CACHE/warmstart/<key>``).
        config: the supervised pass.
        world: a ``WorldPaths`` (default: the embedded world, ``ensure_world()``).
        threads: torch threads while training (see ``supervised_pass``; not part of the cache key; a GPU build
            leaves torch's setting).
        device: ``cpu``, ``cuda`` or ``auto`` (``resolve_device``); a GPU build is keyed apart from a CPU one (other
            arithmetic; ``warmstart_key``).
    """
    if world is None:
        from mr_search_embedded.world.world import ensure_world

        world = ensure_world()
    base = Path(base_model) if base_model is not None else ensure_tiny_model()
    if not (base / "config.json").is_file():
        raise FileNotFoundError(
            f"warm start: {base} holds no HF model (config.json); build it with ensure_tiny_model()"
        )
    device = resolve_device(device)
    key, key_payload = warmstart_key(config, base, world, device)  # on the CPU the same key with bf16 or without
    out = Path(out_dir) if out_dir is not None else cache_root() / "warmstart" / key
    done = out / ".complete"
    if done.exists():
        return out  # a built one needs neither torch nor transformers: every embedded launch asks for it
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mr_search.cpu.precision import cpu_has_native_bf16

    if device == "cpu" and config.bf16 and not cpu_has_native_bf16():
        config = replace(config, bf16=False)  # emulated bf16 is slower than float32; warmstart.json says which ran
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"warm start: another process is building {out}; waiting for it", file=sys.stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return out
        print(
            f"building the tiny policy's warm start once ({config.total_steps} steps on {device}): ~2-9 min on 2 CPU "
            f"cores (~2 min on a 32-core GPU node), then cached in {out}",
            file=sys.stderr,
            flush=True,
        )
        started = time.monotonic()
        tokenizer = AutoTokenizer.from_pretrained(base)
        model = AutoModelForCausalLM.from_pretrained(base, dtype="float32").to(device)
        index, questions = warmstart_inputs(world)
        transcripts = transcript_mix(questions, index, config)
        env = EnvEncoder(tokenizer)
        examples = encode_all(transcripts, tokenizer, env)
        name_words = None
        if config.decision_windows_per_step:
            name_words = world_name_words(json.loads(world.meta.read_text(encoding="utf-8")))
        decision = decision_windows(questions, index, config, tokenizer, env, name_words)
        logger.info(
            "warm start: %d transcripts (mean %.0f tokens, built in %.1fs); %d steps on %d-token windows, then %d on "
            "whole transcripts with %d decision windows each (%d, mean %.0f tokens)",
            len(examples),
            sum(len(e.input_ids) for e in examples) / len(examples),
            time.monotonic() - started,
            config.window_steps,
            config.window_length,
            config.steps,
            config.decision_windows_per_step,
            len(decision),
            sum(len(e.input_ids) for e in decision) / max(1, len(decision)),
        )

        def report(step: int, loss: float) -> None:
            if step % 50 == 0 or step == config.total_steps - 1:
                logger.info("warm start step %d/%d loss %.3f", step + 1, config.total_steps, loss)

        losses = supervised_pass(
            model,
            examples,
            config,
            tokenizer.pad_token_id,
            on_step=report,
            threads=threads if device == "cpu" else None,
            decision=decision,
        )
        model.to("cpu")
        tmp = out.with_name(f".{out.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        summary = {
            "key": key,
            **key_payload,
            "first_loss": losses[0],
            "final_loss": losses[-1],
            "seconds": round(time.monotonic() - started, 1),
            "threads": torch.get_num_threads() if threads is None else (threads or "timed"),
            "arithmetic": "bf16 autocast" if config.bf16 else "float32",
            "settings": asdict(config),
        }
        (tmp / "warmstart.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        done.write_text(key + "\n")
        logger.info("warm start saved to %s (loss %.3f -> %.3f)", out, losses[0], losses[-1])
    return out
