"""gearbox_shards: one client over several gearbox data servers (`gearbox serve`), each holding a
part (shard) of the data: inserts go to the server their shard key names, and a sample is drawn
from all of them with the probabilities one server holding the union would give.

    from gearbox_shards import ShardedClient
    c = ShardedClient(["tcp://hostA:5555", "tcp://hostB:5555"], seed=0)
    b = c.sample(256, selector="weighted")   # b.prob, b.weight: global; b.server: which server
    c.update_priorities(b.index, new_priorities, key=b.key, server=b.server)
    c.insert(columns, shard_key=episode_ids)  # each item to server shard_of(its key)

Sampling (uniform or weighted, both with replacement): the client asks every server for its
total weight (INFO: uniform, its size; weighted, "weight_total" = the sum of priority^alpha of
its items), splits the batch over the servers by one multinomial draw with probabilities
W_s / W (W = sum of the W_s), and asks server s for its share. An item i on server s then comes
with probability (W_s / W) * (w_i / W_s) = w_i / W per draw: exactly the union's. The batch's
prob is that global probability (the server's own times W_s / W) and its importance weights are
recomputed from it: (N * prob)^-beta divided by the batch's largest, N the items on all servers
(beta: the servers' "beta"; they must agree). Totals are read in the same call as the draw, so
they are exact unless another client inserts or updates priorities in between. FIFO, LIFO and
top-k have no meaning across servers and are refused.

Servers must serve one schema (checked at the first info()).
"""

import zlib

import numpy as np

from gearbox_client import Batch, Client, ServerError


def shard_of(key, n):
    """The server (0..n-1) an item with shard key `key` goes to: CRC-32 of the key's bytes
    (ints as 8 little-endian bytes, str as UTF-8), modulo n. Stable across processes and
    machines (unlike Python's hash)."""
    if isinstance(key, (int, np.integer)):
        data = int(key).to_bytes(8, "little", signed=True)
    elif isinstance(key, str):
        data = key.encode()
    else:
        data = bytes(key)
    return zlib.crc32(data) % n


class _ShardedPending:
    """ShardedClient.sample_async: the totals are asked at once; result() draws, samples and
    merges."""

    def __init__(self, sc, infos, args, kwargs):
        self._sc, self._infos, self._args, self._kwargs = sc, infos, args, kwargs

    def result(self, timeout_ms=None):
        infos = [p.result(timeout_ms) for p in self._infos]
        return self._sc._sample_with(infos, *self._args, **self._kwargs)


class ShardedClient:
    """Clients of n servers (one DEALER connection each); use one ShardedClient per thread.
    seed: the multinomial split's generator (numpy default_rng). Other keywords go to each
    Client (timeout_ms, server_key, key_file)."""

    def __init__(self, endpoints, seed=None, **client_kwargs):
        if not endpoints:
            raise ValueError("ShardedClient: no endpoints")
        self.endpoints = list(endpoints)
        self.clients = [Client(ep, **client_kwargs) for ep in self.endpoints]
        self.rng = np.random.default_rng(seed)
        self._columns = None
        self._rr = 0

    def close(self):
        for c in self.clients:
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_schema(self, infos):
        cols = infos[0]["columns"]
        for ep, inf in zip(self.endpoints[1:], infos[1:]):
            if inf["columns"] != cols or inf["steps"] != infos[0]["steps"]:
                raise ValueError("%s serves another schema than %s" % (ep, self.endpoints[0]))
        self._columns = cols

    def info(self):
        """Every server's info() (list "servers") and the union's: size, capacity, inserts,
        samples summed; steps, columns, selector, selectors of the first (selectors: those every
        server offers)."""
        infos = [p.result() for p in [c.info_async() for c in self.clients]]
        self._check_schema(infos)
        out = {k: sum(i[k] for i in infos) for k in ("size", "capacity", "inserts", "samples")}
        out.update(steps=infos[0]["steps"], columns=infos[0]["columns"],
                   selector=infos[0]["selector"],
                   selectors=[s for s in infos[0]["selectors"]
                              if all(s in i["selectors"] for i in infos)],
                   servers=infos)
        return out

    def totals(self, selector, infos=None):
        """Each server's total weight for selector ("uniform": size; "weighted":
        weight_total), as a float64 array, from infos (or fresh info requests)."""
        infos = infos or [p.result() for p in [c.info_async() for c in self.clients]]
        if selector == "uniform":
            return np.array([i["size"] for i in infos], dtype=np.float64)
        if any("weight_total" not in i for i in infos):
            raise ServerError(-14, "a server does not offer the weighted selector (or is too "
                              "old to report its weight_total)")
        return np.array([i["weight_total"] for i in infos], dtype=np.float64)

    def sample_async(self, batch, **kwargs):
        """sample() whose totals are asked now; result() does the rest."""
        return _ShardedPending(self, [c.info_async() for c in self.clients], (batch,), kwargs)

    def sample(self, batch, selector=None, **kwargs):
        """Draws batch items across the servers (see the module's text). selector: None (the
        first server's default), "uniform" or "weighted"; other keywords as Client.sample
        (columns, t0, t1, timeout_ms, torch). Returns a Batch with the global prob and weight,
        size (items on all servers) and server (int32: which server each item came from, for
        update_priorities); index and key are that server's."""
        infos = [p.result() for p in [c.info_async() for c in self.clients]]
        return self._sample_with(infos, batch, selector=selector, **kwargs)

    def _sample_with(self, infos, batch, selector=None, torch=False, **kwargs):
        if self._columns is None:
            self._check_schema(infos)
        sel = selector if selector not in (None, "default") else infos[0]["selector"]
        if sel not in ("uniform", "weighted"):
            raise ValueError("ShardedClient: selector %r: only 'uniform' and 'weighted' draw "
                             "across servers" % sel)
        W = self.totals(sel, infos)
        if not W.sum() > 0:
            raise ServerError(-5, "no server has anything to sample (total weight 0)")
        counts = self.rng.multinomial(batch, W / W.sum())
        pend = [(s, self.clients[s].sample_async(int(k), selector=sel, **kwargs))
                for s, k in enumerate(counts) if k > 0]
        parts = [(s, p.result()) for s, p in pend]
        out = Batch()
        for name in parts[0][1]:
            out[name] = np.concatenate([b[name] for _, b in parts])
        prob = np.concatenate([b.prob * (W[s] / W.sum()) for s, b in parts])
        size = sum(i["size"] for i in infos)
        if sel == "weighted":
            betas = {i["beta"] for i in infos}
            if len(betas) != 1:
                raise ValueError("ShardedClient: the servers' betas differ: %s" % sorted(betas))
            w = (size * prob) ** -betas.pop()
            weight = (w / w.max()).astype(np.float32)
        else:
            weight = np.ones(len(prob), dtype=np.float32)
        out.index = np.concatenate([b.index for _, b in parts])
        out.key = np.concatenate([b.key for _, b in parts])
        out.length = np.concatenate([b.length for _, b in parts])
        out.prob, out.weight, out.size, out.selector = prob, weight, size, sel
        out.server = np.concatenate([np.full(len(b.index), s, dtype=np.int32) for s, b in parts])
        if torch:
            import torch as th
            for k in list(out):
                out[k] = th.from_numpy(out[k])
        return out

    def insert(self, columns, shard_key=None, priority=None, length=None, policy_version=-1):
        """Inserts n items (columns as Client.insert), item j to server shard_of(shard_key[j])
        (shard_key None: round robin over the servers). Returns how many went to each server."""
        n = len(next(iter(columns.values())))
        if shard_key is None:
            dest = (self._rr + np.arange(n)) % len(self.clients)
            self._rr = int((self._rr + n) % len(self.clients))
        else:
            if len(shard_key) != n:
                raise ValueError("shard_key: %d keys for %d items" % (len(shard_key), n))
            dest = np.array([shard_of(k, len(self.clients)) for k in shard_key])
        sent = np.zeros(len(self.clients), dtype=np.int64)
        for s, c in enumerate(self.clients):
            sel = np.flatnonzero(dest == s)
            if len(sel) == 0:
                continue
            c.insert({k: np.asarray(v)[sel] for k, v in columns.items()},
                     priority=None if priority is None else np.asarray(priority)[sel],
                     length=None if length is None else np.asarray(length)[sel],
                     policy_version=policy_version)
            sent[s] = len(sel)
        return sent

    def update_priorities(self, index, priority, key=None, server=None):
        """Sets priorities of sampled items on the servers they came from (server: the batch's
        .server). Returns how many were skipped (replaced since they were sampled)."""
        if server is None:
            raise ValueError("update_priorities needs server= (the batch's .server)")
        index, priority, server = np.asarray(index), np.asarray(priority), np.asarray(server)
        skipped = 0
        for s, c in enumerate(self.clients):
            sel = np.flatnonzero(server == s)
            if len(sel):
                skipped += c.update_priorities(index[sel], priority[sel],
                                               key=None if key is None else np.asarray(key)[sel])
        return skipped


def _bench(endpoints, batch, seconds, selector):
    """Items/s of one Client on the first server and of a ShardedClient over all, interleaved
    (two rounds each, averaged). Prints the two rates on one line."""
    import time

    def rate(make):
        c = make()
        c.sample(batch, selector=selector)
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            n += len(c.sample(batch, selector=selector).index)
        c.close()
        return n / (time.monotonic() - t0)

    one = many = 0.0
    for _ in range(2):
        one += rate(lambda: Client(endpoints[0])) / 2
        many += rate(lambda: ShardedClient(endpoints, seed=0)) / 2
    print("%.1f %.1f" % (one, many))


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 6 and sys.argv[1] == "bench":
        _bench(sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    else:
        print("usage: python3 gearbox_shards.py bench EP1,EP2,... BATCH SECONDS SELECTOR",
              file=sys.stderr)
        sys.exit(2)
