"""gearbox_client: Python client of the gearbox offline-RL data server (`gearbox serve`).

Needs only pyzmq, msgpack and numpy. Sampled columns come back as numpy arrays that are views
of the received ZeroMQ frames (no copy); with torch importable, ``sample(..., torch=True)``
returns torch tensors over the same memory (still no copy).

    from gearbox_client import Client
    c = Client("tcp://127.0.0.1:5555")
    print(c.info()["columns"])
    b = c.sample(256, columns=["obs", "action", "valid"])
    b["obs"].shape        # (256, T, *obs_shape); a frame-stacked recording's: see below
    b.index, b.key, b.prob, b.weight, b.length
    c.update_priorities(b.index, new_priorities, key=b.key)
    p = [c.sample_async(256) for _ in range(4)]   # four requests in flight
    batches = [x.result() for x in p]             # replies matched by request id

Each request may name its selector: ``c.sample(256, selector="weighted")`` for prioritized
sampling (with importance weights in ``b.weight``) beside ``selector="uniform"`` for behaviour
cloning, from the same server. ``c.info()["selectors"]`` lists the ones the server offers:
uniform, fifo and lifo always, its default (server.replay.selector) and
server.replay.extra_selectors; another is refused with a ServerError naming them.

Offline RL reads by episode: ``c.sample(64, mode="window", steps=32)`` gives windows of 32 steps
inside episodes, ``mode="transition"`` every transition alike, ``mode="episode"`` whole episodes
and ``mode="epoch", cursor="me"`` each transition once per epoch (``b.end`` on its last batch);
these add ``episode`` and ``timestep`` columns. ``table="expert"`` names one of the server's
tables (``info()["tables"]``). docs/protocol.md has the details.

A table recorded with ``env.wrappers.frame_stack`` k > 1 stores each frame once: ``obs`` holds
each step's newest frame and the per-item ``obs_past`` the older frames of the item's first
step; ``rebuild_frame_stacks(b["obs"], b["obs_past"], b["valid"])`` gives the whole
observations of items sampled whole (``next_obs`` is stored whole).

A server with ``server.curve: true`` (authenticated, encrypted tcp) needs its public key, which
``gearbox serve`` prints: ``Client(ep, server_key="<40 Z85 chars>")`` with a fresh client key
pair, or ``key_file="client.key"`` (a key pair file, ``public <Z85>`` / ``secret <Z85>`` lines,
mode 0600) when the server allows only the keys listed in server.curve_clients.

Wire format (runtime/streams/wire.h): each message is [msgpack header][one raw frame per tensor].
The protocol, each message kind a table of named attributes, is declared in
workers/server/server_protocol.h (the tables in workers/server/server_protocol.c, printed in
docs/protocol.md); REQUEST_ATTRS and REPLY_ATTRS below mirror them.
Run ``python3 gearbox_client.py bench ENDPOINT BATCH SECONDS`` to measure sampling throughput
(prints bytes/s and items/s).
"""

import sys
import time

try:
    import msgpack
    import numpy as np
    import zmq
except ImportError as _e:  # say which Python has them, not only what is missing
    raise ImportError("gearbox_client: %s in %s; gearbox's Python has numpy, pyzmq and msgpack "
                      "(/opt/gearbox/python/bin/python, made by launch/install-deps.sh), or "
                      "install them into this one: %s -m pip install numpy pyzmq msgpack"
                      % (_e, sys.executable, sys.executable), name=_e.name) from _e

PROTOCOL = 2  # runtime/streams/wire.h GB_WIRE_PROTOCOL
MSG_SERVE_REQUEST = 16
MSG_SERVE_REPLY = 17
ROLE_CLIENT = 6
OP_INFO, OP_SAMPLE, OP_INSERT, OP_UPDATE, OP_CHECKPOINT = 1, 2, 3, 4, 5

# The attributes ("a") of each operation's request and reply, mirroring the tables of
# workers/server/server_protocol.c (a request carries its operation as "op"; a reply is read by the
# table of the operation it answers, and one carrying another attribute is refused).
REQUEST_ATTRS = {
    OP_INFO: ("op", "table"),
    OP_SAMPLE: ("op", "table", "batch", "t0", "t1", "timeout_ms", "selector", "mode", "len",
                "cursor", "reset"),
    OP_INSERT: ("op", "table"),
    OP_UPDATE: ("op", "table"),
    OP_CHECKPOINT: ("op", "table"),
}
REPLY_ATTRS = {
    OP_INFO: ("size", "capacity", "steps", "inserts", "samples", "max_batch_rows",
              "max_batch_bytes", "selector", "remover", "per_item", "selectors", "tables",
              "episodes", "transitions", "max_len", "weighted"),
    OP_SAMPLE: ("n", "size", "selector", "mode", "table", "epoch", "pos", "end"),
    OP_INSERT: ("n", "size"),
    OP_UPDATE: ("n", "skipped"),
    OP_CHECKPOINT: (),
}

# gb_dtype numbers (runtime/base/dtype.h) -> numpy; bfloat16 is carried as raw uint16.
DTYPES = {0: np.float32, 1: np.float64, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64,
          6: np.uint8, 7: np.uint16, 8: np.bool_, 9: np.float16, 10: np.uint16, 11: np.uint32,
          12: np.uint64}
DTYPE_CODES = {np.dtype(v): k for k, v in DTYPES.items() if k != 10}

# Selector names -> gb_selector_kind (runtime/config/config.h); -1 asks for the server's default.
SELECTORS = {"uniform": 0, "weighted": 1, "fifo": 2, "lifo": 3, "topk": 4}
SELECTOR_NAMES = {k: name for name, k in SELECTORS.items()}

ERRORS = {-1: "invalid", -2: "nomem", -3: "io", -5: "timeout", -6: "proto", -10: "closed",
          -11: "full", -12: "again", -13: "notfound", -14: "unsupported", -15: "corrupt"}


def rebuild_frame_stacks(obs, obs_past, valid):
    """Whole observations from a table recorded with env.wrappers.frame_stack k > 1, where each
    frame is stored once (runtime/streams/chunk.h "Frame stacks"): obs [n, T, C, ...] holds each
    row's newest frame, obs_past [n, (k-1)*C, ...] the k-1 older frames of row 0's stack, valid
    [n, T] the valid column; items sampled whole (t0 = t1 = 0). Returns [n, T, k*C, ...], the
    observations the policy saw, by the rule gb_chunk_stack_expand applies: slot j of row r is
    row r-(k-1-j)'s frame, clamped at the row's episode start (a row after a row that is not
    valid: the stack there is its first frame k times), and obs_past's before row 0."""
    obs, obs_past, valid = np.asarray(obs), np.asarray(obs_past), np.asarray(valid)
    n, T, C = obs.shape[0], obs.shape[1], obs.shape[2]
    k = obs_past.shape[1] // C + 1
    # frames -(k-1)..T-1 of each item: obs_past's, then the rows'
    frames = np.concatenate([obs_past.reshape((n, k - 1) + obs.shape[2:]), obs], axis=1)
    r = np.arange(T)[:, None]
    src = r - (k - 1) + np.arange(k)[None, :]                      # [T, k] row of each slot
    out = np.empty((n, T, k) + obs.shape[2:], dtype=obs.dtype)
    for i in range(n):
        starts = np.where(np.r_[False, valid[i][:-1] == 0], np.arange(T), -k)
        start = np.maximum.accumulate(starts)[:, None]             # [T, 1] latest episode start
        out[i] = frames[i][np.maximum(src, start) + (k - 1)]
    return out.reshape((n, T, k * C) + obs.shape[3:])


class ServerError(RuntimeError):
    """The server answered with an error: code is the GB_E* number, message says why."""

    def __init__(self, code, message):
        super().__init__("%s (%s)" % (message, ERRORS.get(code, code)))
        self.code = code


class Batch(dict):
    """Sampled columns by name, plus index, key, prob, weight, length (one entry per item), size
    (items the server could select from) and selector (the name of the selector that drew them;
    None from an older server). prob is the drawing selector's probability of each draw (1/size
    uniform, priority^alpha / sum weighted, 1 for fifo, lifo, topk); weight the importance
    weights (1 but for weighted)."""


def _table(table):
    """Request attributes naming a table (none: the server's default table)."""
    return {} if table is None else {"table": str(table)}


def _key_bytes(key):
    key = key.encode() if isinstance(key, str) else bytes(key)
    if len(key) != 40:
        raise ValueError("a CURVE key is 40 Z85 characters")
    return key


def read_key_file(path):
    """(public, secret) Z85 keys as bytes from a gearbox key pair file (runtime/streams/curve.h)."""
    keys = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0] in ("public", "secret"):
                keys[parts[0]] = _key_bytes(parts[1])
    if set(keys) != {"public", "secret"}:
        raise ValueError("%s: expected 'public <Z85>' and 'secret <Z85>' lines" % path)
    return keys["public"], keys["secret"]


class Pending:
    """A request in flight (Client.sample_async, Client.info_async): result() waits for its
    reply (the client's timeout from the call to result()) and returns what the blocking call
    would; it raises what the blocking call would raise. A reply that arrives before its
    result() is asked for is kept by the client until then (or until it closes)."""

    def __init__(self, client, rid, finish):
        self._client, self.id, self._finish = client, rid, finish

    def result(self, timeout_ms=None):
        return self._finish(*self._client._wait(self.id, timeout_ms))


class Client:
    """One DEALER connection (use one client per thread). Blocking calls send one request and
    wait for its reply; sample_async and info_async send a request and return a Pending, so
    several requests can be in flight at once (replies are matched by request id)."""

    def __init__(self, endpoint, timeout_ms=10000, context=None, server_key=None, key_file=None):
        self.endpoint = endpoint
        self.timeout_ms = timeout_ms
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.RCVHWM, 0)
        if server_key is not None:
            public, secret = read_key_file(key_file) if key_file else zmq.curve_keypair()
            self._sock.curve_serverkey = _key_bytes(server_key)
            self._sock.curve_publickey = public
            self._sock.curve_secretkey = secret
        self._sock.connect(endpoint)
        self._seq = 0
        self._inflight = {}  # request id -> op, sent and not yet collected
        self._ready = {}     # request id -> (header, frames) received before it was waited for
        self._info = None

    def close(self):
        self._sock.close(0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- transport -------------------------------------------------------------------------

    def _send(self, op, tensors=(), policy_version=-1, attrs=None):
        """Sends one request and returns its id; the reply is collected by _wait(id). Several
        requests may be in flight at once (the server answers them in any order). attrs: the
        request's attributes besides op (REQUEST_ATTRS[op]: table, and a sample's batch, ...)."""
        attrs = dict(attrs or {}, op=op)
        unknown = set(attrs) - set(REQUEST_ATTRS[op])
        if unknown:
            raise ValueError("not attributes of this request: %s" % ", ".join(sorted(unknown)))
        self._seq += 1
        hdr = {"v": PROTOCOL, "t": MSG_SERVE_REQUEST, "r": ROLE_CLIENT, "i": 0, "s": self._seq,
               "p": int(policy_version), "a": attrs,
               "T": [[name, code, list(shape)] for name, code, shape, _ in tensors]}
        frames = [msgpack.packb(hdr, use_bin_type=True)] + [buf for _, _, _, buf in tensors]
        self._sock.send_multipart(frames, copy=False)
        self._inflight[self._seq] = op
        return self._seq

    def _wait(self, rid, timeout_ms=None):
        """The reply to request rid as (header, [(name, array)]): replies to other requests in
        flight that arrive first are kept for their own _wait; replies matching no request in
        flight (ones given up on) are dropped. Raises ServerError (the server's error, or a
        malformed reply), TimeoutError (the request is then given up)."""
        op = self._inflight.get(rid)
        if op is None:
            raise ValueError("request %r is not in flight" % rid)
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000.0
        while rid not in self._ready:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sock.poll(int(left * 1000) + 1):
                if time.monotonic() >= deadline:
                    del self._inflight[rid]
                    raise TimeoutError("no reply from %s within %d ms"
                                       % (self.endpoint, timeout_ms))
                continue
            parts = self._sock.recv_multipart(copy=False)
            rh = msgpack.unpackb(parts[0].bytes, raw=False)
            s = rh.get("s")
            if s == 0 and rh.get("st", 0) != 0 and len(self._inflight) == 1:
                s = rid  # an unreadable request: the server could not read its id
            if s in self._inflight and s not in self._ready:
                self._ready[s] = (rh, parts)
        rh, parts = self._ready.pop(rid)
        del self._inflight[rid]
        if rh.get("st", 0) != 0:
            raise ServerError(rh["st"], rh.get("x", ""))
        if rh.get("t") != MSG_SERVE_REPLY or not set(rh.get("a", {})) <= set(REPLY_ATTRS[op]):
            raise ServerError(-6, "unexpected reply")
        descs = rh.get("T", [])
        if len(descs) != len(parts) - 1:
            raise ServerError(-6, "reply frames do not match its header")
        arrays = []
        for (name, code, shape), frame in zip(descs, parts[1:]):
            dt = np.dtype(DTYPES[code])
            n = int(np.prod(shape)) if shape else 1
            if len(frame.buffer) != n * dt.itemsize:
                raise ServerError(-6, "tensor %s: frame size does not match" % name)
            arrays.append((name, np.frombuffer(frame.buffer, dtype=dt).reshape(shape)))
        return rh, arrays

    def _request(self, op, tensors=(), policy_version=-1, attrs=None):
        return self._wait(self._send(op, tensors, policy_version, attrs))

    def in_flight(self):
        """Requests sent and not yet collected."""
        return len(self._inflight)

    # ---- requests --------------------------------------------------------------------------

    def info(self, table=None):
        """Schema, counters and limits: dict with size, capacity, steps, inserts, samples,
        max_batch_rows, max_batch_bytes, selector (the default one), selectors (every name a
        sample request may give, e.g. ["uniform", "weighted", "fifo", "lifo"]), remover, and
        columns: {name: (numpy dtype, per-step (or per-item) shape, per_item)} in schema
        order; tables (every table, the default first), episodes, transitions and max_len
        (the table's episode index, 0 without one); with the weighted selector offered,
        weight_total (its sum of priority^alpha) and beta (floats, for sampling across
        servers: gearbox_shards). table: the table to describe (None: the default)."""
        return self._info_reply(*self._request(OP_INFO, attrs=_table(table)), table=table)

    def info_async(self, table=None):
        """info() without waiting: a Pending whose result() is info()'s dict."""
        return Pending(self, self._send(OP_INFO, attrs=_table(table)),
                       lambda rh, arrays: self._info_reply(rh, arrays, table=table))

    def _info_reply(self, rh, arrays, table=None):
        attrs = rh.get("a", {})  # REPLY_ATTRS[OP_INFO]
        mask = int(attrs.get("per_item", 0))
        cols = {}
        for k, (name, a) in enumerate(arrays):
            per_item = bool((mask >> k) & 1)
            cols[name] = (a.dtype, tuple(a.shape[1 if per_item else 2:]), per_item)
        info = {k: attrs[k] for k in ("size", "capacity", "steps", "inserts", "samples",
                                      "max_batch_rows", "max_batch_bytes")}
        info.update({"selector": attrs.get("selector"), "remover": attrs.get("remover"),
                "selectors": list(attrs.get("selectors", [])),
                "tables": list(attrs.get("tables", [])),
                "episodes": attrs.get("episodes", 0),
                "transitions": attrs.get("transitions", 0),
                "max_len": attrs.get("max_len", 0), "columns": cols})
        if "weighted" in attrs:  # the weighted selector's, for sharded sampling
            info["weight_total"], info["beta"] = (float(x) for x in attrs["weighted"])
        if table is None:  # the default table's schema serves insert()
            self._info = info
        return info

    def sample(self, batch, columns=None, t0=0, t1=0, timeout_ms=-1, torch=False,
               selector=None, table=None, mode=None, steps=None, cursor=None, reset=False,
               _async=False):
        """Samples batch items. columns: names (None = all); steps [t0, t1) (t1 = 0: T);
        selector: None or "default" (the server's default selector), or one of
        info()["selectors"]: "uniform", "weighted", "fifo", "lifo", "topk" (or its kind number,
        0..4); a selector the server does not offer raises ServerError naming the ones it does,
        an unknown name ValueError. Returns a Batch of read-only arrays viewing the received
        frames (or torch tensors over them with torch=True).

        table: the table to sample (None: the default). mode (docs/protocol.md, "Sampling
        modes"): None or "item" (the above), "window" (`steps` steps inside one episode, every
        start alike; default T), "transition" (every transition alike, `steps` steps from it,
        default 1, zero past the episode's end), "episode" (whole episodes padded to the
        longest in the batch) or "epoch" (each transition once per epoch in a shuffled order, at
        the place of the reader's cursor, a name; reset=True restarts it). These add the
        columns "episode" [n] and "timestep" [n, S] and set b.mode, and for epochs b.epoch,
        b.pos and b.end (True on the epoch's last, possibly short, batch)."""
        tensors = []
        if columns:
            names = b"".join(c.encode() + b"\0" for c in columns)
            tensors.append(("columns", 6, [len(names)], names))
        if selector is None or selector == "default":
            sel = -1
        elif isinstance(selector, str):
            if selector not in SELECTORS:
                raise ValueError("unknown selector %r (expected None, 'default' or one of %s)"
                                 % (selector, ", ".join(SELECTORS)))
            sel = SELECTORS[selector]
        else:
            sel = int(selector)
        attrs = _table(table)
        attrs.update({"batch": int(batch), "t0": int(t0), "t1": int(t1),
                      "timeout_ms": int(timeout_ms), "selector": int(sel)})
        if mode is not None:
            attrs["mode"] = str(mode)
        if steps is not None:
            attrs["len"] = int(steps)
        if cursor is not None:
            attrs["cursor"] = str(cursor)
        if reset:
            attrs["reset"] = 1
        rid = self._send(OP_SAMPLE, tensors, attrs=attrs)
        if _async:
            return Pending(self, rid, lambda rh, arrays: self._batch(rh, arrays, torch))
        return self._batch(*self._wait(rid), torch)

    def sample_async(self, batch, **kwargs):
        """sample() without waiting: sends the request and returns a Pending whose result() is
        the Batch. Keep several in flight to hide the round trip (gearbox_torch does)."""
        return self.sample(batch, _async=True, **kwargs)

    @staticmethod
    def _batch(rh, arrays, torch):
        out = Batch()
        for name, a in arrays:
            out[name] = a
        per_row = {k: out.pop(k) for k in ("index", "key", "prob", "weight", "length")}
        if torch:
            import warnings

            import torch as th
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # read-only frames: torch warns, still no copy
                for k in list(out):
                    out[k] = th.from_numpy(out[k])
        out.index, out.key, out.prob = per_row["index"], per_row["key"], per_row["prob"]
        ra = rh.get("a", {})  # REPLY_ATTRS[OP_SAMPLE]; absent ones at their defaults
        out.weight, out.length, out.size = per_row["weight"], per_row["length"], ra["size"]
        out.selector = SELECTOR_NAMES.get(ra.get("selector", -1))
        out.mode = ra.get("mode", "item")
        out.epoch = ra.get("epoch")
        out.pos = ra.get("pos", 0) if out.epoch is not None else None
        out.end = bool(ra.get("end", 0))
        return out

    def insert(self, columns, priority=None, length=None, policy_version=-1, table=None):
        """Inserts n items: columns maps every schema column to an array [n, T, *shape] (per
        step) or [n, *shape] (per item). Returns the server's size afterwards. table: the
        table to insert into (None: the default)."""
        info = self.info(table) if table is not None else (self._info or self.info())
        tensors = []
        for name, (dt, shape, per_item) in info["columns"].items():
            a = np.ascontiguousarray(columns[name], dtype=dt)
            tensors.append((name, DTYPE_CODES[np.dtype(dt)], a.shape, a))
        n = tensors[0][2][0]
        if priority is not None:
            p = np.ascontiguousarray(priority, dtype=np.float64)
            tensors.append(("priority", 1, [n], p))
        if length is not None:
            ln = np.ascontiguousarray(length, dtype=np.int32)
            tensors.append(("length", 4, [n], ln))
        rh, _ = self._request(OP_INSERT, tensors, policy_version=policy_version,
                              attrs=_table(table))
        return rh["a"]["size"]

    def update_priorities(self, index, priority, key=None, table=None):
        """Sets priorities of sampled items; with key, items replaced since are skipped.
        Returns how many were skipped."""
        idx = np.ascontiguousarray(index, dtype=np.int64)
        pr = np.ascontiguousarray(priority, dtype=np.float64)
        tensors = [("index", 5, [len(idx)], idx), ("priority", 1, [len(pr)], pr)]
        if key is not None:
            k = np.ascontiguousarray(key, dtype=np.uint64)
            tensors.append(("key", 12, [len(k)], k))
        rh, _ = self._request(OP_UPDATE, tensors, attrs=_table(table))
        return rh["a"]["skipped"]

    def checkpoint(self):
        """Asks the server to write its checkpoint; returns its path."""
        rh, _ = self._request(OP_CHECKPOINT)
        return rh.get("x", "")


def _bench(endpoint, batch, seconds):
    c = Client(endpoint)
    c.info()
    c.sample(batch)
    n = nbytes = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        b = c.sample(batch)
        n += len(b.index)
        nbytes += sum(a.nbytes for a in b.values())
    dt = time.monotonic() - t0
    print("%.1f %.1f" % (nbytes / dt, n / dt))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "bench":
        _bench(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        print("usage: python3 gearbox_client.py bench ENDPOINT BATCH SECONDS", file=sys.stderr)
        sys.exit(2)
