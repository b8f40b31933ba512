#!/usr/bin/env bash
# Session of 2026-11-28 on one 4-GPU machine: installs the carried offline set, starts the shared embedded BM25
# service and nvidia-smi sampling, then two queues side by side (queue_a.sh on GPU 0, queue_b.sh on GPUs 1-3),
# detached so that the device call returns. Run from the carried checkout: bash reports/gpu/2026-11-28-h100x4/start.sh
set -euo pipefail
T="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"   # the checkout (this branch's tree)
W=/root/work
mkdir -p "$W/logs"
cd "$T"
echo "start $(date -u +%T)" | tee "$W/logs/start.log"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee -a "$W/logs/start.log"
bash scripts/gpu/offline_site.sh install /root/pieces "$W/site" >>"$W/logs/start.log" 2>&1
eval "$(bash scripts/gpu/offline_site.sh env "$W/site")"
export MR_SEARCH_CACHE="$W/cache"
python3 -c 'import mr_search, verl, sglang, torch_memory_saver, transformers; print("imports:", mr_search.__file__, verl.__version__, sglang.__version__, transformers.__version__)' \
  2>&1 | tail -n 1 | tee -a "$W/logs/start.log"
setsid nohup nvidia-smi --query-gpu=timestamp,index,memory.used,utilization.gpu --format=csv -l 5 \
  >"$W/logs/smi.csv" 2>/dev/null &
RETRIEVER_TYPE=bm25 setsid nohup bash retrieval_launch.sh >"$W/logs/retrieval.log" 2>&1 &
for _ in $(seq 120); do
  python3 -c 'import urllib.request,sys; sys.exit(urllib.request.urlopen("http://127.0.0.1:8000/health",timeout=2).status!=200)' \
    2>/dev/null && break
  sleep 1
done
echo "retrieval ready $(date -u +%T)" | tee -a "$W/logs/start.log"
setsid nohup bash reports/gpu/2026-11-28-h100x4/queue_a.sh >"$W/logs/a.log" 2>&1 &
setsid nohup bash reports/gpu/2026-11-28-h100x4/queue_b.sh >"$W/logs/b.log" 2>&1 &
echo "queues started $(date -u +%T)" | tee -a "$W/logs/start.log"
