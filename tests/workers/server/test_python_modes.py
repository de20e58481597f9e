"""tests/workers/server/test_python_modes.py: the Python client's offline sampling modes and tables
against a real `gearbox serve` process with two tables (server.tables): windows crossing item
boundaries, transitions, whole episodes and epochs (each transition once per epoch, two cursors
apart), every value checked against the D4RL source (make_d4rl encodes each row in its values), and
requests naming each table.
Usage: test_python_modes.py GEARBOX MAKE_D4RL PYTHON_DIR TMPDIR"""
import os
import subprocess
import sys

import numpy as np

GEARBOX, MAKE_D4RL, PYDIR, TMP = sys.argv[1:5]
sys.path.insert(0, PYDIR)
from gearbox_client import Client, ServerError  # noqa: E402

N, T = 1000, 8
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def episodes():
    """(first row, length) of each source episode, from make_d4rl's rule."""
    out, start = [], 0
    for r in range(N):
        if r % 97 == 96 or r % 151 == 150 or r == N - 1:
            out.append((start, r + 1 - start))
            start = r + 1
    return out


EPS = episodes()


def verify_rows(b, strict=False):
    """Wrong values in an offline reply: each row's episode, timesteps, length, every column."""
    bad = 0
    S = b["timestep"].shape[1]
    for i in range(len(b.index)):
        first, ln = EPS[int(b["episode"][i])]
        t0 = int(b["timestep"][i, 0])
        valid = min(S, ln - t0)
        bad += int(b.length[i] != valid) + int(strict and valid != S)
        steps = np.arange(S)
        v = steps < valid
        rows = first + t0 + steps
        bad += int(np.sum(b["timestep"][i] != np.where(v, t0 + steps, 0)))
        k3 = np.arange(3)
        bad += int(np.sum(b["obs"][i] != np.where(v[:, None], 10 * rows[:, None] + k3, 0)))
        bad += int(np.sum(b["next_obs"][i] != np.where(v[:, None], 10 * (rows[:, None] + 1) + k3,
                                                        0)))
        bad += int(np.sum(b["action"][i] != np.where(v[:, None], rows[:, None] / 2 + np.arange(2),
                                                      0)))
        bad += int(np.sum(b["reward"][i] != np.where(v, rows / 4, 0).astype(np.float32)))
        bad += int(np.sum(b["terminal"][i] != np.where(v, rows % 97 == 96, 0)))
        bad += int(np.sum(b["timeout"][i] != np.where(v, rows % 151 == 150, 0)))
        bad += int(np.sum(b["valid"][i] != v))
        bad += int(np.sum(b["info_qpos"][i] != np.where(v, 3 * rows, 0)))
    return bad


def main():
    h5 = os.path.join(TMP, "py_modes.h5")
    subprocess.check_call([MAKE_D4RL, h5, str(N)])
    cfg = os.path.join(TMP, "py_modes.yaml")
    with open(cfg, "w") as f:
        f.write("experiment: {name: pymodes}\nenv: {name: CartPole-v1}\n"
                "trainer: {algorithm: {name: ppo}}\n"
                "server:\n  endpoint: 'tcp://127.0.0.1:0'\n  dataset: %s\n"
                "  dataset_format: d4rl\n  steps: %d\n  max_batch_rows: 512\n"
                "  replay: {capacity: 400}\n"
                "  tables: {expert: \"dataset=%s dataset_format=d4rl steps=5 "
                "replay.selector=fifo replay.capacity=300\"}\n" % (h5, T, h5))
    srv = subprocess.Popen([GEARBOX, "serve", cfg], stdout=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        check(line.startswith("gearbox serve: serving"), "server start line: %r" % line)
        c = Client(line.split()[-1])
        info = c.info()
        check(info["tables"] == ["default", "expert"], "tables %r" % info["tables"])
        check(info["episodes"] == len(EPS) and info["transitions"] == N, "episode index")
        ex = c.info(table="expert")
        check(ex["steps"] == 5 and ex["selector"] == "fifo", "expert table info")
        # windows of 11 steps over 8-step items: every value, and most cross an item boundary
        bad = crossing = 0
        for _ in range(10):
            b = c.sample(64, mode="window", steps=11)
            check(b.mode == "window" and b["obs"].shape == (64, 11, 3), "window shape")
            bad += verify_rows(b, strict=True)
            crossing += int(np.sum(b["timestep"][:, 0] // T != b["timestep"][:, -1] // T))
        check(bad == 0, "window: %d wrong values" % bad)
        check(crossing > 320, "windows crossing items: %d of 640" % crossing)
        b = c.sample(64, mode="window", steps=7, table="expert")
        check(verify_rows(b, strict=True) == 0, "expert table windows")
        b = c.sample(8, mode="window", steps=4, columns=["reward"])
        check(list(b) == ["reward", "episode", "timestep"] and b["reward"].shape == (8, 4),
              "window column subset: %r" % list(b))
        rows = np.array([EPS[int(e)][0] for e in b["episode"]])[:, None] + b["timestep"]
        check(np.array_equal(b["reward"], (rows / 4).astype(np.float32)), "window rewards")
        # transitions (n-step rows padded at the episode's end) and whole episodes
        b = c.sample(256, mode="transition", steps=3)
        check(verify_rows(b) == 0 and np.allclose(b.prob, 1.0 / N), "transition rows")
        b = c.sample(8, mode="episode")
        lens = [EPS[int(e)][1] for e in b["episode"]]
        check(b["obs"].shape[1] == max(lens) and list(b.length) == lens, "episode padding")
        check(verify_rows(b) == 0, "episode values")
        # an epoch per cursor: each transition once; cursors do not disturb each other
        for name in ("a", "b"):
            seen = np.zeros(N, dtype=int)
            c.sample(100, mode="epoch", cursor="other", reset=True)
            while True:
                c.sample(100, mode="epoch", cursor="other")  # a reader in between
                b = c.sample(300, mode="epoch", cursor=name)
                check(verify_rows(b) == 0 and b.epoch == 0, "epoch rows")
                np.add.at(seen, [EPS[int(e)][0] + int(t) for e, t in
                                 zip(b["episode"], b["timestep"][:, 0])], 1)
                if b.end:
                    break
            check(np.all(seen == 1), "cursor %s: each transition once (%d distinct)"
                  % (name, np.count_nonzero(seen)))
            check(len(b.index) == N % 300, "short last batch")
        b = c.sample(300, mode="epoch", cursor="a")
        check(b.epoch == 1 and b.pos == 0, "next epoch")
        # inserts name their table; each keeps its own schema
        def items(inf, n):
            cols = {name: np.zeros((n,) + ((inf["steps"],) if not per_item else ()) + shape, dt)
                    for name, (dt, shape, per_item) in inf["columns"].items()}
            cols["valid"][:] = 1
            return cols
        check(c.insert(items(ex, 2), table="expert") == ex["size"] + 2, "insert into expert")
        check(c.insert(items(info, 1)) == info["size"] + 1, "insert into the default table")
        for kw, what in [(dict(mode="epoch"), "cursor"), (dict(mode="sliding"), "unknown mode"),
                         (dict(table="nope"), "no table 'nope'")]:
            try:
                c.sample(4, **kw)
                check(False, "no error for %r" % kw)
            except ServerError as e:
                check(what in str(e), "error text %r" % str(e))
        c.close()
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    check(srv.returncode == 0, "server exit status %s" % srv.returncode)
    print("python modes: %d failures" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
