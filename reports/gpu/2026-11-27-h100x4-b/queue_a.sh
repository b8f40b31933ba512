#!/usr/bin/env bash
# GPUs 0,1: the 0.5B shape on 2 GPUs (2 vLLM replicas, FSDP over both), micro-batches fitted at start-up (no override).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .gpu/dev.sh vllm
R=/root/work; export CUDA_VISIBLE_DEVICES=0,1
echo "start $(date -u +%T)"
PRESET=embedded ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=2 MODEL_PATH=$R/q05b TRAIN_BATCH_SIZE=32 TOTAL_STEPS=4 SAVE_FREQ=-1 \
  RUN_DIR=$R/runs/q05b-vllm-2gpu bash train_grpo_step.sh data.filter_overlong_prompts=False \
  > $R/logs/q05b-vllm-2gpu.log 2>&1; echo "q05b-vllm-2gpu rc=$? $(date -u +%T)"
touch $R/logs/a.done
