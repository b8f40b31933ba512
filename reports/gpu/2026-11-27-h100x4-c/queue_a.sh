#!/usr/bin/env bash
# GPUs 0,1: SGLang, tiny policy, 2 GPUs (2 replicas, FSDP over both), 4 steps + resume, all checks (make gpu-check's).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .gpu/dev.sh sglang
R=/root/work; export CUDA_VISIBLE_DEVICES=0,1
echo "start $(date -u +%T)"
ROLLOUT_ENGINE=sglang N_GPUS_PER_NODE=2 STEPS=4 RUN_DIR=$R/runs/tiny-sglang-2gpu bash scripts/gpu_check.sh \
  data.filter_overlong_prompts=False > $R/logs/tiny-sglang-2gpu.log 2>&1; echo "tiny-sglang-2gpu rc=$? $(date -u +%T)"
touch $R/logs/a.done
