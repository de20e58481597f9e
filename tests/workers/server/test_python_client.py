"""tests/workers/server/test_python_client.py: the Python client against a real `gearbox serve`
process over tcp: schema, every sampled value checked against the D4RL source (make_d4rl encodes
each row in its values), step ranges and column subsets, torch tensors without a copy, several
client processes at once, per-request selectors (uniform and weighted from one server, each checked
for its exact probabilities and by chi-square; fifo by name; refusals listing what the server
offers), insert, priority updates, checkpoint, and clear errors; and the example client of
docs/protocol.md, written from that page alone.
Usage: test_python_client.py GEARBOX MAKE_D4RL PYTHON_DIR TMPDIR"""
import multiprocessing as mp
import os
import subprocess
import sys

import numpy as np
import zmq

GEARBOX, MAKE_D4RL, PYDIR, TMP = sys.argv[1:5]
sys.path.insert(0, PYDIR)
from gearbox_client import Client, ServerError  # noqa: E402

N, T = 1000, 8
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def plan():
    items, start = {}, 0
    for r in range(N):
        if r % 97 == 96 or r % 151 == 150 or r == N - 1:
            for k in range(start, r + 1, T):
                items[k] = min(T, r + 1 - k)
            start = r + 1
    return items


PLAN = plan()


def verify(b, t0=0, t1=T):
    """Number of wrong values in a sample of every column."""
    bad = 0
    S = t1 - t0
    for i in range(len(b.index)):
        if t0 > 0 and b.length[i] == 0:
            # an item of at most t0 steps: nothing of it is in the range, every value is zero
            # (its source row cannot be read back from its values then)
            bad += sum(int(np.count_nonzero(b[k][i])) for k in b)
            continue
        first = int(b["obs"][i, 0, 0] // 10) - t0
        if first not in PLAN:
            bad += 1
            continue
        ln = PLAN[first]
        bad += int(b.length[i] != max(0, min(ln, t1) - t0))
        steps = np.arange(t0, t1)
        rows = first + steps
        v = (steps < ln)
        k3 = np.arange(3)
        exp_obs = np.where(v[:, None], 10 * rows[:, None] + k3, 0).astype(np.float32)
        exp_next = np.where(v[:, None], 10 * (rows[:, None] + 1) + k3, 0).astype(np.float32)
        exp_act = np.where(v[:, None], rows[:, None] / 2 + np.arange(2), 0.0)
        bad += int(np.sum(b["obs"][i] != exp_obs)) + int(np.sum(b["next_obs"][i] != exp_next))
        bad += int(np.sum(b["action"][i] != exp_act))
        bad += int(np.sum(b["reward"][i] != np.where(v, rows / 4, 0).astype(np.float32)))
        bad += int(np.sum(b["terminal"][i] != np.where(v, rows % 97 == 96, 0)))
        bad += int(np.sum(b["timeout"][i] != np.where(v, rows % 151 == 150, 0)))
        bad += int(np.sum(b["valid"][i] != v))
        bad += int(np.sum(b["info_qpos"][i] != np.where(v, 3 * rows, 0)))
        assert S == b["obs"].shape[1]
    return bad


def worker(endpoint, q):
    c = Client(endpoint)
    bad = sum(verify(c.sample(32)) for _ in range(100))
    q.put(bad)


def chi2_ok(counts, p, draws, what):
    """Chi-square of counts against probabilities p (zero-probability entries never drawn)."""
    nz = p > 0
    check(np.all(counts[~nz] == 0), what + ": zero-priority items drawn")
    e = draws * p[nz]
    chi2 = float(np.sum((counts[nz] - e) ** 2 / e))
    dof = int(nz.sum()) - 1
    limit = dof + 5.0 * np.sqrt(2.0 * dof) + 10.0
    print("  %s: chi2 %.1f, %d dof (limit %.1f)" % (what, chi2, dof, limit), file=sys.stderr)
    check(chi2 < limit, "%s: chi2 %.1f >= %.1f" % (what, chi2, limit))


def check_selectors(c, info):
    """uniform (the default) and weighted (an extra selector) from the same server, interleaved
    on one connection; fifo by name; unknown names refused."""
    check(info["selectors"] == ["uniform", "weighted", "fifo", "lifo"],
          "selectors %r" % info["selectors"])
    f = c.sample(info["size"], columns=["reward"], selector="fifo")
    n = len(f.index)
    check(n == len(PLAN) and f.selector == "fifo" and np.all(f.prob == 1), "fifo sample")
    firsts = sorted(PLAN)
    check(np.array_equal(f["reward"][:, 0], np.array(firsts, dtype=np.float32) / 4),
          "fifo: commit order")
    pr = np.where(np.arange(n) % 10 == 3, 0.0, 0.5 + np.arange(n) % 7)
    check(c.update_priorities(f.index, pr, key=f.key) == 0, "priorities set")
    w = pr ** 0.6  # server.replay.alpha default
    pos = {int(ix): k for k, ix in enumerate(f.index)}
    want = w / w.sum()
    counts = {"uniform": np.zeros(n), "weighted": np.zeros(n)}
    bad = bad_prob = 0
    rounds = 300
    for r in range(rounds):
        for name in ("uniform", "weighted"):
            b = c.sample(64, selector=name)
            bad += verify(b)
            k = np.array([pos[int(ix)] for ix in b.index])
            np.add.at(counts[name], k, 1)
            p = np.full(64, 1.0 / n) if name == "uniform" else want[k]
            bad_prob += int(np.sum(np.abs(b.prob - p) > 1e-12 * (1 + p)))
            if name == "weighted":
                iw = (b.prob.min() / b.prob) ** 0.4  # server.replay.beta default
                bad_prob += int(np.sum(np.abs(b.weight - iw) > 1e-5))
            bad_prob += int(b.selector != name)
    check(bad == 0, "selectors: %d wrong values" % bad)
    check(bad_prob == 0, "selectors: %d wrong probabilities, weights or names" % bad_prob)
    chi2_ok(counts["uniform"], np.full(n, 1.0 / n), rounds * 64, "uniform")
    chi2_ok(counts["weighted"], want, rounds * 64, "weighted")
    check(c.sample(4, selector=1).selector == "weighted", "selector by kind number")
    check(c.sample(4, selector="default").selector == "uniform", "default selector")
    try:
        c.sample(4, selector="best")
        check(False, "no error for an unknown selector name")
    except ValueError as e:
        check("best" in str(e), "unknown selector text %r" % str(e))


def check_curve(cfg):
    """server.curve with an allow-list: the client with the allowed key pair file and the
    server's public key (from the server's start line) is served; a plain client and one with a
    fresh key pair get no answer (zmq.Again after the timeout)."""
    key = os.path.join(TMP, "py_curve_server.key")
    client_key = os.path.join(TMP, "py_curve_client.key")
    allow = os.path.join(TMP, "py_curve_clients")
    for p in (key, client_key):
        if os.path.exists(p):
            os.unlink(p)
    public, secret = zmq.curve_keypair()
    fd = os.open(client_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"public " + public + b"\nsecret " + secret + b"\n")
    os.close(fd)
    with open(allow, "w") as f:
        f.write(public.decode() + "\n")
    srv = subprocess.Popen([GEARBOX, "serve", cfg, "--set", "server.curve=true", "--set",
                            "server.curve_key=" + key, "--set", "server.curve_clients=" + allow],
                           stdout=subprocess.PIPE, text=True)
    try:
        endpoint = srv.stdout.readline().split()[-1]
        line = srv.stdout.readline()
        check("CURVE on" in line, "curve start line: %r" % line)
        server_key = line.split("public key ")[1].split()[0]
        check(os.stat(key).st_mode & 0o777 == 0o600, "server key file mode")
        c = Client(endpoint, server_key=server_key, key_file=client_key)
        check(c.info()["size"] == len(PLAN), "keyed client served")
        check(len(c.sample(8).index) == 8, "keyed client samples")
        c.close()
        for what, kw in (("plain", {}), ("unknown key pair", {"server_key": server_key})):
            bad = Client(endpoint, timeout_ms=1500, **kw)
            try:
                bad.info()
                check(False, "a %s client was served" % what)
            except (zmq.Again, TimeoutError, ServerError) as e:
                check(not isinstance(e, ServerError), "a %s client got an answer: %s" % (what, e))
            bad.close()
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    check(srv.returncode == 0, "curve server exit status %s" % srv.returncode)


def run_protocol_example(endpoint):
    """The client written in docs/protocol.md from that page alone works against this
    server (its own asserts check what it gets)."""
    doc = os.path.join(PYDIR, "..", "..", "..", "..", "docs", "protocol.md")
    with open(doc) as f:
        text = f.read()
    begin, end = "<!-- example: begin -->", "<!-- example: end -->"
    check(begin in text and end in text, "docs/protocol.md has its example")
    block = text.split(begin)[1].split(end)[0]
    code = block.split("```python")[1].split("```")[0]
    try:
        exec(compile(code, doc, "exec"), {"ENDPOINT": endpoint, "__name__": "example"})
    except Exception as e:  # noqa: BLE001 -- any failure of the example is a failure here
        check(False, "docs/protocol.md example: %r" % e)


def main():
    h5 = os.path.join(TMP, "py_d4rl.h5")
    ckpt = os.path.join(TMP, "py_server.ckpt")
    subprocess.check_call([MAKE_D4RL, h5, str(N)])
    cfg = os.path.join(TMP, "py_server.yaml")
    with open(cfg, "w") as f:
        f.write("experiment: {name: py}\nenv: {name: CartPole-v1}\n"
                "trainer: {algorithm: {name: ppo}}\n"
                "server: {endpoint: 'tcp://127.0.0.1:0', dataset: %s, dataset_format: d4rl, "
                "steps: %d, max_batch_rows: 512, checkpoint: %s, "
                "replay: {capacity: 400, selector: uniform, extra_selectors: [weighted]}}\n"
                % (h5, T, ckpt))
    srv = subprocess.Popen([GEARBOX, "serve", cfg], stdout=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        check(line.startswith("gearbox serve: serving"), "server start line: %r" % line)
        endpoint = line.split()[-1]
        run_protocol_example(endpoint)
        c = Client(endpoint)
        info = c.info()
        check(info["size"] == len(PLAN), "size %d != %d" % (info["size"], len(PLAN)))
        check(info["steps"] == T and info["selector"] == "uniform", "info %r" % info)
        check(list(info["columns"]) == ["obs", "action", "reward", "terminal", "timeout",
                                        "valid", "next_obs", "info_qpos"], "columns")
        check(info["columns"]["action"][0] == np.float64, "action dtype kept")
        seen, bad = set(), 0
        for _ in range(40):
            b = c.sample(64)
            bad += verify(b)
            seen.update(int(x) // 10 for x in b["obs"][:, 0, 0])
            check(np.allclose(b.prob, 1.0 / len(PLAN)), "uniform probabilities")
        check(bad == 0, "%d wrong values" % bad)
        check(seen == set(PLAN), "every item sampled (%d of %d)" % (len(seen), len(PLAN)))
        check(verify(c.sample(32, t0=2, t1=6), 2, 6) == 0, "step range values")
        check(len(c.sample(4, selector="uniform").index) == 4, "selector named")
        b = c.sample(16, columns=["reward", "obs"])
        check(list(b) == ["reward", "obs"] and b["reward"].shape == (16, T), "column subset")
        try:
            import torch
            b = c.sample(8, torch=True)
            check(isinstance(b["obs"], torch.Tensor) and b["obs"].shape == (8, T, 3), "torch")
        except ImportError:
            print("torch not importable: torch=True not tested", file=sys.stderr)
        # several client processes at once
        ctx = mp.get_context("spawn")  # fresh interpreters: no ZeroMQ state across fork
        q = ctx.Queue()
        ps = [ctx.Process(target=worker, args=(endpoint, q)) for _ in range(3)]
        for p in ps:
            p.start()
        bads = [q.get(timeout=120) for _ in ps]
        for p in ps:
            p.join()
        check(bads == [0, 0, 0], "concurrent clients wrong values %r" % bads)
        check_selectors(c, info)
        # insert, update, checkpoint
        cols = {name: np.full((2,) + ((T,) if not per_item else ()) + shape, 3, dtype=dt)
                for name, (dt, shape, per_item) in info["columns"].items()}
        cols["valid"][0, :] = 1  # valid marks the first length steps
        cols["valid"][1, :] = np.arange(T) < 3
        size = c.insert(cols, length=[8, 3], policy_version=5)
        check(size == len(PLAN) + 2, "size after insert %d" % size)
        b = c.sample(4)
        check(c.update_priorities(b.index, [1.0, 2.0, 3.0, 4.0], key=b.key) == 0, "update")
        check(c.checkpoint() == ckpt and os.path.exists(ckpt), "checkpoint")
        for bad_call, what in [(lambda: c.sample(10000), "max_batch_rows"),
                               (lambda: c.sample(4, columns=["nope"]), "nope"),
                               (lambda: c.sample(4, t0=6, t1=2), "step range"),
                               (lambda: c.sample(4, selector="topk"),
                                "uniform, weighted, fifo, lifo")]:
            try:
                bad_call()
                check(False, "no error for " + what)
            except ServerError as e:
                check(what in str(e), "error text %r" % str(e))
        check(len(c.sample(16).index) == 16, "still serving after errors")
        c.close()
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    check(srv.returncode == 0, "server exit status %s" % srv.returncode)
    check_curve(cfg)
    print("python client: %d failures" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
