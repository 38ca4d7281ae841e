#!/usr/bin/env bash
# Qwen2.5-1.5B-Instruct, ALFWorld, GACA: one node, 2 GPUs (80 GB). UNTESTED ON GPU (docs/verl.md).
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen2.5-1.5B-Instruct} NGPUS=${NGPUS:-2} TP=${TP:-1} \
  exec bash "$(dirname "$0")/run_alfworld.sh" "$@"
