#!/usr/bin/env bash
# tests/launch/run_eval.sh: `gearbox eval` and experiment.eval_every on a real run.
# Trains the default CartPole PPO config until solved, with an evaluation video every 40000 env
# steps during the run (trainer.checkpoint_every_s 2, so checkpoints exist); then:
#   - each video the run made films its first episode: as many frames (ffprobe) as that episode's
#     steps in its JSON;
#   - each finished evaluation is in the run's TensorBoard file (tb_eval_check.py, TensorBoard's
#     own readers): its GIF as the image eval/video and its JSON's eval/ scalars at its env steps;
#   - gearbox eval RUN --episodes 20 --deterministic --json --video: mean return >= 475 (the
#     verdict's own 20 episodes, experiment.eval_episodes 20, seed 1: a verdict on the default
#     2 episodes once met 472 over these 20) and the
#     MP4's frame count equals the JSON's steps (one frame per step played);
#   - the evaluations (during the run and after) played the checkpoints' policy files on
#     gearbox's C without loading libtorch, and `--kernels libtorch` (the model file on
#     libtorch) plays the same episodes;
#   - the text output; and the errors: not a run directory, no checkpoint, an unknown
#     checkpoint name, --video for an environment without render, a corrupt model file, a
#     corrupt policy file, bad options.
# usage: run_eval.sh GEARBOX CONFIG WORK_DIR PLUGIN_WITHOUT_RENDER PYTHON
set -u
gearbox=$1 config=$2 work=$3 norender=$4 python=$5
. "$(dirname "$0")/run_lib.sh"
command -v ffprobe >/dev/null || fail "ffprobe not found (launch/install-deps.sh installs ffmpeg)"
"$python" -c "import tensorboard" 2>/dev/null ||
  fail "$python has no tensorboard package (launch/install-deps.sh installs it)"
rm -rf "$work"; mkdir -p "$work"
run=$work/run
passed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }

frames() { ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames \
             -of csv=p=0 "$1"; }

"$gearbox" run "$config" --run-dir "$run" --set experiment.max_env_steps=400000 \
  --set experiment.max_seconds=400 --set launch.progress=plain \
  --set experiment.eval_every=40000 --set trainer.checkpoint_every_s=2 \
  --set experiment.eval_episodes=20 > "$work/run.log" 2>&1
status=$?
tail -3 "$work/run.log"
reason=$(json_get "$run/summary.json" exit_reason)
steps=$(json_get "$run/summary.json" env_steps)
echo "run: exit $status, $reason after $steps env steps"
[ "$status" -eq 0 ] && [ "$reason" = solved ] || fail "the run did not solve CartPole"
ok "training solved"

# Videos made during the run: at least one, each named by the env steps it started at (below
# the run's total), filming the first episode its JSON says it played, frame for step.
nvid=0
for v in "$run"/videos/eval_*.mp4; do
  [ -e "$v" ] || break
  j=${v%.mp4}.json at=${v##*/eval_}; at=${at%.mp4}
  [ -s "$j" ] || fail "$v has no JSON beside it"
  s=$(json_get "$j" steps) f=$(frames "$v") e=$(json_get "$j" episodes)
  first=$(python3 -c "import json; print(int(json.load(open('$j'))['lengths'][0]))")
  echo "  $v: $e episodes, $s steps, $f frames, return $(json_get "$j" return_mean)"
  [ "$f" = "$first" ] || fail "$v: $f frames for a first episode of $first steps (it films one)"
  [ "$e" = 20 ] || fail "$v: $e episodes, expected experiment.eval_episodes (20)"
  [ "$at" -ge 40000 ] && [ "$at" -le "$steps" ] || fail "$v: named $at, outside [40000, $steps]"
  nvid=$((nvid + 1))
done
[ "$nvid" -ge 1 ] || { grep -i evaluation "$run/logs/launcher.log"; fail "eval_every made no video"; }
grep -q "evaluation at [0-9]* env steps done" "$run/logs/launcher.log" || fail "no evaluation logged as done"
ok "eval_every: $nvid video(s) during the run, each filming its first episode"
for j in "$run"/videos/eval_*.json; do
  [ "$(json_get "$j" kernels)" = "gearbox fp32 (no libtorch)" ] &&
    [ "$(json_get "$j" libtorch_loaded)" = False ] ||
    fail "$j: played on $(json_get "$j" kernels), libtorch loaded: $(json_get "$j" libtorch_loaded)"
done
ok "eval_every: every evaluation played its policy file on gearbox's C, libtorch not loaded"
"$python" "$(dirname "$0")/tb_eval_check.py" "$run" || fail "evaluations in TensorBoard"
ok "eval_every: each evaluation in TensorBoard (eval/video GIF, eval/ scalars)"

# A run too short for any periodic checkpoint (checkpoint_every_s 300), its evaluations not held
# (experiment.eval_hold false: they play the newest checkpoint): its crossings wait, and the
# evaluation is made from the final checkpoint at the end, named by the final env steps.
"$gearbox" run "$config" --run-dir "$work/short" --set experiment.max_env_steps=5000 \
  --set launch.progress=off --set experiment.target_return=1e9 --set experiment.eval_every=1000 \
  --set experiment.eval_hold=false \
  --set experiment.eval_episodes=1 > "$work/short.log" 2>&1 || { tail "$work/short.log"; fail "short run"; }
final=$(json_get "$work/short/summary.json" env_steps)
ls "$work/short/videos"
[ "$(ls "$work/short/videos"/*.mp4 | wc -l)" = 1 ] && [ -s "$work/short/videos/eval_$final.mp4" ] ||
  fail "short run: expected exactly videos/eval_$final.mp4"
[ "$(frames "$work/short/videos/eval_$final.mp4")" = "$(json_get "$work/short/videos/eval_$final.json" steps)" ] ||
  fail "short run: frames differ from steps"
ok "eval_every: a crossing without a newer checkpoint is evaluated from the final one"
"$python" "$(dirname "$0")/tb_eval_check.py" "$work/short" || fail "short run: TensorBoard"
"$python" "$(dirname "$0")/tb_check.py" "$work/short" charts/return_mean_100 ||
  fail "short run: the metrics rows in TensorBoard, beside the evaluation's events"
ok "eval_every: the final evaluation (after the workers stopped) is in TensorBoard, beside the rows"

# The trained agent: 20 deterministic episodes, with a video.
"$gearbox" eval "$run" --episodes 20 --deterministic --json --video "$work/out.mp4" \
  > "$work/eval.json" 2> "$work/eval.err" || { cat "$work/eval.err"; fail "gearbox eval failed"; }
cat "$work/eval.json"
mean=$(json_get "$work/eval.json" return_mean)
esteps=$(json_get "$work/eval.json" steps)
[ "$(json_get "$work/eval.json" episodes)" = 20 ] || fail "not 20 episodes"
python3 -c "import sys; sys.exit(0 if float('$mean') >= 475 else 1)" || fail "mean return $mean < 475"
ok "eval: mean return $mean over 20 deterministic episodes"
nf=$(frames "$work/out.mp4")
echo "out.mp4: $nf frames, $esteps steps played"
[ "$nf" = "$esteps" ] || fail "the video has $nf frames for $esteps steps"
[ "$(json_get "$work/eval.json" frames)" = "$esteps" ] || fail "JSON frames differs from steps"
size=$(ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=p=0 "$work/out.mp4")
[ "$size" = "400,300" ] || fail "video size $size, expected CartPole's 400,300"
ok "eval: the MP4 has one frame per step ($nf)"

# The same checkpoint on libtorch's model (--kernels libtorch): the same episodes, step for step.
"$gearbox" eval "$run" --episodes 20 --deterministic --json --kernels libtorch \
  > "$work/eval_libtorch.json" 2> "$work/eval_libtorch.err" ||
  { cat "$work/eval_libtorch.err"; fail "gearbox eval --kernels libtorch failed"; }
python3 - "$work/eval.json" "$work/eval_libtorch.json" <<'EOF' || fail "the two kernels differ"
import json, sys
c, t = (json.load(open(p)) for p in sys.argv[1:])
print(f"gearbox C: {c['kernels']}, libtorch loaded {c['libtorch_loaded']}; "
      f"--kernels libtorch: {t['kernels']}, loaded {t['libtorch_loaded']}")
assert c["kernels"] == "gearbox fp32 (no libtorch)" and not c["libtorch_loaded"]
assert t["kernels"] == "libtorch" and t["libtorch_loaded"]
assert c["checkpoint"] == t["checkpoint"] and c["lengths"] == t["lengths"]
assert all(abs(a - b) <= 1e-6 * max(1, abs(a)) for a, b in zip(c["returns"], t["returns"]))
EOF
ok "eval: the policy file on gearbox's C and the model file on libtorch play the same episodes"

# Text output.
"$gearbox" eval "$run" --episodes 2 --deterministic > "$work/eval.txt" 2>&1 || fail "text eval failed"
grep -q '^return  mean' "$work/eval.txt" && grep -q '^length  mean' "$work/eval.txt" ||
  { cat "$work/eval.txt"; fail "text output lacks return/length lines"; }
ok "eval: text output"

# Errors: each a clear message and exit status 2 (1 for a model that cannot be loaded).
expect_fail() { # STATUS PATTERN ARGS...
  local want=$1 pat=$2; shift 2
  "$gearbox" eval "$@" > "$work/err.out" 2> "$work/err.txt"
  local rc=$?
  [ "$rc" -eq "$want" ] || { cat "$work/err.txt"; fail "eval $*: exit $rc, expected $want"; }
  grep -q -- "$pat" "$work/err.txt" || { cat "$work/err.txt"; fail "eval $*: no '$pat' in the message"; }
  ok "eval $* -> $rc: $(head -c 150 "$work/err.txt")"
}
expect_fail 2 "is not a run directory" "$work/nowhere"
mkdir -p "$work/nockpt"; cp "$run/config.yaml" "$work/nockpt/"
expect_fail 2 "has no checkpoint trainer-0" "$work/nockpt"
expect_fail 2 "has no checkpoint trainer-7" "$run" --checkpoint trainer-7
mkdir -p "$work/norender"
cat > "$work/norender/config.yaml" <<YAML
experiment: {name: norender}
env: {name: plugin, plugin: $norender}
trainer: {algorithm: {name: ppo}}
YAML
echo x > "$work/any.model"
expect_fail 2 "has no render function" "$work/norender" --checkpoint "$work/any.model" --video "$work/x.mp4"
[ ! -e "$work/x.mp4" ] || fail "a refused --video left a file"
head -c 1000 /dev/urandom > "$work/corrupt.model"
expect_fail 1 "loading $work/corrupt.model" "$run" --checkpoint "$work/corrupt.model"
# a run whose policy file is corrupt (a flipped byte): refused, naming the file
mkdir -p "$work/badpolicy/checkpoints"; cp "$run/config.yaml" "$work/badpolicy/"
cp "$run"/checkpoints/trainer-0.* "$work/badpolicy/checkpoints/"
pf=$(ls "$work"/badpolicy/checkpoints/trainer-0.*.policy)
python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[-5] ^= 1; open(sys.argv[1], 'wb').write(b)" "$pf"
expect_fail 1 "policy file $pf is corrupt" "$work/badpolicy" --checkpoint trainer-0
expect_fail 2 "--kernels is gearbox or libtorch" "$run" --kernels cuda
expect_fail 2 "--episodes wants an integer" "$run" --episodes 0
expect_fail 2 "unknown option" "$run" --frob
expect_fail 2 "it needs --video" "$run" --gif "$work/x.gif"
expect_fail 2 "missing RUN_DIR"
echo "$passed passed, 0 failed"
