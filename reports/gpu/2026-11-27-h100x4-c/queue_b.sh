#!/usr/bin/env bash
# GPU 2: the 0.5B shape on 1 GPU with vLLM, 4 steps + resume (gpu_check.sh), then evaluation of that shape through vLLM.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .gpu/dev.sh vllm
R=/root/work; export CUDA_VISIBLE_DEVICES=2
echo "start $(date -u +%T)"
ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=1 STEPS=4 MODEL_PATH=$R/q05b TRAIN_BATCH_SIZE=32 RUN_DIR=$R/runs/q05b-vllm-1gpu-resume \
  bash scripts/gpu_check.sh data.filter_overlong_prompts=False > $R/logs/q05b-vllm-1gpu-resume.log 2>&1
echo "q05b-vllm-1gpu-resume rc=$? $(date -u +%T)"
rm -rf $R/runs/q05b-vllm-1gpu-resume/checkpoints  # ~6 GB a step
PRESET=embedded N_GPUS_PER_NODE=1 MODEL_PATH=$R/q05b ROLLOUT_ENGINE=vllm K_EVAL=3 RUN_DIR=$R/runs/eval-q05b-vllm \
  bash scripts/eval_engine.sh data.filter_overlong_prompts=False > $R/logs/eval-q05b-vllm.log 2>&1
echo "eval-q05b-vllm rc=$? $(date -u +%T)"
touch $R/logs/b.done
