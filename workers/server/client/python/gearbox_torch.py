"""gearbox_torch: a PyTorch IterableDataset over the gearbox data server (`gearbox serve`).

Each iteration opens its own connection (so each DataLoader worker process has its own) and
keeps `prefetch` sample requests in flight while the consumer trains: a background thread
sends them, collects the replies (matched by request id: they may come out of order), turns
each into a dict of torch tensors (copied into pinned memory with pin_memory=True) and hands it
over through a queue of at most `prefetch` batches.

    from gearbox_torch import GearboxDataset
    ds = GearboxDataset("tcp://127.0.0.1:5555", batch_size=256, columns=["obs", "action"])
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    for b in loader:            # b["obs"]: (256, T, *obs_shape); b["weight"], b["index"], ...
        ...

One item of the dataset is one whole batch (the server draws it), hence batch_size=None in the
DataLoader. Besides the asked columns each batch carries "index" (int64), "key" (int64: the
server's uint64 key, bit for bit), "prob" (float64), "weight" (float32) and "length" (int32),
one per item, for priority updates and importance weighting (and "server" (int32) with several
endpoints).

The fast path is num_workers=0: the background thread already overlaps the requests with
training, and batches stay views of the received frames. Worker processes pay the DataLoader's
hand-over per batch (one shared-memory segment a batch here; measured by `gearbox bench serve`)
and pay off only when the batches need heavy per-batch work in the worker.

device="cuda" (or "cuda:N") delivers every batch to that GPU from pinned memory with
non_blocking copies (the copy overlaps the next batch's wait). It and pin_memory=True are
refused with a RuntimeError when torch has no usable CUDA device; device="cuda" also inside
DataLoader worker processes (deliver to the GPU in the main process: DataLoader(pin_memory=True)
and .to(device, non_blocking=True)).

With `endpoints` (a list) instead of one endpoint, batches are drawn across several servers by
gearbox_shards.ShardedClient, with global probabilities and importance weights.
"""

import queue
import threading
import warnings

import numpy as np
import torch
import torch.utils.data

from gearbox_client import Client

META = ("index", "key", "prob", "weight", "length")


def _check_device(device):
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("gearbox_torch: device=%r asked, but torch.cuda.is_available() is "
                               "False (no GPU, or a torch built without CUDA): use device='cpu'"
                               % str(device))
    elif device.type != "cpu":
        raise ValueError("gearbox_torch: device %r: only 'cpu' and 'cuda[:N]'" % str(device))
    return device


def _packed(arrays):
    """The arrays copied into one shared-memory storage (64-byte aligned slices), as tensors
    viewing it: a DataLoader worker then hands the main process one shared segment a batch
    instead of one per tensor (each costs a file and a descriptor passed over a socket)."""
    offs, total = [], 0
    for a in arrays.values():
        offs.append(total)
        total += (a.nbytes + 63) // 64 * 64
    buf = torch.empty(max(total, 1), dtype=torch.uint8).share_memory_()
    flat = buf.numpy()
    out = {}
    for (k, a), off in zip(arrays.items(), offs):
        dst = flat[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
        dst[...] = a
        out[k] = buf[off:off + a.nbytes].view(_TORCH_DTYPES[a.dtype]).reshape(a.shape)
    return out


_TORCH_DTYPES = {np.dtype(k): v for k, v in (
    (np.float32, torch.float32), (np.float64, torch.float64), (np.float16, torch.float16),
    (np.int8, torch.int8), (np.int16, torch.int16), (np.int32, torch.int32),
    (np.int64, torch.int64), (np.uint8, torch.uint8), (np.bool_, torch.bool))}


def batch_to_tensors(b, pin_memory=False, shared=False):
    """A gearbox_client Batch (numpy arrays over the received frames) as a dict of torch
    tensors: the columns and the per-item META fields. Without pin_memory the column tensors
    share the frames' memory (read-only: do not write to them in place); with it, every tensor
    is a copy in page-locked memory (what a non_blocking copy to a GPU needs); with shared (in
    a DataLoader worker), one copy in one shared-memory storage."""
    arrays = dict(b)
    arrays.update(index=b.index, key=b.key.view(np.int64), prob=b.prob, weight=b.weight,
                  length=b.length)
    if getattr(b, "server", None) is not None:  # gearbox_shards: the server of each item
        arrays["server"] = b.server
    if shared and not pin_memory and all(np.dtype(a.dtype) in _TORCH_DTYPES
                                         for a in arrays.values()):
        return _packed(arrays)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # read-only frames: torch warns, still no copy
        for k, a in arrays.items():
            t = torch.from_numpy(a) if isinstance(a, np.ndarray) else a
            if pin_memory:
                p = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                p.copy_(t)
                t = p
            out[k] = t
    return out


def _put(q, stop, x):
    """Puts x on q unless the consumer has stopped (stop set) in the meantime."""
    while not stop.is_set():
        try:
            q.put(x, timeout=0.1)
            return
        except queue.Full:
            continue


class GearboxDataset(torch.utils.data.IterableDataset):
    """Batches sampled from a gearbox data server, as dicts of torch tensors.

    endpoint: the server's endpoint, or a list of endpoints (sampling spread over several
    servers, gearbox_shards); batch_size: items per batch (the server's max_batch_rows at most);
    columns: the names to fetch (None: every column); t0, t1: the steps of each item (t1 0: T);
    selector: None (the server's default), "uniform", "weighted", ...; batches: batches per
    iteration in each process (None: endless); prefetch: sample requests kept in flight (>= 1);
    pin_memory, device: see the module's text; client_kwargs: passed to the Client
    (timeout_ms, server_key, key_file); sample_kwargs: more keywords for Client.sample.
    """

    def __init__(self, endpoint, batch_size, columns=None, t0=0, t1=0, selector=None,
                 batches=None, prefetch=4, pin_memory=False, device="cpu", client_kwargs=None,
                 sample_kwargs=None):
        super().__init__()
        if prefetch < 1:
            raise ValueError("prefetch must be >= 1")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.endpoint, self.batch_size, self.columns = endpoint, batch_size, columns
        self.t0, self.t1, self.selector, self.batches = t0, t1, selector, batches
        self.prefetch = prefetch
        self.device = _check_device(device)
        self.pin_memory = pin_memory or self.device.type == "cuda"
        if self.pin_memory and not torch.cuda.is_available():
            raise RuntimeError("gearbox_torch: pin_memory=True needs CUDA (page-locked memory "
                               "is CUDA's), and torch.cuda.is_available() is False")
        self.client_kwargs = dict(client_kwargs or {})
        self.sample_kwargs = dict(sample_kwargs or {})

    def _client(self):
        if isinstance(self.endpoint, (list, tuple)):
            from gearbox_shards import ShardedClient
            return ShardedClient(list(self.endpoint), **self.client_kwargs)
        return Client(self.endpoint, **self.client_kwargs)

    def _produce(self, out, stop, count):
        """The background thread: owns the connection, keeps prefetch requests in flight."""
        client = None
        shared = torch.utils.data.get_worker_info() is not None
        try:
            client = self._client()
            kw = dict(columns=self.columns, t0=self.t0, t1=self.t1, selector=self.selector,
                      **self.sample_kwargs)
            pending = []
            sent = 0
            while not stop.is_set():
                while len(pending) < self.prefetch and (count is None or sent < count):
                    pending.append(client.sample_async(self.batch_size, **kw))
                    sent += 1
                if not pending:
                    break
                _put(out, stop, batch_to_tensors(pending.pop(0).result(), self.pin_memory,
                                                 shared))
            _put(out, stop, StopIteration())
        except BaseException as e:  # noqa: BLE001 -- handed to the consumer, raised there
            _put(out, stop, e)
        finally:
            if client is not None:
                client.close()

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        if worker is not None and self.device.type == "cuda":
            raise RuntimeError("gearbox_torch: device='cuda' inside a DataLoader worker process; "
                               "use device='cpu' with DataLoader(pin_memory=True) and move "
                               "batches with .to(device, non_blocking=True) in the main process")
        out = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        th = threading.Thread(target=self._produce, args=(out, stop, self.batches),
                              name="gearbox-prefetch", daemon=True)
        th.start()
        try:
            while True:
                b = out.get()
                if isinstance(b, StopIteration):
                    return
                if isinstance(b, BaseException):
                    raise b
                if self.device.type == "cuda":
                    b = {k: v.to(self.device, non_blocking=True) for k, v in b.items()}
                yield b
        finally:
            stop.set()
            th.join(timeout=30)


def _bench(endpoint, batch, seconds, workers, step_ms):
    """Items/s of the plain client (one blocking request at a time) and of GearboxDataset in a
    DataLoader (prefetch 4) in this process and with `workers` worker processes, then of the
    plain client and the in-process DataLoader with a training step of step_ms after each batch
    (a sleep, as a step that waits for the GPU: the DataLoader overlaps its requests with it),
    interleaved: two rounds of each, averaged. Prints the five rates on one line."""
    import sys
    import time

    def plain(step):
        c = Client(endpoint)
        c.sample(batch)
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            n += len(c.sample(batch).index)
            if step:
                time.sleep(step)
        c.close()
        return n / (time.monotonic() - t0)

    def loader(w, step):
        ds = GearboxDataset(endpoint, batch, prefetch=4)
        it = iter(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=w))
        for _ in range(max(w, 1)):  # every worker started and delivering
            next(it)
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            n += len(next(it)["index"])
            if step:
                time.sleep(step)
        rate = n / (time.monotonic() - t0)
        del it
        return rate

    step = step_ms / 1000.0
    cases = (lambda: plain(0), lambda: loader(0, 0), lambda: loader(workers, 0),
             lambda: plain(step), lambda: loader(0, step))
    rates = [0.0] * len(cases)
    for _ in range(2):
        for k, fn in enumerate(cases):
            rates[k] += fn() / 2
    print(" ".join("%.1f" % r for r in rates))
    sys.stdout.flush()


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 7 and sys.argv[1] == "bench":
        _bench(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]),
               float(sys.argv[6]))
    else:
        print("usage: python3 gearbox_torch.py bench ENDPOINT BATCH SECONDS WORKERS STEP_MS",
              file=sys.stderr)
        sys.exit(2)
