#!/usr/bin/env bash
# Qwen2.5-7B-Instruct, ALFWorld, GACA: one node, 8 GPUs (80 GB), vLLM tensor parallel 2,
# FSDP parameter offload off. UNTESTED ON GPU (docs/verl.md).
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen2.5-7B-Instruct} NGPUS=${NGPUS:-8} TP=${TP:-2} \
  exec bash "$(dirname "$0")/run_alfworld.sh" \
  actor_rollout_ref.actor.fsdp_config.param_offload=False \
  actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \
  actor_rollout_ref.ref.fsdp_config.param_offload=True \
  "$@"
