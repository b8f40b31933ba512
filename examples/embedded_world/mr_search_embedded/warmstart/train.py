"""The supervised warm start: a short causal-LM pass over synthetic transcripts, cached as an HF model dir."""

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

from mr_search.agent.tokens import EnvEncoder
from mr_search_embedded.tiny_model import cache_root, ensure_tiny_model
from mr_search_embedded.warmstart.batches import Batch, WindowSampler, bucketed_batches, pad_batch
from mr_search_embedded.warmstart.decision import (
    decision_transcripts,
    presence_windows,
    skill_windows,
    world_name_words,
)
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
WARMSTART_VERSION = 6


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
        decision_steps: optimizer steps of the namesake world's decision stage (0: none; recipe 5), after the window
            stage: ``decision_batch_size`` windows a step, each a namesake or control question ending right after
            the thought that follows N's article (``decision.py``).
        decision_batch_size: decision windows per step.
        decision_last: the decision stage comes after the whole transcripts (the last thing the policy practises, as
            in the one-off check that learnt version 4's decision) instead of before them.
        decision_lr: a constant learning rate for the decision stage (0: the schedule's, as before recipe 6).
        decision_search_loss: recipe 6's decision windows train their search for N too (off: context only).
        decision_mixed: the decision windows are mixed into the whole-transcript stage instead of a stage of their own
            (recipe 7; ``decision_steps`` must be 0): each of its ``steps`` adds ``decision_batch_size`` windows, whose
            mean loss is added to the whole transcripts' (each kind its own mean), at the stage's learning rate.
        decision_name_words: recipe 6's fresh windows draw their names from the words every v3/v4 name recombines
            (``decision.world_name_words``; the world's meta.json) instead of the training namesake names' words.
        decision_read_answer: the retry windows go on past the search "<profession> N" to the answer read from B's
            article at a drawn place among the passages (recipe 9; ``decision.presence_windows``' ``read_answer``).
        decision_check_share: with ``decision_read_answer``, the share of windows that are a second attempt checking
            the first ("<profession> N" searched again after a namesake answer, N after a control's; 0: none).
        skill_batch_size: recipe 10's skill windows a whole-transcript step (``decision.skill_windows``; 0: none;
            needs ``decision_mixed``): reading B's city after a "<profession> N" search and checking a namesake answer
            by that search again, in a forward pass of their own whose mean loss is added, none training the deciding
            position.
        skill_loss_weight: the weight of the skill windows' mean loss in a step's sum (recipe 10b: 0.25; the first
            build at 1 lost the decision, 0 of 40 held-out namesake windows, recipe 8's build 37 of 40).
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
    """

    num_transcripts: int = 5000
    single_attempt_share: float = 0.85
    window_steps: int = 500
    window_length: int = 128
    window_batch_size: int = 24
    window_anchor_share: float = 0.5
    decision_steps: int = 0
    decision_batch_size: int = 24
    decision_last: bool = False
    decision_lr: float = 0.0
    decision_search_loss: bool = False
    decision_mixed: bool = False
    decision_name_words: bool = False
    decision_read_answer: bool = False
    decision_check_share: float = 0.0
    skill_batch_size: int = 0
    skill_loss_weight: float = 1.0
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

    def __post_init__(self) -> None:
        positive = ("num_transcripts", "steps", "batch_size", "max_length", "window_batch_size", "decision_batch_size")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"WarmStartConfig.{name}={getattr(self, name)}: use a positive integer")
        if self.window_steps < 0:
            raise ValueError(f"WarmStartConfig.window_steps={self.window_steps}: use 0 (no window stage) or more")
        if self.decision_steps < 0:
            raise ValueError(f"WarmStartConfig.decision_steps={self.decision_steps}: use 0 (no decision stage) or more")
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
        if not self.skill_loss_weight > 0:
            raise ValueError(f"WarmStartConfig.skill_loss_weight={self.skill_loss_weight}: use a weight > 0")
        if self.skill_batch_size < 0 or (self.skill_batch_size and not self.decision_mixed):
            raise ValueError(
                f"WarmStartConfig.skill_batch_size={self.skill_batch_size}: use 0, or a positive count with "
                "decision_mixed (the skill windows come in the whole-transcript steps)"
            )
        if self.decision_mixed and self.decision_steps:
            raise ValueError(
                f"WarmStartConfig: decision_mixed with decision_steps={self.decision_steps}; the mixed windows come in "
                "the whole-transcript steps: set decision_steps=0 (or decision_mixed off for a stage of their own)"
            )
        if not 0.0 <= self.decision_check_share <= 1.0 or (self.decision_check_share and not self.decision_read_answer):
            raise ValueError(
                f"WarmStartConfig.decision_check_share={self.decision_check_share}: use a share in [0, 1], and above 0 "
                "only with decision_read_answer (a check window reads B's article again)"
            )
        if not 0.0 <= self.decision_lr < 1.0:
            raise ValueError(f"WarmStartConfig.decision_lr={self.decision_lr}: use 0 (the schedule's) or a rate < 1")
        if not 0.0 < self.lr < 1.0:
            raise ValueError(f"WarmStartConfig.lr={self.lr}: use a learning rate in (0, 1)")
        if not 0 <= self.warmup_steps <= self.total_steps:
            raise ValueError(
                f"WarmStartConfig.warmup_steps={self.warmup_steps}: use a value in [0, window_steps + decision_steps "
                "+ steps]"
            )

    @property
    def decision_count(self) -> int:
        """How many decision windows the build draws: a stage's ``decision_steps``, or (``decision_mixed``) every
        whole-transcript step's, ``decision_batch_size`` each."""
        if self.decision_mixed:
            return self.steps * self.decision_batch_size
        return self.decision_steps * self.decision_batch_size

    @property
    def total_steps(self) -> int:
        """Optimizer steps in all: the window stage, the decision stage, then whole transcripts."""
        return self.window_steps + self.decision_steps + self.steps

    def key(self) -> str:
        fields = asdict(self)
        if not self.transcripts.outcome_feedback:
            del fields["transcripts"]["outcome_feedback"]  # the option came later: builds without it keep their key
        if not self.transcripts.namesake_copy:
            del fields["transcripts"]["namesake_copy"]  # likewise (the namesake world's recipe v2 keeps its key)
        if not self.transcripts.namesake_presence:
            del fields["transcripts"]["namesake_presence"]  # likewise (every build before recipe 6)
        if not self.decision_steps and not self.decision_mixed:
            del fields["decision_steps"], fields["decision_batch_size"]  # likewise (every build before recipe 5)
        if not self.decision_last:
            del fields["decision_last"]  # likewise (every build before recipe 6)
        if not self.decision_lr:
            del fields["decision_lr"]  # likewise
        if not self.decision_search_loss:
            del fields["decision_search_loss"]  # likewise
        for name in ("decision_mixed", "decision_name_words"):
            if not fields[name]:
                del fields[name]  # likewise (every build before recipe 7)
        for name in ("decision_read_answer", "decision_check_share"):
            if not fields[name]:
                del fields[name]  # likewise (every build before recipe 9)
        if not self.skill_batch_size:
            del fields["skill_batch_size"], fields["skill_loss_weight"]  # likewise (every build before recipe 10)
        if self.transcripts.p_verify_found is None:
            del fields["transcripts"]["p_verify_found"]  # likewise
        if not self.transcripts.presence_gold_shuffled:
            del fields["transcripts"]["presence_gold_shuffled"]  # likewise (every build before recipe 8)
        if not self.transcripts.presence_check_reformulated:
            del fields["transcripts"]["presence_check_reformulated"]  # likewise (every build before recipe 9)
        if not self.transcripts.retry_question:
            del fields["transcripts"]["retry_question"]  # likewise (every build before recipe 11)
        if not self.transcripts.reflection_question:
            del fields["transcripts"]["reflection_question"]  # likewise (every build before recipe 12)
        if not self.transcripts.p_rename:
            del fields["transcripts"]["p_rename"]  # likewise (every build before recipe 14)
        payload = json.dumps({"version": WARMSTART_VERSION, **fields}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


# The namesake world's warm-start recipe. 1: the default's; 2: NAMESAKE_SINGLE_ATTEMPT_SHARE; 3: namesake_copy (the
# thought after the name's article repeats the sentence naming the question's profession); 4: recipe 3's transcripts
# on a policy whose tokenizer has every word of a person's name as one token (``policy_config``,
# ``TinyModelConfig.name_tokens``); 5: recipe 3 (plain tokenizer) with a decision stage (``decision_steps``: short
# windows ending at the thought after N's article, namesake and control questions balanced; ``decision.py``); 6: the
# world's version 4 only (the presence check): ``namesake_presence`` transcripts and a decision stage of freshly drawn
# groups (``decision.presence_windows``). A recipe is its config: each keeps its cache key
# (``warmstart_config(world="namesake", namesake_recipe=2)`` is the build the first compare used).
# 7: 6 with the decision windows mixed into the whole-transcript stage (``decision_mixed``), their names from every
# v3/v4 name word (``decision_name_words``), and a fixed answer kept more often than checked (``p_verify_found``).
# 8: 7 with B's article at a place drawn from the query when the lexical search misses it (``presence_gold_shuffled``).
# 9: 8 with the decision windows read on to the answer from B's article at a drawn place and a share of them checks,
# and the transcripts' check of a namesake answer a search for "<profession> N" (``NAMESAKE_READ_RECIPE``).
# 10: 8 (transcripts and decision windows to the byte) with skill windows of their own (``skill_batch_size``): the
# answer read from B's article at a drawn place after the search "<profession> N", and a check of a namesake answer
# that searches "<profession> N" again; their trained tokens never include the deciding position.
# 11: 8 with every retry and check searching the whole question (``TranscriptConfig.retry_question``).
# 12: 11 with reflection turns that end with the question's line (``TranscriptConfig.reflection_question``; train and
# evaluate with ``mr_search.episode.reflection_restates_question``, which ``make compare`` sets from the warm start).
# 13: 12 trained three times as long (``NAMESAKE_LONG_SCALE``: windows, whole-transcript steps and transcripts).
# 14: 13 with half the one- and two-hop transcripts' entities renamed with fresh names (``TranscriptConfig.p_rename``).
NAMESAKE_RECIPES = 14
# The default recipe (``python -m mr_search_embedded.warmstart``, the probe, ``make compare``). 4 probed worse than 3
# (its
# policy copies a name word it saw in training questions 85% of the time and an unseen one 11%; recipe 3: 76% and
# 42%; reports/compare_namesake/investigation.md), so 3 stays the default and 4 is opt-in (``--namesake-recipe 4``);
# 5 is opt-in too.
NAMESAKE_RECIPE = 3

# The namesake recipe whose base policy has whole-word name tokens (the only one).
NAMESAKE_NAME_TOKENS_RECIPE = 4

# The recipe with the decision stage, and its size: 420 steps x 24 = 10,080 windows (the brief's ~10,000), on top of
# recipe 3's 700 steps.
NAMESAKE_DECISION_RECIPE = 5
NAMESAKE_DECISION_STEPS = 420

# The recipe for the world's version 4 (``namesake.PRESENCE_VERSION``), and its decision stage: 600 steps x 24 =
# 14,400 fresh windows (the one-off check, reports/compare_namesake/presence_check.py, fine-tuning recipe 5's policy on
# such windows, was at chance after 300 steps x 24 and well above it after 500).
# The stage comes last and runs at the check's constant learning rate: a first build with it between the window stage
# and the whole transcripts, at the schedule's rate (6e-3) and with the loss on the search and the passages too, did not
# learn the decision (its thought said "is in the passages" for every probed question; investigation.md).
# A second build with the stage last at 1e-3 but the search for N untrained in its windows learnt the decision, and its
# first searches became "<profession> N" ("I need to search for <profession> N."), name copying 4% exact: the windows
# now train that search too (decision_search_loss).
NAMESAKE_PRESENCE_RECIPE = 6
NAMESAKE_PRESENCE_DECISION_STEPS = 600
NAMESAKE_PRESENCE_DECISION_LR = 1e-3
NAMESAKE_PRESENCE_WORLD = 4

# Recipe 7 (6d in investigation.md): recipe 6's last decision stage, at its own lr 1e-3, overwrote the protocol (the
# default world's one-hop EM@1 26.7 -> 3.3), its windows' names were drawn from the 360 training namesake names' words
# (held-out names miscopied in the reformulation), and a fix at attempt 2 was often checked again and broken at 3. Here
# every whole-transcript step (500, 12 transcripts each, the schedule's lr) adds 24 decision windows: 12,000, where the
# one-off check crossed chance; names from every v3/v4 name word; after a found answer the next attempt checks it with
# chance 0.1 (else keeps it; 0.5 before).
NAMESAKE_MIXED_RECIPE = 7
NAMESAKE_MIXED_STEPS = 500
NAMESAKE_MIXED_BATCH_SIZE = 12
NAMESAKE_MIXED_P_VERIFY_FOUND = 0.1
# Recipe 8 (6e): recipe 7's build decided and reformulated right (the thought named "<profession> N" after 49 of 58 of
# its namesake attempts' first passages, 0 of 58 controls') but then answered from the wrong passage for about half of
# them: in its transcripts B's article was always passage 3 (the lexical index misses it); the dense index ranks it 1st.
NAMESAKE_SHUFFLED_RECIPE = 8
# Recipe 9: 8's build still answered from B's article only when it was passage 1 (18 of 24; 0 of 7 elsewhere), and its
# checks of a right namesake answer searched N again and re-decided "is in the passages" on a context that still held
# B's article (16 of 16 right greedy namesake answers broken by attempt 3). Here the mixed retry windows go on to the
# answer read from B's article at a place drawn uniformly (``decision_read_answer``), a share of windows is a check
# (``NAMESAKE_CHECK_SHARE``), and the transcripts' check of a namesake answer searches "<profession> N" again at
# ``p_verify`` (``presence_check_reformulated``); control checks as before.
# A first build (9a: check share 0.5, the check windows' first attempt context only, 24 windows a step) trained the
# decision in only ~6,000 windows and never learnt it (greedy: "is in the passages" after every namesake question's N):
# every window now trains it, a quarter are checks, and 32 windows a step (16,000) offset the extra trained tokens.
# That build (9b) did not learn the decision either (0 of 40 held-out namesake windows; recipe 7's: 40 of 40): not a
# recipe for make compare; reports/compare_namesake/investigation.md says what to try next.
NAMESAKE_READ_RECIPE = 9
NAMESAKE_CHECK_SHARE = 0.25
NAMESAKE_READ_BATCH_SIZE = 32
# Recipe 10: recipe 9's two skills without touching the decision (9's windows made "is" 2-3x as frequent as "not" at the
# deciding position and lost the decision): recipe 8 as it is, plus NAMESAKE_SKILL_BATCH_SIZE skill windows a step
# (half reads, half checks) in a loss of their own.
NAMESAKE_SKILL_RECIPE = 10
NAMESAKE_SKILL_BATCH_SIZE = 8
# The first build (10a, weight 1, key 25171d57b7dc) lost the decision (0 of 40 held-out namesake windows; recipe 8's
# build 37 of 40): the three means share one gradient clipped to norm 1, so the skill windows' loss is weighted down.
# That build (10b, 01c0f5feb082) kept half of it (20 of 40) and its probe fixed 15 of 81 wrong sampled namesake
# answers by attempt 3 (recipe 7: 6 of 98), one-hop EM@1 23.3 (recipe 7: 56.7); investigation.md says what next.
NAMESAKE_SKILL_LOSS_WEIGHT = 0.25
# Recipe 11: recipe 8 (no skill windows: 10b's build copied the default world's names worse, one-hop EM@1 23.3 against
# recipe 7's 56.7, and a skill window's decision was kept or lost by the build's seed) whose retries and checks search
# the whole question (``TranscriptConfig.retry_question``): 10b's retries searched the question's entity for 3-4 of 30
# one- and two-hop questions, a name ~720 characters back, and a namesake retry had to decide again; the agent's dense
# index ranks the answer's passage first for the whole question for 96-100% of every source's training questions, so a
# retry that copies the line after "Question:" fixes without a decision. (The tiny 2-layer policy of the default
# world's v5 warm start could not copy a question; this one has 4 layers.)
NAMESAKE_QUESTION_RETRY_RECIPE = 11
# Recipe 11's build copied the question in 1 of 64 greedy retries of one- and two-hop questions (its first attempts
# copied the entity's name exactly for 19 of 30 of each): it writes a question-shaped query with the names garbled, ~400
# tokens after the question. Recipe 12 puts the question's line in the reflection turn, just before the retry (an
# environment option, off in the paper; the first attempt's copy is from just as near).
NAMESAKE_RESTATED_RECIPE = 12
# Recipe 12's build (8.5 min on the 2-core box) copied the question in 10 of 49 greedy one- and two-hop retries and 0 of
# 61 namesake and control ones. Recipe 13 trains it three times as long (3,000 steps; built on one H100 in 297 s with
# ``--device cuda``, ~25 min on the 2-core box): the namesake retries copy the question (29 of 30 greedy) and fix 25
# of 30 wrong namesake answers by attempt 2 (reports/compare_namesake/investigation.md).
NAMESAKE_LONG_RECIPE = 13
NAMESAKE_LONG_SCALE = 3
# Recipe 13's build copied the held-out one- and two-hop names exactly for 14 and 17 of 30 first queries, the namesake
# ones (recombined from training questions' words) for 30 of 30: names it had seen words of. Recipe 14 renames the
# entity of NAMESAKE_RENAME_SHARE of the one- and two-hop transcripts with a fresh name (``rename.py``); the namesake
# and control transcripts are recipe 13's.
NAMESAKE_RENAME_RECIPE = 14
NAMESAKE_RENAME_SHARE = 0.5
PRESENCE_RECIPES = (
    NAMESAKE_PRESENCE_RECIPE,
    NAMESAKE_MIXED_RECIPE,
    NAMESAKE_SHUFFLED_RECIPE,
    NAMESAKE_READ_RECIPE,
    NAMESAKE_SKILL_RECIPE,
    NAMESAKE_QUESTION_RETRY_RECIPE,
    NAMESAKE_RESTATED_RECIPE,
    NAMESAKE_LONG_RECIPE,
    NAMESAKE_RENAME_RECIPE,
)

# Share of one-attempt transcripts in the namesake world's warm start: its retries (after a namesake slip, search the
# alias the first passage names) are shown only in the multi-attempt ones, and 15% of 5,000 (v6's) held ~80 of them.
NAMESAKE_SINGLE_ATTEMPT_SHARE = 0.7


def _check_namesake_recipe(caller: str, namesake_recipe: int) -> None:
    if not 1 <= namesake_recipe <= NAMESAKE_RECIPES:
        raise ValueError(f"{caller}: namesake_recipe={namesake_recipe}; use 1 to {NAMESAKE_RECIPES}")


def _check_recipe_fits_version(namesake_recipe: int) -> None:
    """Recipes 6 to 10 are for the namesake world's version 4 (``$MR_SEARCH_NAMESAKE_VERSION``) and version 4 for
    them: the other recipes' thoughts quote sentences that version 4's articles do not have."""
    from mr_search_embedded.world.variant import NAMESAKE_VERSION_ENV, namesake_version

    version = namesake_version()
    if (namesake_recipe in PRESENCE_RECIPES) != (version == NAMESAKE_PRESENCE_WORLD):
        raise ValueError(
            f"namesake recipe {namesake_recipe} does not fit the namesake world's version {version}: recipes "
            f"{', '.join(map(str, PRESENCE_RECIPES))} are for version {NAMESAKE_PRESENCE_WORLD} only "
            f"({NAMESAKE_VERSION_ENV}={NAMESAKE_PRESENCE_WORLD} --namesake-recipe {NAMESAKE_PRESENCE_RECIPE}), recipes "
            "1-5 for versions 2-3"
        )


def default_namesake_recipe() -> int:
    """The namesake world's default recipe for its version (``$MR_SEARCH_NAMESAKE_VERSION``): ``NAMESAKE_RECIPE``,
    or ``NAMESAKE_PRESENCE_RECIPE`` for version ``NAMESAKE_PRESENCE_WORLD`` (the only recipe that fits it)."""
    from mr_search_embedded.world.variant import namesake_version

    return NAMESAKE_PRESENCE_RECIPE if namesake_version() == NAMESAKE_PRESENCE_WORLD else NAMESAKE_RECIPE


def warmstart_config(
    outcome_feedback: bool = False, world: str = "default", namesake_recipe: int | None = None
) -> WarmStartConfig:
    """The default warm start, or (``outcome_feedback``) the one whose reflection turns say whether the previous
    answer was right, for training and evaluating with ``mr_search.episode.outcome_feedback`` (MAGE-style). In the
    ``namesake`` world (``MR_SEARCH_WORLD``) recipe ``namesake_recipe`` (1 to ``NAMESAKE_RECIPES``, default
    ``default_namesake_recipe()``: ``NAMESAKE_RECIPE``, 6 on the world's version 4): from 2 on, twice as
    many transcripts show all K attempts (``NAMESAKE_SINGLE_ATTEMPT_SHARE``); from 3 on, the thought after the
    name's article repeats the sentence that names the question's profession (``TranscriptConfig.namesake_copy``);
    4 changes the base policy, not the transcripts (``policy_config``); 5 is 3 with the decision stage
    (``NAMESAKE_DECISION_STEPS``); 6 to 10 are for the world's version 4 (``NAMESAKE_MIXED_RECIPE``,
    ``NAMESAKE_SHUFFLED_RECIPE``, ``NAMESAKE_READ_RECIPE``, ``NAMESAKE_SKILL_RECIPE``,
    ``NAMESAKE_QUESTION_RETRY_RECIPE``, ``NAMESAKE_RESTATED_RECIPE``, ``NAMESAKE_LONG_RECIPE``,
    ``NAMESAKE_RENAME_RECIPE``)."""
    if world != "namesake":
        return WarmStartConfig(transcripts=TranscriptConfig(outcome_feedback=outcome_feedback))
    namesake_recipe = default_namesake_recipe() if namesake_recipe is None else namesake_recipe
    _check_namesake_recipe("warmstart_config", namesake_recipe)
    _check_recipe_fits_version(namesake_recipe)
    if namesake_recipe in PRESENCE_RECIPES and namesake_recipe != NAMESAKE_PRESENCE_RECIPE:
        read = namesake_recipe == NAMESAKE_READ_RECIPE
        transcripts = TranscriptConfig(
            outcome_feedback=outcome_feedback,
            namesake_presence=True,
            p_verify_found=NAMESAKE_MIXED_P_VERIFY_FOUND,
            presence_gold_shuffled=namesake_recipe != NAMESAKE_MIXED_RECIPE,
            presence_check_reformulated=read,
            retry_question=namesake_recipe >= NAMESAKE_QUESTION_RETRY_RECIPE,
            reflection_question=namesake_recipe >= NAMESAKE_RESTATED_RECIPE,
            p_rename=NAMESAKE_RENAME_SHARE if namesake_recipe >= NAMESAKE_RENAME_RECIPE else 0.0,
        )
        config = WarmStartConfig(
            decision_read_answer=read,
            decision_check_share=NAMESAKE_CHECK_SHARE if read else 0.0,
            decision_batch_size=NAMESAKE_READ_BATCH_SIZE if read else WarmStartConfig.decision_batch_size,
            transcripts=transcripts,
            single_attempt_share=NAMESAKE_SINGLE_ATTEMPT_SHARE,
            steps=NAMESAKE_MIXED_STEPS,
            batch_size=NAMESAKE_MIXED_BATCH_SIZE,
            decision_mixed=True,
            decision_search_loss=True,
            decision_name_words=True,
            skill_batch_size=NAMESAKE_SKILL_BATCH_SIZE if namesake_recipe == NAMESAKE_SKILL_RECIPE else 0,
            skill_loss_weight=NAMESAKE_SKILL_LOSS_WEIGHT if namesake_recipe == NAMESAKE_SKILL_RECIPE else 1.0,
        )
        if namesake_recipe >= NAMESAKE_LONG_RECIPE:
            scale = NAMESAKE_LONG_SCALE
            config = replace(
                config,
                window_steps=config.window_steps * scale,
                steps=config.steps * scale,
                num_transcripts=config.num_transcripts * scale,
            )
        return config
    if namesake_recipe == NAMESAKE_PRESENCE_RECIPE:
        transcripts = TranscriptConfig(outcome_feedback=outcome_feedback, namesake_presence=True)
        return WarmStartConfig(
            transcripts=transcripts,
            single_attempt_share=NAMESAKE_SINGLE_ATTEMPT_SHARE,
            decision_steps=NAMESAKE_PRESENCE_DECISION_STEPS,
            decision_last=True,
            decision_lr=NAMESAKE_PRESENCE_DECISION_LR,
            decision_search_loss=True,
        )
    transcripts = TranscriptConfig(outcome_feedback=outcome_feedback, namesake_copy=namesake_recipe >= 3)
    share = NAMESAKE_SINGLE_ATTEMPT_SHARE if namesake_recipe >= 2 else WarmStartConfig().single_attempt_share
    decision = NAMESAKE_DECISION_STEPS if namesake_recipe == NAMESAKE_DECISION_RECIPE else 0
    return WarmStartConfig(transcripts=transcripts, single_attempt_share=share, decision_steps=decision)


def policy_config(policy: str = "tiny", world: str = "default", namesake_recipe: int | None = None):
    """The ``TinyModelConfig`` the warm start of ``policy`` (a ``POLICY_SHAPES`` name) starts from: the shape as it
    is, or in the namesake world's recipe ``NAMESAKE_NAME_TOKENS_RECIPE``, with a tokenizer in which every word of a
    person's name is one token (``name_tokens``: its own cache key; the other recipes keep the plain base)."""
    from mr_search_embedded.tiny_model import policy_shape

    shape = policy_shape(policy)
    if world != "namesake":
        return shape
    namesake_recipe = default_namesake_recipe() if namesake_recipe is None else namesake_recipe
    _check_namesake_recipe("policy_config", namesake_recipe)
    return replace(shape, name_tokens=True) if namesake_recipe == NAMESAKE_NAME_TOKENS_RECIPE else shape


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

    # A batch without environment text to predict (recipe 6's decision windows) adds no term: the mean over no
    # positions would be NaN.
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
    skills: Sequence[Encoded] = (),
) -> list[float]:
    """Trains ``model`` in place on ``examples`` (and, in the decision stage, on ``decision``: the decision windows,
    ``config.decision_batch_size`` a step in order, from the first again when used up); returns the loss per step.

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
            f"supervised_pass: decision_steps={config.decision_steps} (decision_mixed={config.decision_mixed}) but no "
            "decision windows were given; pass decision=encode_all(decision.decision_transcripts(...)) or set "
            "decision_steps=0 and decision_mixed off"
        )
    if config.skill_batch_size and not skills:
        raise ValueError(
            f"supervised_pass: skill_batch_size={config.skill_batch_size} but no skill windows were given; pass "
            "skills=skill_batches(...) or set skill_batch_size=0"
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
        return _train(model, examples, config, pad_id, on_step, tuner, decision, skills)
    finally:
        if tuner is not None:
            logger.info("warm start: steps per thread count %s", tuner.steps_per_count)
        torch.set_num_threads(previous_threads)


def transcript_mix(questions: Sequence[dict], index: LexicalIndex, config: WarmStartConfig, count: int = 0) -> list:
    """The warm start's transcripts: ``count`` (default ``config.num_transcripts``), a ``single_attempt_share`` of
    them one attempt long, the rest with all K attempts."""
    count = count or config.num_transcripts
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
    """The decision windows, encoded (``config.decision_count`` of them, in training order; none without a decision
    stage or mix): whole prompts, instruction included (the batch runs it once). ``name_words``: the fresh names'
    words (``decision.world_name_words``; needed with ``decision_name_words``)."""
    count = config.decision_count
    if not count:
        return []
    if config.decision_name_words and name_words is None:
        raise ValueError("decision_windows: decision_name_words needs name_words (decision.world_name_words(meta))")
    if config.transcripts.namesake_presence:
        # As in the check that learnt it: no loss on the passages, and (decision_search_loss off) none on the search
        # for N either.
        drawn = presence_windows(
            questions,
            index,
            count,
            seed=config.transcripts.seed + 2,
            train_search=config.decision_search_loss,
            name_words=name_words if config.decision_name_words else None,
            read_answer=config.decision_read_answer,
            check_share=config.decision_check_share,
        )
        encoded = encode_all(drawn, tokenizer, env)
        return [replace(e, env_mask=[0] * len(e.env_mask)) for e in encoded]
    else:
        drawn = decision_transcripts(questions, index, count, config.transcripts, seed=config.transcripts.seed + 2)
    return encode_all(drawn, tokenizer, env)


def skill_batches(questions, index, config: WarmStartConfig, tokenizer, env, name_words) -> list[Encoded]:
    """Recipe 10's skill windows, encoded (``steps * skill_batch_size``; none when 0), the environment text unscored
    as in the decision windows."""
    count = config.steps * config.skill_batch_size
    if not count:
        return []
    if name_words is None:
        raise ValueError("skill_batches: skill windows need name_words (decision.world_name_words(meta))")
    drawn = skill_windows(questions, index, count, name_words, seed=config.transcripts.seed + 3)
    return [replace(e, env_mask=[0] * len(e.env_mask)) for e in encode_all(drawn, tokenizer, env)]


def train_step(
    model, optimizer, batch: Batch, config: WarmStartConfig, mixed: Batch | None = None, skills: Batch | None = None
):
    """One optimizer step on ``batch`` (forward under bf16 autocast if ``config.bf16``, gradient clipped to 1), plus
    the mean loss of ``mixed`` (``decision_mixed``'s windows, a forward pass of their own) when given; returns the
    loss tensor."""
    import torch

    with torch.autocast(batch.ids.device.type, dtype=torch.bfloat16, enabled=config.bf16):
        loss = causal_lm_loss(model, batch.ids, batch.labels, batch.env_labels, config.env_loss_weight)
        if mixed is not None:
            loss = loss + causal_lm_loss(model, mixed.ids, mixed.labels, mixed.env_labels, config.env_loss_weight)
        if skills is not None:
            skill = causal_lm_loss(model, skills.ids, skills.labels, skills.env_labels, config.env_loss_weight)
            loss = loss + config.skill_loss_weight * skill
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def _train(model, examples, config, pad_id, on_step, tuner: ThreadTuner | None, decision=(), skills=()) -> list[float]:
    import torch

    torch.manual_seed(config.seed)
    order = random.Random(config.seed)
    windows = WindowSampler(examples, config.window_length, config.window_anchor_share, random.Random(config.seed + 1))
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(0.9, config.adam_beta2), weight_decay=0.0, foreach=True
    )
    total = config.total_steps
    decay_from = max(config.warmup_steps, int(0.8 * total))

    decision_from = config.window_steps + (config.steps if config.decision_last else 0)
    decision_to = decision_from + config.decision_steps

    def schedule(step: int) -> float:
        if config.decision_lr and decision_from <= step < decision_to:
            return config.decision_lr / config.lr
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
    mixed_drawn = 0  # decision windows used so far by decision_mixed
    skills_drawn = 0  # recipe 10's skill windows used so far
    # Stages: windows, then decision windows and whole transcripts in the configured order.
    for step in range(total):
        mixed = skill = None
        if step in (config.window_steps, decision_from, decision_to) and step and tuner is not None:
            tuner.forget()  # each stage costs differently per token: compare thread counts afresh
        if step < config.window_steps:
            batch = windows.batch(config.window_batch_size, pad_id)
        elif decision_from <= step < decision_to:
            first = (step - decision_from) * config.decision_batch_size
            rows = [decision[(first + i) % len(decision)] for i in range(config.decision_batch_size)]
            batch = pad_batch(rows, pad_id, config.max_length)
        else:
            if not batches:
                batches = bucketed_batches(examples, config.batch_size, order)
            batch = pad_batch([examples[i] for i in batches.pop()], pad_id, config.max_length)
            if config.decision_mixed:
                rows = [decision[(mixed_drawn + i) % len(decision)] for i in range(config.decision_batch_size)]
                mixed_drawn += config.decision_batch_size
                mixed = pad_batch(rows, pad_id, config.max_length)
            if config.skill_batch_size:
                drawn_rows = [skills[(skills_drawn + i) % len(skills)] for i in range(config.skill_batch_size)]
                skills_drawn += config.skill_batch_size
                skill = pad_batch(drawn_rows, pad_id, config.max_length)
        if device.type != "cpu":
            batch, mixed, skill = (None if b is None else on_device(b, device) for b in (batch, mixed, skill))
        if tuner is not None:
            tuner.start(step)
        if skill is None:
            loss = train_step(model, optimizer, batch, config, mixed)
        else:
            loss = train_step(model, optimizer, batch, config, mixed, skills=skill)
        scheduler.step()
        losses.append(float(loss.detach()))
        if tuner is not None:
            extra = sum(0 if b is None else b.ids.numel() for b in (mixed, skill))
            tuner.finish(batch.ids.numel() + extra)
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    return losses


def on_device(batch: Batch, device) -> Batch:
    """``batch`` with its tensors on ``device`` (the model's)."""
    return Batch(*(t.to(device, non_blocking=True) for t in batch))


def resolve_device(device: str) -> str:
    """``auto``: ``cuda`` when torch sees a GPU, else ``cpu``; ``cpu`` and ``cuda`` as given."""
    import torch

    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"warm start: device {device!r} is not one of auto, cpu, cuda")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("warm start: device cuda asked for, but torch sees no GPU; use --device cpu (or auto)")
    return device


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


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
            arithmetic), and the CPU keys are as before.

    The CPU key leaves the arithmetic out: ``config.bf16`` asks for bf16 autocast where the CPU has native bf16
    (elsewhere float32 runs), and both are keyed as float32 (the key every CPU build without native bf16 had), so a
    warm start built on one host serves every other; ``warmstart.json`` records which arithmetic ran.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mr_search_retrieval.encoders import cpu_has_native_bf16

    if world is None:
        from mr_search_embedded.world.world import ensure_world

        world = ensure_world()
    base = Path(base_model) if base_model is not None else ensure_tiny_model()
    if not (base / "config.json").is_file():
        raise FileNotFoundError(
            f"warm start: {base} holds no HF model (config.json); build it with ensure_tiny_model()"
        )
    device = resolve_device(device)
    key_payload = {
        **({"device": device} if device != "cpu" else {}),
        "config": (replace(config, bf16=False) if device == "cpu" else config).key(),
        "base": _fingerprint(base / "config.json") + _fingerprint(base / "tokenizer.json"),
        "world": _fingerprint(world.corpus) + _fingerprint(world.train),
    }
    key = hashlib.sha256(json.dumps(key_payload, sort_keys=True).encode()).hexdigest()[:12]
    if device == "cpu" and config.bf16 and not cpu_has_native_bf16():
        config = replace(config, bf16=False)  # emulated bf16 is slower than float32; warmstart.json says which ran
    out = Path(out_dir) if out_dir is not None else cache_root() / "warmstart" / key
    done = out / ".complete"
    if done.exists():
        return out
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
        index = LexicalIndex(_read_jsonl(world.corpus))
        questions = _read_jsonl(world.train)
        transcripts = transcript_mix(questions, index, config)
        env = EnvEncoder(tokenizer)
        examples = encode_all(transcripts, tokenizer, env)
        name_words = None
        if config.decision_name_words:
            name_words = world_name_words(json.loads(world.meta.read_text(encoding="utf-8")))
        decision = decision_windows(questions, index, config, tokenizer, env, name_words)
        skills = skill_batches(questions, index, config, tokenizer, env, name_words)
        if skills:
            logger.info(
                "warm start: %d skill windows (mean %.0f tokens), %d a step",
                len(skills),
                sum(len(e.input_ids) for e in skills) / len(skills),
                config.skill_batch_size,
            )
        logger.info(
            "warm start: %d transcripts (mean %.0f tokens, built in %.1fs); %d steps on %d-token windows, %d on "
            "decision windows (%d, mean %.0f tokens) and %d on whole transcripts, %s",
            len(examples),
            sum(len(e.input_ids) for e in examples) / len(examples),
            time.monotonic() - started,
            config.window_steps,
            config.window_length,
            config.decision_steps,
            len(decision),
            sum(len(e.input_ids) for e in decision) / max(1, len(decision)),
            config.steps,
            "mixed into the whole transcripts"
            if config.decision_mixed
            else "the decision windows last"
            if config.decision_last
            else "the whole transcripts last",
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
            skills=skills,
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
