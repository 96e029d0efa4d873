#!/usr/bin/env bash
# Regenerate the README figures with specsim itself (about a minute on 2 cores):
#   bash docs/figures/regenerate.sh
# frontiers.png / budget.png: the sweep of notebooks/02_policy_frontiers.ipynb (one A100 serving
# Llama-2-7B, EAGLE-3-style drafter, short synthetic requests); reliability.png: specsim calibrate on
# the step log of a static full-gamma run of the default scenario.
set -euo pipefail
cd "$(dirname "$0")/../.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
specsim trace synth --num-requests 400 --rate 20 --mix chat=0.4,code=0.3,math=0.3 --seed 0 \
    --max-prompt 256 --max-output 160 --out "$work/short.jsonl"
specsim sweep --trace "$work/short.jsonl" --out "$work/sweep" --policies mtp1,static,dspark,dspark-async \
    --concurrency 4,16,64 --num-requests 32 --requests-per-user 6 --executor serial \
    --set profile.name=a100-llama2-7b-tp1 --drafter eagle3
specsim plot "$work/sweep" --out "$work/plots" --tiers 150,200
specsim trace synth --num-requests 128 --rate 20 --mix chat=0.4,code=0.3,math=0.3 --seed 1 \
    --max-prompt 256 --max-output 256 --out "$work/cal.jsonl"
specsim run --policy static --trace "$work/cal.jsonl" --out "$work/static" > /dev/null
specsim calibrate "$work/static/step_log.parquet" --out "$work/cal"
cp "$work/plots/frontiers.png" "$work/plots/budget.png" "$work/cal/reliability.png" docs/figures/
echo "wrote docs/figures/{frontiers,budget,reliability}.png"
