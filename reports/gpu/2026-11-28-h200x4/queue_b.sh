#!/usr/bin/env bash
# GPUs 1-3: the Qwen2.5-7B shape (real vocabulary, 7.62B parameters, random weights) trained with the paper preset
# under SGLang with its memory saver on: 6 questions x 5 = 30 meta-episodes a step (10 rows a GPU), 3 steps with a
# checkpoint at step 3, then a resume to step 4. An entropy bonus (0.001) and a learning rate of 1e-5 make every
# update move the weights (random weights earn no reward); micro-batches of one row and chunked, checkpointed entropy
# keep the 152k-wide logits of ~8k-token rows within an 80 GB card.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
W=/root/work; export CUDA_VISIBLE_DEVICES=1,2,3 MR_SEARCH_CACHE=$W/cache
eval "$(bash scripts/gpu/offline_site.sh env $W/site)"
echo "start $(date -u +%T)"
python3 -m mr_search.shaped_model --shape qwen2.5-7b --out $W/q7b >$W/logs/shape7b.log 2>&1
echo "7b built rc=$? $(date -u +%T)"
mapfile -t files < <(python3 -m mr_search_embedded.prepare train test)
knobs=(PRESET=paper MODEL_PATH=$W/q7b TRAIN_FILE=${files[0]} VAL_FILE=${files[1]} ROLLOUT_ENGINE=sglang
  SGLANG_MEMORY_SAVER=1 N_GPUS_PER_NODE=3 ENTROPY_COEFF=0.001 LR=1e-5 TRAIN_BATCH_SIZE=6 PPO_MINI_BATCH_SIZE=6
  TEST_FREQ=-1 RUN_DIR=$W/runs/q7b-sglang-saver)
overrides=(trainer.val_before_train=False data.filter_overlong_prompts=False
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1
  actor_rollout_ref.actor.entropy_from_logits_with_chunking=True actor_rollout_ref.actor.entropy_checkpointing=True)
env "${knobs[@]}" TOTAL_STEPS=3 SAVE_FREQ=3 bash train_grpo_step.sh "${overrides[@]}" >$W/logs/q7b-1.log 2>&1
echo "q7b launch 1 (steps 1-3) rc=$? $(date -u +%T)"
env "${knobs[@]}" TOTAL_STEPS=4 SAVE_FREQ=-1 bash train_grpo_step.sh "${overrides[@]}" >$W/logs/q7b-2.log 2>&1
echo "q7b launch 2 (resume to 4) rc=$? $(date -u +%T)"
touch $W/logs/b.done
