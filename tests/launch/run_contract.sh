#!/usr/bin/env bash
# tests/launch/run_contract.sh: the run contract (runtime/run/contract.h): an inline and a
# distributed run of one config write the same metrics.csv header and the same summary.json keys
# (nested keys included), and the same learner statistics have values (those the algorithm
# reports) or stay empty (those it has not) in both.
# usage: run_contract.sh GEARBOX CONFIG WORK_DIR STEPS
set -u
gearbox=$1 config=$2 work=$3 steps=$4
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
export GEARBOX_RUN_TABLE="$work/table"
common=(--set experiment.max_env_steps="$steps" --set experiment.max_seconds=120
        --set experiment.target_return=1e9 --set experiment.metrics_interval_s=0.25
        --set launch.progress=off)
for mode in inline local; do
  "$gearbox" run "$config" --run-dir "$work/$mode" --set launch.mode=$mode "${common[@]}" \
    > "$work/$mode.log" 2>&1 || { tail "$work/$mode.log"; fail "the $mode run failed"; }
  [ -s "$work/$mode/summary.json" ] || fail "$mode: no summary.json"
done
# The header line, the summary's keys (as paths) and the columns with a value in the last row.
describe() {
  python3 - "$1" <<'PY'
import csv, json, sys
run = sys.argv[1]
with open(f"{run}/metrics.csv") as f:
    header = f.readline().strip()
    rows = list(csv.DictReader([header + "\n"] + f.readlines()))
def keys(o, prefix=""):
    if isinstance(o, dict):
        for k, v in o.items():
            yield prefix + k
            yield from keys(v, prefix + k + ".")
print("header:", header)
print("keys:", " ".join(sorted(keys(json.load(open(f"{run}/summary.json"))))))
learner = ["loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction",
           "explained_var", "q_mean", "td_abs_mean", "alpha", "epsilon", "lr", "grad_norm"]
print("learner:", " ".join(c for c in learner if rows and rows[-1].get(c, "") != ""))
PY
}
# summary.json's episode_return_mean is the last metrics.csv row's return_mean_100 (one window)
for mode in inline local; do
  python3 - "$work/$mode" <<'PY' || fail "$mode: summary.json's mean is not the last row's"
import csv, json, sys
rows = list(csv.DictReader(open(f"{sys.argv[1]}/metrics.csv")))
mean = json.load(open(f"{sys.argv[1]}/summary.json"))["episode_return_mean"]
print(f"{sys.argv[1]}: episode_return_mean {mean}, last row {rows[-1]['return_mean_100']}")
sys.exit(0 if abs(float(rows[-1]["return_mean_100"]) - mean) <= 1e-6 else 1)
PY
done
describe "$work/inline" > "$work/inline.txt" || fail "cannot read the inline run's files"
describe "$work/local" > "$work/local.txt" || fail "cannot read the local run's files"
cat "$work/local.txt"
grep -q "^learner: .*loss" "$work/local.txt" || fail "the local run reported no learner statistics"
diff "$work/inline.txt" "$work/local.txt" > "$work/diff.txt" ||
  { cat "$work/diff.txt"; fail "inline and local runs of $(basename "$config") differ (<, >)"; }
echo "1 passed, 0 failed"
