#!/usr/bin/env bash
# GPU 2: the 0.5B shape on 1 GPU (the 2-GPU run's baseline, same machine, same time), then evaluation through vLLM.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .gpu/dev.sh vllm
R=/root/work; export CUDA_VISIBLE_DEVICES=2
echo "start $(date -u +%T)"
PRESET=embedded ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=1 MODEL_PATH=$R/q05b TRAIN_BATCH_SIZE=32 TOTAL_STEPS=4 SAVE_FREQ=-1 \
  RUN_DIR=$R/runs/q05b-vllm-1gpu bash train_grpo_step.sh data.filter_overlong_prompts=False \
  > $R/logs/q05b-vllm-1gpu.log 2>&1; echo "q05b-vllm-1gpu rc=$? $(date -u +%T)"
PRESET=embedded N_GPUS_PER_NODE=1 MODEL_PATH=$TINY ROLLOUT_ENGINE=vllm K_EVAL=4 RUN_DIR=$R/runs/eval-tiny-vllm \
  bash scripts/eval_engine.sh data.filter_overlong_prompts=False > $R/logs/eval-tiny-vllm.log 2>&1
echo "eval-tiny-vllm rc=$? $(date -u +%T)"
touch $R/logs/b.done
