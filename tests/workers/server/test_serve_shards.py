"""tests/workers/server/test_serve_shards.py: gearbox_shards.ShardedClient over two real `gearbox
serve` processes against a third that holds their union. Server B loads a 300-row D4RL file, C a
500-row one (make_d4rl: values encode their row), and the union server A loads the 300-row file plus
C's items (fetched with fifo, inserted). Every item gets priority 1 + (its first row mod 7) on every
server. Then, for weighted and uniform sampling: the probability the sharded client reports for each
drawn item equals its exact global probability, priority^alpha / (the sum over both servers) (and A
reports the same); its importance weights are (N * prob)^-beta over the batch's largest; and the
counts of 20000 draws per item content match those probabilities by chi-square, for the sharded
client and for A alike. GearboxDataset over both servers reports the same global probabilities.
Inserts sharded by key land on the server shard_of(key) names; priority updates go back to the
server each item came from.
Usage: test_serve_shards.py GEARBOX MAKE_D4RL PYTHON_DIR TMPDIR"""
import os
import subprocess
import sys

import numpy as np

GEARBOX, MAKE_D4RL, PYDIR, TMP = sys.argv[1:5]
sys.path.insert(0, PYDIR)
from gearbox_client import Client  # noqa: E402
from gearbox_shards import ShardedClient, shard_of  # noqa: E402

T, ALPHA, BETA = 8, 0.6, 0.4  # server.replay.alpha and beta defaults
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def start(name, h5):
    cfg = os.path.join(TMP, "shards_%s.yaml" % name)
    with open(cfg, "w") as f:
        f.write("experiment: {name: %s}\nenv: {name: CartPole-v1}\n"
                "trainer: {algorithm: {name: ppo}}\n"
                "server: {endpoint: 'tcp://127.0.0.1:0', dataset: %s, dataset_format: d4rl, "
                "steps: %d, max_batch_rows: 1024, seed: %d, "
                "replay: {capacity: 2000, selector: uniform, extra_selectors: [weighted]}}\n"
                % (name, h5, T, 7 + ord(name)))
    srv = subprocess.Popen([GEARBOX, "serve", cfg], stdout=subprocess.PIPE, text=True)
    line = srv.stdout.readline()
    if not line.startswith("gearbox serve: serving"):
        srv.kill()
        raise RuntimeError("server %s did not start: %r" % (name, line))
    return srv, line.split()[-1]


def content(b):
    """Each item's identity by content: (first row, valid steps)."""
    return [(int(r), int(n)) for r, n in zip(b["obs"][:, 0, 0] // 10, b.length)]


def priority_of(key):
    return 1.0 + key[0] % 7


def all_items(c):
    """Every item of a server (fifo draws distinct items)."""
    size = c.info()["size"]
    b = c.sample(size, selector="fifo")
    check(len(b.index) == size and len(set(b.key.tolist())) == size, "fifo: every item once")
    return b


def chi2(counts, expected, draws, what):
    keys = sorted(expected)
    extra = set(counts) - set(keys)
    check(not extra, "%s: drawn items that do not exist: %s" % (what, sorted(extra)[:5]))
    obs = np.array([counts.get(k, 0) for k in keys], dtype=np.float64)
    e = draws * np.array([expected[k] for k in keys])
    x2 = float(np.sum((obs - e) ** 2 / e))
    dof = len(keys) - 1
    limit = dof + 5.0 * np.sqrt(2.0 * dof) + 10.0
    print("  %s: chi2 %.1f, %d dof (limit %.1f)" % (what, x2, dof, limit), file=sys.stderr)
    check(x2 < limit, "%s: chi2 %.1f >= %.1f" % (what, x2, limit))


def draw(sample, selector, expected_prob, n_total, what, batches=40, batch=500):
    """Draws batches; checks each item's prob and the weights exactly; returns counts."""
    counts, bad_p, bad_w = {}, 0, 0
    for _ in range(batches):
        b = sample(batch, selector)
        check(len(b.index) == batch, "%s: batch of %d" % (what, len(b.index)))
        keys = content(b)
        want = np.array([expected_prob[k] for k in keys])
        bad_p += int(np.sum(~np.isclose(b.prob, want, rtol=1e-9, atol=0)))
        if selector == "weighted":
            w = (n_total * want) ** -BETA
            bad_w += int(np.sum(~np.isclose(b.weight, w / w.max(), rtol=1e-5)))
        else:
            bad_w += int(np.sum(b.weight != 1))
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
    check(bad_p == 0, "%s: %d probabilities differ from the global ones" % (what, bad_p))
    check(bad_w == 0, "%s: %d importance weights differ" % (what, bad_w))
    return counts


def main():
    h5_b, h5_c = os.path.join(TMP, "shards_300.h5"), os.path.join(TMP, "shards_500.h5")
    subprocess.check_call([MAKE_D4RL, h5_b, "300"])
    subprocess.check_call([MAKE_D4RL, h5_c, "500"])
    servers = [start("A", h5_b), start("B", h5_b), start("C", h5_c)]
    (_, ep_a), (_, ep_b), (_, ep_c) = servers
    try:
        a, b_cl, c_cl = Client(ep_a), Client(ep_b), Client(ep_c)
        items_c = all_items(c_cl)
        cols = {k: np.array(v) for k, v in items_c.items()}
        a.insert(cols, length=items_c.length)
        n_total = b_cl.info()["size"] + c_cl.info()["size"]
        check(a.info()["size"] == n_total, "union size %d != %d" % (a.info()["size"], n_total))
        multiplicity = {}
        for cl in (a, b_cl, c_cl):
            items = all_items(cl)
            keys = content(items)
            pr = np.array([priority_of(k) for k in keys])
            check(cl.update_priorities(items.index, pr, key=items.key) == 0, "priorities set")
            if cl is not a:
                for k in keys:
                    multiplicity[k] = multiplicity.get(k, 0) + 1
        W = sum(m * priority_of(k) ** ALPHA for k, m in multiplicity.items())
        prob_w = {k: priority_of(k) ** ALPHA / W for k in multiplicity}
        prob_u = {k: 1.0 / n_total for k in multiplicity}
        sc = ShardedClient([ep_b, ep_c], seed=1)
        info = sc.info()
        check(info["size"] == n_total and len(info["servers"]) == 2, "sharded info")
        totals = sc.totals("weighted")
        check(np.isclose(totals.sum(), W, rtol=1e-12), "weight totals %r sum to %r" % (totals, W))

        def sharded(n, sel):
            return sc.sample(n, selector=sel)

        def union(n, sel):
            return a.sample(n, selector=sel)

        for sel, prob in (("weighted", prob_w), ("uniform", prob_u)):
            expected = {k: multiplicity[k] * prob[k] for k in multiplicity}
            for what, fn in (("sharded " + sel, sharded), ("union " + sel, union)):
                counts = draw(fn, sel, prob, n_total, what)
                chi2(counts, expected, 40 * 500, what)
        # GearboxDataset over both servers: global probabilities, the server column
        try:
            import torch.utils.data
            from gearbox_torch import GearboxDataset
        except ImportError:
            print("torch not importable: GearboxDataset over 2 servers not tested",
                  file=sys.stderr)
        else:
            ds = GearboxDataset([ep_b, ep_c], 64, selector="weighted", batches=4,
                                client_kwargs={"seed": 2})
            bad = 0
            for t in torch.utils.data.DataLoader(ds, batch_size=None):
                keys = [(int(r), int(n)) for r, n in zip(t["obs"][:, 0, 0] // 10, t["length"])]
                bad += int(np.sum(~np.isclose(t["prob"].numpy(),
                                              [prob_w[k] for k in keys], rtol=1e-9)))
                check(set(t["server"].tolist()) <= {0, 1}, "dataset server column")
            check(bad == 0, "GearboxDataset over 2 servers: %d probabilities wrong" % bad)
        # the batch's server column routes priority updates back
        b = sc.sample(64, selector="weighted")
        check(set(b.server.tolist()) <= {0, 1}, "server column")
        check(sc.update_priorities(b.index, np.full(64, 2.0), key=b.key, server=b.server) == 0,
              "sharded priority update")
        # inserts sharded by key
        sizes = [cl.info()["size"] for cl in (b_cl, c_cl)]
        keys = list(range(100, 110))
        sent = sc.insert({k: v[:10] for k, v in cols.items()}, shard_key=keys,
                         length=items_c.length[:10])
        want = np.bincount([shard_of(k, 2) for k in keys], minlength=2)
        check(list(sent) == list(want), "insert split %r != %r" % (list(sent), list(want)))
        after = [cl.info()["size"] for cl in (b_cl, c_cl)]
        check([x - y for x, y in zip(after, sizes)] == list(want), "sizes after sharded insert")
        try:
            sc.sample(8, selector="fifo")
            check(False, "fifo across servers accepted")
        except ValueError as e:
            check("only 'uniform' and 'weighted'" in str(e), "fifo refusal %r" % str(e))
        for cl in (a, b_cl, c_cl):
            cl.close()
        sc.close()
    finally:
        for srv, _ in servers:
            srv.terminate()
            srv.wait(timeout=30)
    print("shards: %d failures" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
