#!/usr/bin/env bash
# GPUs 2-3 after queue c (written on the machine during the run, after queue c's first launch stopped at start-up):
# the paper preset on two GPUs with 16 questions x 5 (40 rows a GPU: the preset's log-prob micro-batch 8 divides it).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=2,3
while [[ ! -f $R/logs/c.done ]]; do sleep 5; done
echo "start $(date -u +%T)"
( source .gpu/dev.sh sglang >/dev/null
  PRESET=paper MODEL_PATH=$R/q05b TRAIN_FILE=$TRAIN_FILE VAL_FILE=$VAL_FILE ROLLOUT_ENGINE=sglang N_GPUS_PER_NODE=2 \
    TRAIN_BATCH_SIZE=16 PPO_MINI_BATCH_SIZE=16 TOTAL_STEPS=2 SAVE_FREQ=-1 TEST_FREQ=-1 RUN_DIR=$R/runs/paper-q05b-sglang-2gpu-b16 \
    bash train_grpo_step.sh trainer.val_before_train=False data.filter_overlong_prompts=False \
    > $R/logs/paper-q05b-sglang-2gpu-b16.log 2>&1; echo "paper 2gpu b16 rc=$? $(date -u +%T)" )
touch $R/logs/d.done
