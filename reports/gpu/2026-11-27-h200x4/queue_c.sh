#!/usr/bin/env bash
# GPUs 2-3 (session 6): the paper preset on two GPUs (SGLang, 0.5B shape, 2 replicas, FSDP over both, 2 steps); then
# training at the 1.5B shape (vLLM, 2 GPUs, 2 steps): step split and peak memory.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=2,3
echo "start $(date -u +%T)"
( source .gpu/dev.sh sglang >/dev/null
  PRESET=paper MODEL_PATH=$R/q05b TRAIN_FILE=$TRAIN_FILE VAL_FILE=$VAL_FILE ROLLOUT_ENGINE=sglang N_GPUS_PER_NODE=2 \
    TRAIN_BATCH_SIZE=8 PPO_MINI_BATCH_SIZE=8 TOTAL_STEPS=2 SAVE_FREQ=-1 TEST_FREQ=-1 RUN_DIR=$R/runs/paper-q05b-sglang-2gpu \
    bash train_grpo_step.sh trainer.val_before_train=False data.filter_overlong_prompts=False \
    > $R/logs/paper-q05b-sglang-2gpu.log 2>&1; echo "paper 2gpu rc=$? $(date -u +%T)" )
( source .gpu/dev.sh vllm >/dev/null
  python3 -m mr_search.shaped_model --shape qwen2.5-1.5b --tokenizer "$TINY" --out $R/q15b > $R/logs/shape15b.log 2>&1 \
    || echo "1.5b shape failed"
  ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=2 MODEL_PATH=$R/q15b TRAIN_FILE=$TRAIN_FILE VAL_FILE=$VAL_FILE TRAIN_BATCH_SIZE=32 \
    GPU_MEMORY_UTILIZATION=0.4 TOTAL_STEPS=3 SAVE_FREQ=-1 TEST_FREQ=-1 RUN_DIR=$R/runs/q15b-vllm-2gpu \
    bash train_grpo_step.sh trainer.val_before_train=False data.filter_overlong_prompts=False \
    > $R/logs/q15b-vllm-2gpu.log 2>&1; echo "q15b 2gpu rc=$? $(date -u +%T)" )
touch $R/logs/c.done
