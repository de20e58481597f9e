"""tests/workers/server/test_dataset_export.py: `gearbox dataset export` turns a real recording
into a D4RL HDF5 file that h5py reads and `gearbox serve` serves.
A short `gearbox run configs/cartpole_ppo.yaml --record DIR` (2 actors' streams interleaved in
the recording), then `gearbox dataset export DIR -o out.hdf5`; read back with h5py:
- the rows are exactly the recording's valid steps (this file parses the .gbds format itself,
  from replay/formats/dataset.h): the same multiset of (obs, action, reward, next obs,
  terminal, infos/logp, infos/version);
- every row is a real CartPole step: next_observations = the dynamics applied to
  (observations, actions) (offline_bc.py's copy of Gymnasium's CartPole);
- each episode's rows are consecutive: next_observations[i] = observations[i+1] on every row
  that ends no episode (terminals and timeouts), so the items of each stream were chained;
- the file serves with server.dataset_format d4rl, and what is sampled is among the rows.
Usage: test_dataset_export.py GEARBOX SOURCE_DIR TMPDIR. Exit 77 (skip) without h5py."""
import math
import os
import shutil
import subprocess
import sys

import numpy as np

try:
    import h5py
except ImportError:
    print("skip: h5py not importable (Debian: python3-h5py)")
    sys.exit(77)

GEARBOX, SRC, TMP = sys.argv[1:4]
TMP = os.path.join(TMP, "dataset_export")
sys.path.insert(0, os.path.join(SRC, "workers", "server", "client", "python"))
from gearbox_client import Client  # noqa: E402

failures = []
DT = {0: np.float32, 1: np.float64, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64,
      6: np.uint8, 7: np.uint16, 8: np.uint8, 9: np.float16, 11: np.uint32, 12: np.uint64}


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def read_gbds(path):
    """(T, {name: (dtype, shape, per_item)}, [ {name: array}, length ]) per record."""
    raw = open(path, "rb").read()
    assert raw[:8] == b"GBDSET1\0", "magic"
    hdr_bytes = int.from_bytes(raw[12:16], "little")
    T = int.from_bytes(raw[16:24], "little", signed=True)
    ncol = int.from_bytes(raw[24:28], "little")
    cols, off = [], 32
    for _ in range(ncol):
        name = raw[off:off + 32].split(b"\0")[0].decode()
        dtype, ndim = np.frombuffer(raw[off + 32:off + 40], np.uint32)
        shape = tuple(np.frombuffer(raw[off + 40:off + 72], np.int64)[:ndim])
        per_item = int.from_bytes(raw[off + 72:off + 76], "little")
        cols.append((name, np.dtype(DT[int(dtype)]), shape, per_item))
        off += 80
    item_bytes = int.from_bytes(raw[off:off + 8], "little")
    recs, pos = [], hdr_bytes
    while pos + 24 + item_bytes <= len(raw):
        length = int.from_bytes(raw[pos + 16:pos + 20], "little", signed=True)
        p, rec = pos + 24, {}
        for name, dt, shape, per_item in cols:
            count = int(np.prod(shape)) * (1 if per_item else T)
            a = np.frombuffer(raw[p:p + count * dt.itemsize], dt)
            rec[name] = a.reshape(shape if per_item else (T,) + shape)
            p += count * dt.itemsize
        recs.append((rec, length))
        pos += 24 + item_bytes
    return T, recs


def cartpole_step(s, a):
    """offline_bc.py's CartPole dynamics (Gymnasium's), one step from state s."""
    x, x_dot, th, th_dot = (float(v) for v in s)
    force = 10.0 if a == 1 else -10.0
    cos, sin = math.cos(th), math.sin(th)
    temp = (force + 0.05 * th_dot * th_dot * sin) / 1.1
    th_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos * cos / 1.1))
    x_acc = temp - 0.05 * th_acc * cos / 1.1
    return np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, th + 0.02 * th_dot,
                     th_dot + 0.02 * th_acc])


def main():
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(TMP)
    rec_dir, run_dir, out = (os.path.join(TMP, x) for x in ("data", "run", "out.hdf5"))
    subprocess.check_call([GEARBOX, "run", os.path.join(SRC, "configs", "cartpole_ppo.yaml"),
                           "--record", rec_dir, "--run-dir", run_dir,
                           "--set", "experiment.max_env_steps=30000",
                           "--set", "experiment.max_seconds=120", "--set", "launch.progress=off"],
                          stdout=subprocess.DEVNULL)
    r = subprocess.run([GEARBOX, "dataset", "export", rec_dir, "-o", out], capture_output=True,
                       text=True)
    print(r.stdout.strip(), r.stderr.strip(), file=sys.stderr)
    check(r.returncode == 0, "export exit status %d" % r.returncode)
    # the recording's valid steps, read here from the .gbds files
    want = []
    for name in sorted(os.listdir(rec_dir)):
        T, recs = read_gbds(os.path.join(rec_dir, name))
        for rec, length in recs:
            for t in range(length):
                if rec["valid"][t]:
                    nxt = rec["obs"][t + 1] if t + 1 < T else rec["next_obs"]
                    want.append((rec["obs"][t].tobytes(), int(rec["action"][t]),
                                 float(rec["reward"][t]), nxt.tobytes(),
                                 bool(rec["terminated"][t]), float(rec["logp"][t]),
                                 int(rec["version"][t])))
    with h5py.File(out, "r") as f:
        check(sorted(f.keys()) == ["actions", "infos", "next_observations", "observations",
                                   "rewards", "terminals", "timeouts"],
              "datasets %r" % sorted(f.keys()))
        check(sorted(f["infos"].keys()) == ["logp", "version"], "infos %r"
              % sorted(f["infos"].keys()))
        logp, version = f["infos/logp"][:], f["infos/version"][:]
        obs, act, rew = f["observations"][:], f["actions"][:], f["rewards"][:]
        nxt, term, tout = f["next_observations"][:], f["terminals"][:], f["timeouts"][:]
    n = len(obs)
    check(term.dtype == np.bool_ and tout.dtype == np.bool_ and rew.dtype == np.float32,
          "dtypes %s %s %s" % (term.dtype, tout.dtype, rew.dtype))
    got = [(obs[i].tobytes(), int(act[i]), float(rew[i]), nxt[i].tobytes(), bool(term[i]),
            float(logp[i]), int(version[i])) for i in range(n)]
    check(n == len(want) and n > 1000, "%d rows, %d valid steps recorded" % (n, len(want)))
    check(sorted(got) == sorted(want), "the rows are the recording's valid steps")
    bad = sum(not np.allclose(cartpole_step(obs[i], act[i]), nxt[i], atol=1e-4)
              for i in range(n))
    check(bad == 0, "%d of %d rows are not CartPole steps" % (bad, n))
    ends = term | tout
    cont = ~ends[:-1]
    broken = int(np.sum(np.any(nxt[:-1][cont] != obs[1:][cont], axis=1)))
    check(broken == 0, "%d rows not followed by their next observation" % broken)
    check(ends[-1], "the last row ends an episode")
    print("exported %d rows, %d episode ends" % (n, int(ends.sum())), file=sys.stderr)
    # served as D4RL
    cfg = os.path.join(TMP, "serve.yaml")
    with open(cfg, "w") as f:
        f.write("experiment: {name: export}\nenv: {name: CartPole-v1}\n"
                "trainer: {algorithm: {name: ppo}}\n"
                "server: {endpoint: 'tcp://127.0.0.1:0', dataset: %s, dataset_format: d4rl, "
                "steps: 1}\n" % out)
    srv = subprocess.Popen([GEARBOX, "serve", cfg], stdout=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        check(line.startswith("gearbox serve: serving %d items" % n), "served: %r" % line)
        c = Client(line.split()[-1])
        b = c.sample(64)
        rows = set(got)
        miss = sum((b["obs"][i, 0].tobytes(), int(b["action"][i, 0]), float(b["reward"][i, 0]),
                    b["next_obs"][i, 0].tobytes(), bool(b["terminal"][i, 0]),
                    float(b["info_logp"][i, 0]), int(b["info_version"][i, 0])) not in rows
                   for i in range(64))
        check(miss == 0, "%d sampled rows not in the file" % miss)
        c.close()
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    print("dataset export: %d failures" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
