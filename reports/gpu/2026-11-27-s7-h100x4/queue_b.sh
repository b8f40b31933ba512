#!/usr/bin/env bash
# GPUs 0-3 (session 7, written on the machine after queue a's 3B launch stopped at verl's check: train batch 16 < the
# preset's PPO mini-batch 32): training at the 3B shape, vLLM, 4 GPUs, 16 questions x 5, mini-batch 16, 2 steps.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=0,1,2,3
echo "start $(date -u +%T)"
( source .gpu/dev.sh vllm >/dev/null
  ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=4 MODEL_PATH=$R/q3b TRAIN_FILE=$TRAIN_FILE VAL_FILE=$VAL_FILE TRAIN_BATCH_SIZE=16 \
    PPO_MINI_BATCH_SIZE=16 GPU_MEMORY_UTILIZATION=0.4 TOTAL_STEPS=2 SAVE_FREQ=-1 TEST_FREQ=-1 RUN_DIR=$R/runs/q3b-vllm-4gpu-m16 \
    bash train_grpo_step.sh trainer.val_before_train=False data.filter_overlong_prompts=False \
    > $R/logs/q3b-vllm-4gpu-m16.log 2>&1; echo "q3b 4gpu m16 rc=$? $(date -u +%T)" )
touch $R/logs/b.done
