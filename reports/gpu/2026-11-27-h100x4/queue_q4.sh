#!/usr/bin/env bash
# GPUs 0,1 again: the 2-GPU runs with a per-GPU micro-batch that divides each GPU's share of a mini-batch.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .gpu/dev.sh vllm
R=/root/work; export CUDA_VISIBLE_DEVICES=0,1
while [[ ! -f $R/logs/q01.done ]]; do sleep 5; done
echo "start $(date -u +%T)"
MB=actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8
ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=2 STEPS=4 RUN_DIR=$R/runs/tiny-vllm-2gpu-b bash scripts/gpu_check.sh \
  data.filter_overlong_prompts=False $MB > $R/logs/tiny-vllm-2gpu-b.log 2>&1; echo "tiny-vllm-2gpu-b rc=$? $(date -u +%T)"
PRESET=embedded ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=2 MODEL_PATH=$R/q05b TRAIN_BATCH_SIZE=32 TOTAL_STEPS=4 SAVE_FREQ=-1 \
  RUN_DIR=$R/runs/q05b-vllm-2gpu-b bash train_grpo_step.sh data.filter_overlong_prompts=False $MB \
  > $R/logs/q05b-vllm-2gpu-b.log 2>&1; echo "q05b-vllm-2gpu-b rc=$? $(date -u +%T)"
touch $R/logs/q4.done
