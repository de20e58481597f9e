#!/usr/bin/env bash
# tests/launch/run_record_frames.sh: a run with env.wrappers.frame_stack 4 (Breakout84-v0, DQN)
# records each frame once (runtime/streams/chunk.h "Frame stacks": the recording holds about a
# quarter of the whole observations' bytes), and `gearbox dataset export` rebuilds the stacks the
# policy saw: within an episode each observation is the one before shifted by a frame, next_obs
# is the next row's observation, and an episode's first observation is its first frame four
# times (the wrapper's reset). The Python client's rebuild_frame_stacks, applied to the recorded
# items, gives exactly the exported observations.
# usage: run_record_frames.sh GEARBOX CONFIG WORK_DIR PYTHON CLIENT_DIR (numpy, h5py, pyzmq,
#        msgpack; CLIENT_DIR: workers/server/client/python)
set -u
gearbox=$1 config=$2 work=$3 python=$4 client=$5
. "$(dirname "$0")/run_lib.sh"
rm -rf "$work"; mkdir -p "$work"
"$python" -c "import h5py, numpy, zmq, msgpack" 2>/dev/null ||
  { echo "no h5py, pyzmq or msgpack: skipped"; exit 77; }
"$gearbox" run "$config" --run-dir "$work/run" --record "$work/rec" \
  --set env.wrappers.frame_stack=4 --set experiment.max_env_steps=4000 \
  --set experiment.target_return=1e9 --set launch.progress=off > "$work/run.out" 2>&1 ||
  { tail "$work/run.out"; fail "the recorded run failed"; }
if ! "$gearbox" dataset export "$work/rec" -o "$work/rec.hdf5" > "$work/export.out" 2>&1; then
  grep -q "without HDF5" "$work/export.out" && { echo "no HDF5: skipped"; exit 77; }
  cat "$work/export.out"; fail "the export failed"
fi
"$python" - "$work/rec.hdf5" "$work/rec/trainer-0.gbds" "$client" <<'PY' || fail "see above"
import os, struct, sys, h5py, numpy as np
sys.path.insert(0, sys.argv[3])
from gearbox_client import DTYPES, rebuild_frame_stacks
f = h5py.File(sys.argv[1], "r")
o, n = f["observations"][:], f["next_observations"][:]
end = f["terminals"][:] | f["timeouts"][:]
assert o.shape[1:] == (4, 84, 84) and n.shape == o.shape, o.shape
N = len(o)
go_on = ~end[:-1]
flat = lambda a: a.reshape(len(a), -1)
assert (flat(n[:-1]) == flat(o[1:])).all(1)[go_on].all(), "next_obs is not the next observation"
assert (flat(o[1:, :3]) == flat(o[:-1, 1:])).all(1)[go_on].all(), "stacks do not shift by one"
assert (flat(n[:, :3]) == flat(o[:, 1:])).all(1).all(), "next_obs is not obs shifted by one"
first = np.r_[True, end[:-1]]
assert (flat(o[:, :1].repeat(4, 1)) == flat(o)).all(1)[first].all(), "a first stack is not filled"
per_step = os.path.getsize(sys.argv[2]) / N
print(f"{N} transitions, {int(first.sum())} episode starts, {per_step:.0f} recorded bytes a step "
      f"(a whole observation: {4 * 84 * 84})")
assert per_step < 2 * 84 * 84, "frames are not stored once"

# the recording's items (replay/formats/dataset.h), their rows rebuilt by the client
raw = open(sys.argv[2], "rb").read()
hb, T, ncol = struct.unpack_from("<I", raw, 12)[0], *struct.unpack_from("<qI", raw, 16)
cols, off = [], 32
for _ in range(ncol):
    name = raw[off:off + 32].split(b"\0")[0].decode()
    dt, nd = struct.unpack_from("<II", raw, off + 32)
    shape = struct.unpack_from("<4q", raw, off + 40)[:nd]
    per_item = struct.unpack_from("<I", raw, off + 72)[0]
    cols.append((name, np.dtype(DTYPES[dt]), tuple(shape) if per_item else (T,) + tuple(shape)))
    off += 80
item = sum(d.itemsize * int(np.prod(sh)) for _, d, sh in cols)
recs, rows = (len(raw) - hb) // (24 + item), []
for i in range(recs):
    at, c = hb + i * (24 + item) + 24, {}
    for name, d, sh in cols:
        c[name] = np.frombuffer(raw, d, int(np.prod(sh)), at).reshape(sh)
        at += d.itemsize * int(np.prod(sh))
    whole = rebuild_frame_stacks(c["obs"][None], c["obs_past"][None], c["valid"][None])[0]
    rows += [whole[t].tobytes() for t in range(T) if c["valid"][t]]
assert sorted(rows) == sorted(x.tobytes() for x in o), "rebuilt rows differ from the export's"
print(f"{recs} recorded items rebuilt by the Python client: their {len(rows)} valid rows are "
      "the exported observations")
PY
echo "run_record_frames: ok"
