#!/usr/bin/env bash
# tests/launch/bad_configs.sh: every malformed config in tests/data/configs/bad/EXPECT is rejected
# by `gearbox check` with exit status 2 and the expected file:line:column: key in its message.
# A crash (sanitizer report, signal) shows up as another exit status and fails the case.
# usage: bad_configs.sh GEARBOX DATA_DIR WORK_DIR
set -u -f
gearbox=$1 data=$2 work=$3
mkdir -p "$work"

# The 10 MB case is generated, not committed: 163840 comment lines of 64 bytes, then a bad key.
big="$work/big_10mb.yaml"
if [ ! -s "$big" ]; then
  python3 - "$big" <<'PY' || { echo "cannot write $big"; exit 1; }
import sys
with open(sys.argv[1], "w") as f:
    line = "# " + "x" * 61 + "\n"
    f.write(line * 163840)
    f.write("experiment:\n  name: t\n  sede: 3\n")
PY
fi

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; s=${s%"${s##*[![:space:]]}"}; printf '%s' "$s"; }

passed=0 failed=0
while IFS='|' read -r file args expect; do
  file=$(trim "$file")
  [ -z "$file" ] || [ "${file:0:1}" = "#" ] && continue
  args=$(trim "$args")
  expect=$(trim "$expect")
  dir=$data
  [ "$file" = big_10mb.yaml ] && dir=$work
  # shellcheck disable=SC2086  # args are --set options split on spaces on purpose
  (cd "$dir" && "$gearbox" check "$file" $args) >/dev/null 2>"$work/stderr"
  rc=$?
  msg=$(head -c 4000 "$work/stderr")
  if [ "$rc" -ne 2 ]; then
    echo "FAIL $file $args: exit status $rc, expected 2; stderr: $msg"
    failed=$((failed + 1))
  elif [[ "$msg" != *"$expect"* ]]; then
    echo "FAIL $file $args: message does not contain '$expect'; got: $msg"
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
done < "$data/bad/EXPECT"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -ge 30 ]
