#!/usr/bin/env bash
# GPUs 0-3 (session 7): the paper preset on four GPUs (SGLang, 0.5B shape, 8 questions x 5 = 10 rows a GPU: the
# preset's micro-batch 8 does not divide them, so start-up fits it to 5 with a warning; 2 steps); then training at the
# 3B shape (vLLM, 4 GPUs, 16 questions x 5, 2 steps): step split and peak memory.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=0,1,2,3
echo "start $(date -u +%T)"
( source .gpu/dev.sh sglang >/dev/null
  PRESET=paper MODEL_PATH=$R/q05b TRAIN_FILE=$TRAIN_FILE VAL_FILE=$VAL_FILE ROLLOUT_ENGINE=sglang N_GPUS_PER_NODE=4 \
    TRAIN_BATCH_SIZE=8 PPO_MINI_BATCH_SIZE=8 TOTAL_STEPS=2 SAVE_FREQ=-1 TEST_FREQ=-1 RUN_DIR=$R/runs/paper-q05b-sglang-4gpu-b8 \
    bash train_grpo_step.sh trainer.val_before_train=False data.filter_overlong_prompts=False \
    > $R/logs/paper-q05b-sglang-4gpu-b8.log 2>&1; echo "paper 4gpu b8 rc=$? $(date -u +%T)" )
( source .gpu/dev.sh vllm >/dev/null
  python3 -m mr_search.shaped_model --shape qwen2.5-3b --tokenizer "$TINY" --out $R/q3b > $R/logs/shape3b.log 2>&1 \
    || echo "3b shape failed"
  echo "3b built $(date -u +%T)"
  ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=4 MODEL_PATH=$R/q3b TRAIN_FILE=$TRAIN_FILE VAL_FILE=$VAL_FILE TRAIN_BATCH_SIZE=16 \
    GPU_MEMORY_UTILIZATION=0.4 TOTAL_STEPS=2 SAVE_FREQ=-1 TEST_FREQ=-1 RUN_DIR=$R/runs/q3b-vllm-4gpu \
    bash train_grpo_step.sh trainer.val_before_train=False data.filter_overlong_prompts=False \
    > $R/logs/q3b-vllm-4gpu.log 2>&1; echo "q3b 4gpu rc=$? $(date -u +%T)" )
touch $R/logs/a.done
