#!/usr/bin/env bash
# tests/launch/run_verdict.sh: "solved" means the policy solves the task (runtime/run/contract.h,
# the verdict), and what a short run writes (metrics.csv rows, rates, summary.json's mean).
#   1. CartPole PPO that cannot learn (trainer.algorithm.lr 0) against a target of 20: the
#      stochastic policy's training episodes reach it (a random CartPole episode lasts about 22
#      steps), its deterministic policy does not (about 10 at seed 2: some initial weights'
#      greedy policies balance for hundreds of steps, e.g. seeds 1 and 3 of the trainer's
#      learning without libtorch, 3, 4 and 6 of libtorch's). With evaluations on
#      (experiment.eval_every) the run must not end solved: it evaluates as soon as the
#      training episodes reach the target, finds the policy short, goes on to max_seconds, and
#      summary.json says solved_by "evaluation" with that evaluation's figures.
#   2. CartPole PPO as shipped, evaluations on: solved, by an evaluation at the target
#      (summary.json's evaluation: reached_target, its return, episodes and checkpoint step);
#      that checkpoint kept as the set checkpoints/solved, and playing as well again; the
#      evaluation held the learning, so it is the trainer's final checkpoint too (and in 1, the
#      short evaluations released it: the run learned on).
#   4. A budget that stops the run before its evaluation ends: CartPole PPO against a target
#      of 5, which every policy reaches (a CartPole episode lasts at least 8 steps), with 2000
#      env steps: the training episodes reach 5 at once, the budget stops the run well before
#      an evaluation can end, and the evaluation then plays the final checkpoint, trained
#      within the budget: it reaches 5, so the run is solved (it ended max_env_steps before).
#   3. Both: the run's first 2 s have at least 10 metrics.csv rows (5 a second of a shorter
#      run's wall; a short run's plot has a curve; once a second before), the rates read more
#      than 0 while the counts rise, and
#      summary.json's episode_return_mean is the last row's return_mean_100. An inline run of
#      2.5 s the same (it steps from its start, libtorch loading meanwhile: 100000 env steps
#      took 0.9 s, 9 rows, once a plain MLP acted in C there); its solved_by is
#      "training_episodes" (none else).
# usage: run_verdict.sh GEARBOX CONFIG WORK_DIR
set -u
gearbox=$1 config=$2 work=$3
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
passed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
evals=(--set experiment.eval_every=100000000 --set experiment.eval_episodes=5
       --set launch.progress=off)

# rows RUN [MIN_ROWS]: checks metrics.csv against summary.json (item 3 above): at least 10 rows
# in the first 2 s (5 a second: a run that ended sooner, as a CartPole solved in 1.0 s with 9
# rows, 5 a second of its wall), or MIN_ROWS in all; prints what it found.
rows() {
  python3 - "$1" "${2:-0}" <<'PY'
import csv, json, math, sys
run, min_rows = sys.argv[1], int(sys.argv[2])
rows = list(csv.DictReader(open(f"{run}/metrics.csv")))
s = json.load(open(f"{run}/summary.json"))
t = [float(r["time_s"]) for r in rows]
early = sum(1 for x in t if x <= 2.0)
want = min(10, math.floor(5 * s["wall_seconds"]))
print(f"{run}: {len(rows)} rows, {early} in the first 2 s; summary episode_return_mean "
      f"{s['episode_return_mean']}, last row return_mean_100 {rows[-1]['return_mean_100']}")
bad = []
if min_rows == 0 and early < want:
    bad.append(f"{early} rows in the first 2 s (at least {want})")
if len(rows) < min_rows:
    bad.append(f"{len(rows)} rows (at least {min_rows})")
if abs(float(rows[-1]["return_mean_100"]) - s["episode_return_mean"]) > 1e-6:
    bad.append("summary.json's episode_return_mean is not the last row's return_mean_100")
for i, r in enumerate(rows):  # a rate over the last 2 s is > 0 when the count rose in them
    for col, rate in (("env_steps", "env_steps_per_s"), ("train_steps", "train_steps_per_s")):
        back = [q for q in rows[:i] if t[i] - float(q["time_s"]) >= 2.0]
        if back and float(r[col]) > float(back[-1][col]) and not float(r[rate]) > 0:
            bad.append(f"row {i + 1} (t {t[i]:.2f}): {rate} {r[rate]} while {col} rose")
print("\n".join("  " + b for b in bad[:5]))
sys.exit(1 if bad else 0)
PY
}

# 1. The training episodes reach the target, the policy does not.
run=$work/short
"$gearbox" run "$config" --run-dir "$run" --set trainer.algorithm.lr=0 --set experiment.seed=2 \
  --set experiment.target_return=20 --set experiment.max_seconds=5 "${evals[@]}" \
  > "$work/short.log" 2>&1
status=$?
tail -4 "$work/short.log"
[ "$status" -eq 0 ] || fail "the run without learning failed (exit $status)"
[ "$(json_get "$run/summary.json" solved)" = False ] ||
  fail "a policy short of 20 was called solved: $(json_get "$run/summary.json" exit_reason)"
grep -q "training episodes reached the target 20" "$run/logs/launcher.log" ||
  fail "the training episodes never reached 20: the test proves nothing"
[ "$(json_get "$run/summary.json" exit_reason)" = max_seconds ] || fail "not ended by max_seconds"
[ "$(json_get "$run/summary.json" solved_by)" = evaluation ] || fail "solved_by is not evaluation"
[ "$(json_get "$run/summary.json" reached_target)" = False ] || fail "evaluation.reached_target"
mean=$(json_get "$run/summary.json" return_mean) n=$(json_get "$run/summary.json" evaluations)
python3 -c "import sys; sys.exit(0 if float('$mean') < 20 else 1)" ||
  fail "the evaluation's return_mean $mean"
[ "$n" -ge 1 ] ||
  fail "no evaluation counted"
grep -q "short of the target 20" "$run/logs/launcher.log" || fail "the short evaluation not logged"
ok "training episodes at the target, the policy at $mean over $n evaluation(s): not solved"
# each evaluation held the learning at its checkpoint (experiment.eval_hold), and a short one
# let it go on: the final checkpoint is past the first step held at (the last hold can come as
# the run stops, released only after the trainers did)
held=$(grep -o "learning held at step [0-9]*" "$run/logs/trainer-0.log" | head -1)
last=$(sed -n 's/^step //p' "$run/checkpoints/trainer-0.checkpoint")
grep -q "learning again from step ${held##* }" "$run/logs/trainer-0.log" && [ -n "$held" ] &&
  [ "$last" -gt "${held##* }" ] || fail "held evaluations: '$held', released?, final step $last"
ok "a short evaluation released the held learning (${held}; final checkpoint step $last)"
rows "$run" || fail "$run: rows"
ok "no learning: metrics.csv rows, rates and the summary's mean"

# 2. A policy that solves it: solved by the evaluation.
run=$work/solved
"$gearbox" run "$config" --run-dir "$run" --set experiment.max_seconds=90 "${evals[@]}" \
  > "$work/solved.log" 2>&1
status=$?
tail -3 "$work/solved.log"
[ "$status" -eq 0 ] && [ "$(json_get "$run/summary.json" exit_reason)" = solved ] ||
  fail "CartPole PPO with evaluations did not solve (exit $status)"
[ "$(json_get "$run/summary.json" solved_by)" = evaluation ] || fail "solved_by is not evaluation"
[ "$(json_get "$run/summary.json" reached_target)" = True ] || fail "evaluation.reached_target"
python3 - "$run/summary.json" <<'PY' || fail "the deciding evaluation in summary.json"
import json, sys
e = json.load(open(sys.argv[1]))["evaluation"]
print("deciding evaluation:", e)
assert e["return_mean"] >= 475 and e["episodes"] == 5 and e["checkpoint_step"] >= 0
assert e["held"] is True
assert e["env_steps"] > 0
PY
ok "solved by an evaluation at the target"
# the policy the verdict rests on is kept, and plays as the verdict said: the same episodes
# (the run's seed, the evaluation's count, greedy) give the same returns. (A shorter replay
# judged against the target is no check: its first 3 of the 5 episodes can fall short where the
# 5 do not, as one CI's 500, 500, 424 of a 484.8 did.)
step=$(json_get "$run/summary.json" checkpoint_step)
grep -qx "step $step" "$run/checkpoints/solved.checkpoint" ||
  fail "checkpoints/solved.checkpoint does not name step $step"
"$gearbox" eval "$run" --checkpoint solved --episodes 5 --deterministic --json \
  > "$work/solved_eval.json" 2> "$work/solved_eval.log" || fail "gearbox eval --checkpoint solved"
python3 - "$work/solved_eval.json" "$step" "$run/summary.json" <<'PY' || fail "the kept policy"
import json, sys
e = json.load(open(sys.argv[1]))
deciding = json.load(open(sys.argv[3]))["evaluation"]
print(f"checkpoint solved: step {e['checkpoint_step']}, return {e['return_mean']} "
      f"(the deciding evaluation: {deciding['return_mean']})")
assert e["checkpoint_step"] == int(sys.argv[2]) and e["episodes"] == deciding["episodes"]
assert abs(e["return_mean"] - deciding["return_mean"]) < 1e-6 and e["return_mean"] >= 475
PY
ok "the solved policy kept as checkpoints/solved (step $step) and evaluated again"
# a plain `gearbox eval` of the run plays the policy it delivered: the one the verdict rests on,
# which is the trainer's last too: the evaluation held the learning (experiment.eval_hold)
"$gearbox" eval "$run" --episodes 1 --deterministic --json > "$work/plain_eval.json" \
  2> "$work/plain_eval.log" || fail "gearbox eval of the solved run"
"$gearbox" eval "$run" --checkpoint trainer-0 --episodes 1 --deterministic --json \
  > "$work/last_eval.json" 2> /dev/null || fail "gearbox eval --checkpoint trainer-0"
grep -q "ended solved by an evaluation" "$work/plain_eval.log" ||
  fail "gearbox eval does not say it plays the solved policy: $(cat "$work/plain_eval.log")"
python3 - "$work/plain_eval.json" "$work/last_eval.json" "$step" <<'PY' || fail "delivered"
import json, sys
plain, last = (json.load(open(p)) for p in sys.argv[1:3])
print(f"plain eval: step {plain['checkpoint_step']}; trainer-0: step {last['checkpoint_step']}")
assert plain["checkpoint_step"] == int(sys.argv[3]) == last["checkpoint_step"]
PY
ok "gearbox eval plays the solved policy by default, and it is the run's final one"
rows "$run" || fail "$run: rows"
ok "solved: metrics.csv rows, rates and the summary's mean"

# 4. The evaluation that decides ends after the budget stopped the run.
run=$work/budget
"$gearbox" run "$config" --run-dir "$run" --set experiment.target_return=5 \
  --set experiment.max_env_steps=2000 --set launch.progress=off \
  --set experiment.eval_every=1000000 --set experiment.eval_episodes=5 > "$work/budget.log" 2>&1
status=$?
tail -2 "$work/budget.log"
reached=$(json_get "$run/summary.json" reached_target)
reason=$(json_get "$run/summary.json" exit_reason)
[ "$reached/$reason/$status" = True/solved/0 ] ||
  fail "budget: evaluation reached_target $reached, exit_reason $reason, exit $status"
[ "$(json_get "$run/summary.json" solved_by)" = evaluation ] || fail "budget: solved_by"
after=$(grep -c "solved: the evaluation at" "$run/logs/launcher.log")
ok "an evaluation after the budget decides: solved (decided after the stop: $after)"

# 3. inline: the same rows; its verdict rests on the training episodes
run=$work/inline
"$gearbox" run "$config" --run-dir "$run" --set launch.mode=inline \
  --set experiment.max_seconds=2.5 --set experiment.target_return=1e9 \
  --set launch.progress=off > "$work/inline.log" 2>&1 ||
  { tail "$work/inline.log"; fail "the inline run failed"; }
[ "$(json_get "$run/summary.json" solved_by)" = training_episodes ] || fail "inline: solved_by"
[ "$(json_get "$run/summary.json" evaluation)" = null ] || fail "inline: an evaluation?"
rows "$run" || fail "$run: rows"
ok "inline: metrics.csv rows, rates and the summary's mean; solved_by training_episodes"
echo "$passed passed, 0 failed"
