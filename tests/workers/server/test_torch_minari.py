"""tests/workers/server/test_torch_minari.py: gearbox_torch and Minari datasets against real
`gearbox serve` processes over tcp.
- the Python client's asynchronous requests: several in flight, collected in any order, every
  value checked against the D4RL source (make_d4rl encodes each row in its values);
- GearboxDataset: batches as torch tensors, every value checked, in a DataLoader without and
  with worker processes (each its own connection); prefetching keeps exactly `prefetch`
  requests in flight beyond the batches queued (the server's draw counter says so); cuda and
  pinned memory refused clearly without a GPU (delivered to the GPU where there is one);
- a Minari dataset (written by minari's own HDF5 storage when the minari package imports, else
  with h5py exactly as it writes one) of CartPole episodes from a noisy linear expert: served with
  server.dataset_format minari, every sampled value checked against the episodes, then
  examples/offline_bc.py trains from it through a DataLoader of 2 workers and must reach a mean
  return >= 400; Minari datasets gearbox cannot read (a Dict observation space, observations
  without the final one, a gap in the episode numbers) are refused at start, naming the fault.
Usage: test_torch_minari.py GEARBOX MAKE_D4RL PYTHON_DIR TMPDIR. Exit 77 (skip) without torch."""
import json
import os
import subprocess
import sys
import time

import numpy as np

try:
    import torch
    import torch.utils.data
except ImportError:
    print("skip: torch not importable")
    sys.exit(77)

GEARBOX, MAKE_D4RL, PYDIR, TMP = sys.argv[1:5]
sys.path.insert(0, PYDIR)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gearbox_client import Batch, Client  # noqa: E402
from gearbox_torch import GearboxDataset  # noqa: E402
import test_python_client as tpc  # noqa: E402  (its verify() and PLAN; its main() is not run)

failures = tpc.failures
check = tpc.check
T = tpc.T


def start_server(name, server_yaml):
    cfg = os.path.join(TMP, name + ".yaml")
    with open(cfg, "w") as f:
        f.write("experiment: {name: %s}\nenv: {name: CartPole-v1}\n"
                "trainer: {algorithm: {name: ppo}}\nserver: {endpoint: 'tcp://127.0.0.1:0', %s}\n"
                % (name, server_yaml))
    srv = subprocess.Popen([GEARBOX, "serve", cfg], stdout=subprocess.PIPE, text=True)
    line = srv.stdout.readline()
    if not line.startswith("gearbox serve: serving"):
        srv.kill()
        raise RuntimeError("%s: server did not start: %r" % (name, line))
    return srv, line.split()[-1]


def stop_server(srv, what):
    srv.terminate()
    srv.wait(timeout=30)
    check(srv.returncode == 0, "%s: server exit status %s" % (what, srv.returncode))


def as_batch(d):
    """A GearboxDataset batch (dict of tensors) as the client's Batch, for tpc.verify."""
    b = Batch({k: v.numpy() for k, v in d.items() if k not in
               ("index", "key", "prob", "weight", "length")})
    b.index, b.length = d["index"].numpy(), d["length"].numpy()
    return b


def test_async(endpoint):
    c = Client(endpoint)
    pend = [c.sample_async(k + 1) for k in range(6)]
    info = c.info_async()
    check(c.in_flight() == 7, "7 requests in flight (%d)" % c.in_flight())
    check(info.result()["size"] == len(tpc.PLAN), "info collected after later samples")
    for k in reversed(range(6)):  # the last sent first: earlier replies wait for their turn
        b = pend[k].result()
        check(len(b.index) == k + 1, "async batch %d has %d items" % (k + 1, len(b.index)))
        check(tpc.verify(b) == 0, "async batch %d values" % (k + 1))
    check(c.in_flight() == 0, "nothing left in flight")
    check(len(c.sample(3).index) == 3, "blocking sample after async ones")
    c.close()


def test_dataset(endpoint):
    # in this process
    ds = GearboxDataset(endpoint, 32, batches=10, prefetch=3)
    got = list(torch.utils.data.DataLoader(ds, batch_size=None))
    check(len(got) == 10, "10 batches (%d)" % len(got))
    check(all(isinstance(b["obs"], torch.Tensor) and b["obs"].shape == (32, T, 3) and
              b["obs"].dtype == torch.float32 and b["weight"].dtype == torch.float32 and
              b["index"].dtype == torch.int64 for b in got), "tensor types and shapes")
    check(sum(tpc.verify(as_batch(b)) for b in got) == 0, "dataset values")
    # prefetch: with the consumer holding its first batch, the producer queues `prefetch`
    # batches and keeps `prefetch` requests in flight: 1 + 3 + 3 batches drawn, then no more
    c = Client(endpoint)
    before = c.info()["samples"]
    ds = GearboxDataset(endpoint, 16, prefetch=3)
    it = iter(ds)
    first = next(it)
    want = before + 7 * 16
    deadline = time.monotonic() + 30
    while c.info()["samples"] < want and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    drawn = c.info()["samples"]
    check(drawn == want, "prefetch: %d items drawn, expected %d" % (drawn - before, want - before))
    check(tpc.verify(as_batch(first)) == 0, "prefetched values")
    it.close()
    # two DataLoader workers, each its own connection, 5 batches each (packed into one shared
    # storage per batch by the worker)
    ds = GearboxDataset(endpoint, 24, batches=5, prefetch=2)
    got = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    check(len(got) == 10, "2 workers x 5 batches (%d)" % len(got))
    check(sum(tpc.verify(as_batch(b)) for b in got) == 0, "worker batches' values")
    check(all(b["obs"].shape == (24, T, 3) and b["action"].dtype == torch.float64
              for b in got), "worker batches' shapes and types")
    # a column subset
    ds = GearboxDataset(endpoint, 24, columns=["obs", "next_obs"], batches=2)
    got = list(ds)
    check(all(sorted(b) == sorted(["obs", "next_obs", "index", "key", "prob", "weight",
                                   "length"]) for b in got), "column subset")
    bad = 0
    for b in got:
        rows = (b["obs"][:, 0, 0] // 10).long()
        bad += int(((b["next_obs"][:, 0, 0] // 10).long() != rows + 1).sum())
    check(bad == 0, "column subset: next_obs follows obs")
    # cuda and pinned memory: refused clearly without a GPU, delivered with one
    if torch.cuda.is_available():
        ds = GearboxDataset(endpoint, 8, batches=2, device="cuda")
        for b in ds:
            check(b["obs"].is_cuda, "delivered to the GPU")
    else:
        for kw in ({"device": "cuda"}, {"pin_memory": True}):
            try:
                GearboxDataset(endpoint, 8, **kw)
                check(False, "%r accepted without CUDA" % kw)
            except RuntimeError as e:
                check("cuda.is_available() is False" in str(e), "refusal text %r" % str(e))
        print("no CUDA: the cuda and pinned paths were checked for their refusal only",
              file=sys.stderr)
    c.close()


# ---- Minari ----------------------------------------------------------------------------------

def expert_episodes(n, seed):
    """CartPole episodes (offline_bc's numpy copy of Gymnasium's) from a linear controller with
    10% random actions: lists of observations (n+1), actions, rewards, terminations,
    truncations per episode."""
    sys.path.insert(0, os.path.join(PYDIR, "examples"))
    from offline_bc import CartPole
    env, rng, out = CartPole(seed), np.random.default_rng(seed), []
    for _ in range(n):
        o = env.reset()
        ep = {"observations": [o], "actions": [], "rewards": [], "terminations": [],
              "truncations": []}
        done = False
        while not done:
            x, xd, th, thd = o
            a = int(th + 0.5 * thd + 0.01 * x + 0.1 * xd > 0)
            if rng.random() < 0.1:
                a = int(rng.integers(2))
            o, r, term, trunc = env.step(a)
            for k, v in (("observations", o), ("actions", a), ("rewards", r),
                         ("terminations", term), ("truncations", trunc)):
                ep[k].append(v)
            done = term or trunc
        out.append({k: np.array(v, dtype=np.float32 if k == "observations" else
                                 np.int64 if k == "actions" else
                                 np.float64 if k == "rewards" else np.bool_)
                    for k, v in ep.items()})
    return out


def write_minari(data_path, episodes):
    """Writes episodes as a Minari dataset's data folder; returns how it was written."""
    os.makedirs(data_path, exist_ok=True)
    try:
        import gymnasium as gym
        import minari
        from minari.data_collector.episode_buffer import EpisodeBuffer
        from minari.dataset.minari_dataset import MinariDataset
        from minari.dataset.minari_storage import MinariStorage
    except Exception as e:  # noqa: BLE001 -- any failure to import: write it ourselves
        print("minari not importable (%r): writing its format with h5py" % e, file=sys.stderr)
    else:
        obs_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
        storage = MinariStorage.new(data_path, observation_space=obs_space,
                                    action_space=gym.spaces.Discrete(2), data_format="hdf5")
        storage.update_episodes([EpisodeBuffer(id=i, **ep) for i, ep in enumerate(episodes)])
        # what minari's DataCollector.create_dataset adds (it needs jax to collect, not this)
        storage.update_metadata({"dataset_id": "cartpole/expert-v0",
                                 "minari_version": minari.__version__})
        ds = MinariDataset(data_path)  # minari's own loader reads it back
        check(ds.total_episodes == len(episodes), "minari reads %d episodes" % ds.total_episodes)
        for ep, src in zip(ds.iterate_episodes(), episodes):
            check(np.array_equal(ep.observations, src["observations"]) and
                  np.array_equal(ep.actions, src["actions"]), "minari episode %d" % ep.id)
        return "minari %s" % minari.__version__
    import h5py  # the layout minari's HDF5Storage writes (update_episodes)
    with h5py.File(os.path.join(data_path, "main_data.hdf5"), "w", track_order=True) as f:
        for i, ep in enumerate(episodes):
            g = f.create_group("episode_%d" % i)
            g.attrs["id"] = i
            g.attrs["total_steps"] = len(ep["rewards"])
            for k, v in ep.items():
                g.create_dataset(k, data=v, chunks=True, maxshape=(None,) + v.shape[1:])
    steps = sum(len(ep["rewards"]) for ep in episodes)
    with open(os.path.join(data_path, "metadata.json"), "w") as f:
        json.dump({"total_episodes": len(episodes), "total_steps": steps, "data_format": "hdf5",
                   "jpeg_encoding": True, "dataset_id": "cartpole/expert-v0"}, f)
    return "h5py"


def test_minari():
    episodes = expert_episodes(20, seed=3)
    steps = sum(len(ep["rewards"]) for ep in episodes)
    root = os.path.join(TMP, "minari", "cartpole", "expert-v0")
    subprocess.call(["rm", "-rf", os.path.join(TMP, "minari")])
    how = write_minari(os.path.join(root, "data"), episodes)
    print("minari dataset: %d episodes, %d steps, written by %s (mean return %.0f)"
          % (len(episodes), steps, how, np.mean([len(e["rewards"]) for e in episodes])),
          file=sys.stderr)
    srv, endpoint = start_server("minari", "dataset: %s, dataset_format: minari, steps: 4" % root)
    try:
        c = Client(endpoint)
        info = c.info()
        check(list(info["columns"]) == ["obs", "action", "reward", "terminal", "timeout",
                                        "valid", "next_obs"], "minari columns %r"
              % list(info["columns"]))
        want_items = sum(-(-len(ep["rewards"]) // 4) for ep in episodes)
        check(info["size"] == want_items, "minari items %d != %d" % (info["size"], want_items))
        # every sampled row is a row of an episode: obs -> (action, reward, next, flags)
        src = {}
        for ep in episodes:
            for t in range(len(ep["rewards"])):
                src[ep["observations"][t].tobytes()] = (
                    ep["actions"][t], np.float32(ep["rewards"][t]), ep["observations"][t + 1],
                    ep["terminations"][t], ep["truncations"][t], len(ep["rewards"]) - t)
        bad = rows = 0
        for _ in range(10):
            b = c.sample(128)
            for i in range(128):
                for t in range(int(b.length[i])):
                    rows += 1
                    s = src.get(b["obs"][i, t].tobytes())
                    if s is None or b["action"][i, t] != s[0] or b["reward"][i, t] != s[1] or \
                            not np.array_equal(b["next_obs"][i, t], s[2]) or \
                            b["terminal"][i, t] != s[3] or b["timeout"][i, t] != s[4]:
                        bad += 1
                    elif t == int(b.length[i]) - 1 and b.length[i] < 4 and s[5] != 1:
                        bad += 1  # a short item is an episode's last
                bad += int(np.count_nonzero(b["obs"][i, int(b.length[i]):]))
        check(bad == 0 and rows > 0, "minari values: %d wrong of %d rows" % (bad, rows))
        c.close()
        # behaviour cloning from it through a DataLoader with 2 workers
        r = subprocess.run([sys.executable, os.path.join(PYDIR, "examples", "offline_bc.py"),
                            "--endpoint", endpoint, "--loader", "2", "--steps", "1200",
                            "--batch", "32", "--min-return", "400"],
                           capture_output=True, text=True, timeout=600)
        print(r.stdout.strip(), file=sys.stderr)
        check(r.returncode == 0, "offline_bc from minari through the DataLoader: %s%s"
              % (r.stdout[-300:], r.stderr[-1000:]))
    finally:
        stop_server(srv, "minari")


def test_minari_refusals():
    """Datasets gearbox cannot read are refused at start, naming the episode and dataset."""
    try:
        import h5py
    except ImportError:
        print("h5py not importable: Minari refusals not tested", file=sys.stderr)
        return
    ep = expert_episodes(2, seed=5)
    cases = []
    for what, mutate, want in (
            ("dict space", lambda f: (f["episode_1"].pop("observations"),
                                      f["episode_1"].create_group("observations")),
             "episode_1/observations' is a group (a Dict or Tuple space)"),
            ("short observations", lambda f: (f["episode_0"].pop("observations"),
                                              f["episode_0"].create_dataset(
                                                  "observations",
                                                  data=ep[0]["observations"][:-1])),
             "episode_0/observations' has"),
            ("gap", lambda f: f.move("episode_1", "episode_2"), "have a gap")):
        d = os.path.join(TMP, "minari_bad", what.replace(" ", "_"))
        subprocess.call(["rm", "-rf", d])
        os.makedirs(os.path.join(d, "data"))
        with h5py.File(os.path.join(d, "data", "main_data.hdf5"), "w") as f:
            for i, e in enumerate(ep):
                g = f.create_group("episode_%d" % i)
                for k, v in e.items():
                    g.create_dataset(k, data=v)
            mutate(f)
        cfg = os.path.join(d, "serve.yaml")
        with open(cfg, "w") as f:
            f.write("experiment: {name: bad}\nenv: {name: CartPole-v1}\n"
                    "trainer: {algorithm: {name: ppo}}\nserver: {endpoint: 'tcp://127.0.0.1:0', "
                    "dataset: %s, dataset_format: minari, steps: 4}\n" % d)
        r = subprocess.run([GEARBOX, "serve", cfg], capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and want in r.stderr,
              "minari %s: exit %d, %r" % (what, r.returncode, r.stderr.strip()[-300:]))
        cases.append(what)
    print("minari refusals checked: %s" % ", ".join(cases), file=sys.stderr)


def main():
    h5 = os.path.join(TMP, "torch_d4rl.h5")
    subprocess.check_call([MAKE_D4RL, h5, str(tpc.N)])
    srv, endpoint = start_server("torch", "dataset: %s, dataset_format: d4rl, steps: %d, "
                                 "max_batch_rows: 512" % (h5, T))
    try:
        test_async(endpoint)
        test_dataset(endpoint)
    finally:
        stop_server(srv, "torch")
    test_minari()
    test_minari_refusals()
    print("torch and minari: %d failures" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
