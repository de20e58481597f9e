#!/usr/bin/env bash
# tests/launch/run_gym_eval.sh: `gearbox eval` and experiment.eval_every on a Gymnasium run.
# The run's environment (gb_test_gym_envs:GbCartPole-v0, Gymnasium's CartPole under a name that
# only a Python importing tests/envs/gymnasium/gb_test_gym_envs.py knows) runs in a Python of
# the test's own, given by GEARBOX_GYMNASIUM_PYTHON (a relative path) at training time only:
#   - the run's config.yaml keeps that Python (env.args.python_path, made absolute);
#   - gearbox eval of the run without the variable, from another folder, finds it and plays;
#   - eval_every made videos during the run, each filming its first episode (frames, by
#     ffprobe, = that episode's steps in its JSON), and the JSON names the environment by its id;
#   - gearbox eval --video: an MP4 of 600 x 400 frames (Gymnasium's CartPole drawing), one per
#     step, titled with the id; the same returns as without --video (the render copy's episodes
#     are the same); the text output names the id;
#   - a run whose env.args.render_mode is not rgb_array: --video refused with exit 2.
# usage: run_gym_eval.sh GEARBOX CONFIG WORK_DIR PYTHON TEST_ENVS_DIR
set -u
gearbox=$1 config=$2 work=$3 python=$4 envs_dir=$5
. "$(dirname "$0")/run_lib.sh"
command -v ffprobe >/dev/null || fail "ffprobe not found (launch/install-deps.sh installs ffmpeg)"
"$python" -c "import gymnasium, pygame" 2>/dev/null ||
  fail "$python lacks gymnasium or pygame (launch/install-deps.sh installs them)"
rm -rf "$work"; mkdir -p "$work"
passed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
frames() { ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames \
             -of csv=p=0 "$1"; }
title() { ffprobe -v error -show_entries format_tags=title -of csv=p=0 "$1"; }
id=gb_test_gym_envs:GbCartPole-v0
name=gymnasium:$id

# A Python of the test's own: gearbox's packages (gymnasium, pygame) plus the test module.
"$python" -m venv --without-pip --system-site-packages "$work/py" || fail "making a venv"
site=$("$python" -c \
  'import gymnasium as g, os; print(os.path.dirname(os.path.dirname(g.__file__)))')
sp=$("$work/py/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n%s\n' "$site" "$envs_dir" > "$sp/gearbox_test.pth"
"$work/py/bin/python" -c "import gb_test_gym_envs" || fail "the test's Python lacks the test module"
"$python" -c "import gb_test_gym_envs" 2>/dev/null &&
  fail "$python imports gb_test_gym_envs: the test would prove nothing"

cd "$work" || fail "cd $work"
GEARBOX_GYMNASIUM_PYTHON=py/bin/python "$gearbox" run "$config" --run-dir "$work/run" \
  --set env.args.id=$id --set experiment.max_env_steps=30000 --set experiment.max_seconds=120 \
  --set launch.progress=off --set experiment.eval_every=10000 \
  --set trainer.checkpoint_every_s=1 > "$work/run.log" 2>&1 ||
  { tail "$work/run.log"; fail "the run"; }
grep -q "\"python_path\": \"$work/py/bin/python\"" "$work/run/config.yaml" ||
  { cat "$work/run/config.yaml"; fail "config.yaml lacks the run's Python"; }
ok "the run's config.yaml keeps GEARBOX_GYMNASIUM_PYTHON (relative) as an absolute python_path"

nvid=0
for v in "$work/run"/videos/eval_*.mp4; do
  [ -e "$v" ] || break
  j=${v%.mp4}.json
  s=$(json_get "$j" steps) f=$(frames "$v") e=$(json_get "$j" env)
  first=$(python3 -c "import json; print(int(json.load(open('$j'))['lengths'][0]))")
  echo "  $v: $s steps, $f frames (its first episode: $first steps), env $e"
  [ "$first" -gt 0 ] && [ "$f" = "$first" ] || fail "$v: $f frames for a first episode of $first steps"
  [ "$e" = "$name" ] || fail "$j names the environment $e, not $name"
  nvid=$((nvid + 1))
done
[ "$nvid" -ge 1 ] ||
  { grep -i evaluation "$work/run/logs/launcher.log"; fail "eval_every made no video"; }
ok "eval_every: $nvid video(s) of the Gymnasium environment, each filming its first episode"
for role in actor-0 policy-0 trainer-0; do
  grep -qF " $name" "$work/run/logs/$role.log" ||
    { head -5 "$work/run/logs/$role.log"; fail "logs/$role.log does not name $name"; }
done
ok "the workers' logs name the environment $name"

unset GEARBOX_GYMNASIUM_PYTHON
cd "$work/run" || fail "cd $work/run" # elsewhere than where the run started
"$gearbox" eval "$work/run" --episodes 3 --deterministic --json > "$work/plain.json" \
  2> "$work/plain.err" ||
  { cat "$work/plain.err"; fail "gearbox eval without GEARBOX_GYMNASIUM_PYTHON"; }
[ "$(json_get "$work/plain.json" env)" = "$name" ] ||
  { cat "$work/plain.json"; fail "JSON env is not $name"; }
ok "eval without the variable runs the run's Python; the JSON names $name"

"$gearbox" eval "$work/run" --episodes 3 --deterministic --json --video "$work/out.mp4" \
  > "$work/video.json" 2> "$work/video.err" ||
  { cat "$work/video.err"; fail "gearbox eval --video"; }
steps=$(json_get "$work/video.json" steps) nf=$(frames "$work/out.mp4")
size=$(ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=p=0 \
       "$work/out.mp4")
echo "out.mp4: $nf frames, $steps steps, $size, title $(title "$work/out.mp4")"
[ "$steps" -gt 0 ] && [ "$nf" = "$steps" ] || fail "the video has $nf frames for $steps steps"
[ "$size" = "600,400" ] || fail "video size $size, expected Gymnasium CartPole's 600,400"
[ "$(title "$work/out.mp4")" = "$name" ] || fail "the video's title is not $name"
[ "$(json_get "$work/video.json" returns)" = "$(json_get "$work/plain.json" returns)" ] ||
  fail "returns with --video $(json_get "$work/video.json" returns) differ from without"
ok "eval --video: one frame per step ($nf), 600 x 400, titled $name, same returns as without"

"$gearbox" eval "$work/run" --episodes 1 > "$work/eval.txt" 2>&1 ||
  { cat "$work/eval.txt"; fail "text eval"; }
grep -q "episodes of $name " "$work/eval.txt" ||
  { cat "$work/eval.txt"; fail "text output lacks $name"; }
ok "eval: the text output names $name"

mkdir -p "$work/human"
sed 's/^\(    "id": .*\)$/\1\n    "render_mode": "human"/' "$work/run/config.yaml" \
  > "$work/human/config.yaml"
grep -q render_mode "$work/human/config.yaml" || fail "could not write the render_mode config"
"$gearbox" eval "$work/human" --checkpoint "$(ls "$work"/run/checkpoints/*.model | head -n 1)" \
  --video "$work/x.mp4" > /dev/null 2> "$work/human.err"
rc=$?
[ "$rc" = 2 ] && grep -q "render_mode is human, --video needs rgb_array" "$work/human.err" ||
  { cat "$work/human.err"; fail "render_mode human: exit $rc"; }
ok "eval --video of a run with render_mode human: exit 2, $(head -c 160 "$work/human.err")"
echo "$passed passed, 0 failed"
