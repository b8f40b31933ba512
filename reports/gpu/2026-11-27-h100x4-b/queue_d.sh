#!/usr/bin/env bash
# GPUs 0-3 after the other queues: the tiny policy's checks on 4 GPUs (4 vLLM replicas, FSDP over 4), 4 steps + resume.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .gpu/dev.sh vllm
R=/root/work; export CUDA_VISIBLE_DEVICES=0,1,2,3
while [[ ! -f $R/logs/a.done || ! -f $R/logs/b.done || ! -f $R/logs/c.done ]]; do sleep 5; done
echo "start $(date -u +%T)"
ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=4 STEPS=4 RUN_DIR=$R/runs/tiny-vllm-4gpu bash scripts/gpu_check.sh \
  data.filter_overlong_prompts=False > $R/logs/tiny-vllm-4gpu.log 2>&1; echo "tiny-vllm-4gpu rc=$? $(date -u +%T)"
touch $R/logs/d.done
