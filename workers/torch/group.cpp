// workers/torch/group.cpp: the trainers' process group (workers/torch/group.h) over libtorch's
// c10d: a FileStore or TCPStore rendezvous (under a PrefixStore) and ProcessGroupGloo; every call
// wraps the caller's buffers in tensors (torch::from_blob) and waits for c10d's work object.
// defines: gb_group_* (group.h); the group's state and how its calls wait and end early:
//          group_wait.hpp
//
// What c10d 1.13's Gloo backend offers and what this file does about it:
// - allgather: ProcessGroupGloo has no _allgather_base ("no support for _allgather_base in Gloo
//   process group"), so gbt_group_allgather calls allgather with one view of out per rank (Gloo
//   gathers into a flat buffer of its own and copies into the views).
// - alltoall: alltoall_base with split sizes is supported on CPU tensors of any dtype; uint8
//   tensors make the sizes bytes.
// - A call that gives up (opts.abandon) closes the group's connections, through which Gloo moves
//   no more bytes, but not the collective's thread, which goes on with the local step it is in,
//   or starts the collective only then (group_wait.cpp), and the local steps use the buffers:
//   all-to-all's copy of this rank's own part, allgather's copy in and its copy out, a large
//   all-reduce's reductions. Under load a CI run lost a rank to it (SIGSEGV: Gloo's 32 MB
//   own-part copy ran on as the test freed the buffers of the all-to-all that gave up). So
//   with opts.abandon no call leaves Gloo a local step on the caller's buffers: an all-to-all
//   copies its own part itself and moves the others with empty own parts (alltoall_apart: one
//   all-to-all for two ranks, two for more; no copy added), an allgather and a large
//   all-reduce work on the group's own buffers (staged: copied in, and out once the call
//   succeeded), which an abandoned group keeps, and a broadcast, which has no local step,
//   stays in place.
#include "workers/torch/group.hpp"
#include "workers/torch/group_wait.hpp"
#include "workers/torch/module.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

using gbt_wait::group_call;
using gbt_wait::wait_for;
using gbt_wait::wait_present;
using gbt_wait::works;

namespace {

// Abandoned groups, never freed (their Gloo threads may still wait in a collective): reachable,
// so that leak checkers do not count them.
std::mutex abandoned_mutex;
std::vector<gb_group *> abandoned_groups;

c10d::AllreduceOptions allreduce_opts(const gb_group *g, gb_group_op op)
{
    c10d::AllreduceOptions ao;
    ao.reduceOp = op == GB_GROUP_SUM   ? c10d::ReduceOp::SUM
                  : op == GB_GROUP_MIN ? c10d::ReduceOp::MIN
                                       : c10d::ReduceOp::MAX;
    ao.timeout = g->timeout;
    return ao;
}

torch::Tensor bytes_view(const void *p, size_t bytes)
{
    static uint8_t none; // from_blob wants a pointer even for zero bytes
    return torch::from_blob(p ? const_cast<void *>(p) : &none, {(int64_t)bytes}, torch::kUInt8);
}

// The buffer a call's collective works on: with opts.abandon the group's (the file's head), at
// least bytes, holding a copy of from where from is not NULL; else the caller's (no copy).
uint8_t *staged(gb_group *g, std::vector<uint8_t> &stage, const void *caller, size_t bytes,
                const void *from)
{
    if (!g->abandon)
        return (uint8_t *)const_cast<void *>(caller);
    if (stage.size() < bytes)
        stage.resize(bytes);
    if (from && bytes)
        std::memcpy(stage.data(), from, bytes);
    return stage.data();
}

// A staged result back into the caller's buffer (nothing where the call worked in place).
void unstage(const uint8_t *stage, void *caller, size_t bytes)
{
    if (stage != caller && bytes)
        std::memcpy(caller, stage, bytes);
}

bool dtype_of(gb_dtype d, torch::ScalarType *t)
{
    switch (d) {
    case GB_DTYPE_FLOAT32: *t = torch::kFloat32; return true;
    case GB_DTYPE_FLOAT64: *t = torch::kFloat64; return true;
    case GB_DTYPE_INT32: *t = torch::kInt32; return true;
    case GB_DTYPE_INT64: *t = torch::kInt64; return true;
    case GB_DTYPE_UINT8: *t = torch::kUInt8; return true;
    default: return false;
    }
}

// Small all-reduces go through one all-to-all: every rank sends its whole buffer to every rank
// and reduces the size copies itself, in rank order, so every rank ends with the same bytes.
// Gloo's allreduce makes 2(N-1) dependent steps (a ring) where the all-to-all makes one round of
// pairwise sends, and when the cores are shared each step waits for a peer to be scheduled.
// Measured through c10d on the 2-core development machine, 8 doubles, p50: 4 ranks 4249 us
// (allreduce) against 472 us (all-to-all); 2 ranks 198 against 73 us. Above this many bytes
// (size x buffer) the ring's bandwidth wins.
constexpr size_t kSmallAllreduceBytes = 256 * 1024;

template <class T> void reduce_copies(T *out, const uint8_t *in, int64_t count, int size,
                                      gb_group_op op)
{
    const T *c = reinterpret_cast<const T *>(in);
    for (int64_t i = 0; i < count; i++)
        out[i] = c[i];
    for (int r = 1; r < size; r++) {
        c = reinterpret_cast<const T *>(in) + (size_t)r * (size_t)count;
        for (int64_t i = 0; i < count; i++)
            out[i] = op == GB_GROUP_SUM   ? (T)(out[i] + c[i])
                     : op == GB_GROUP_MIN ? (c[i] < out[i] ? c[i] : out[i])
                                          : (c[i] > out[i] ? c[i] : out[i]);
    }
}

void small_allreduce(gb_group *g, gb_dtype dtype, void *buf, int64_t count, gb_group_op op)
{
    size_t bytes = (size_t)count * gb_dtype_size(dtype), n = (size_t)g->size;
    if (g->small_out.size() < n * bytes) {
        g->small_out.resize(n * bytes);
        g->small_in.resize(n * bytes);
    }
    for (size_t r = 0; r < n; r++)
        std::memcpy(g->small_out.data() + r * bytes, buf, bytes);
    g->split_send.assign(n, (int64_t)bytes); // no allocation after the first call
    at::Tensor input = bytes_view(g->small_out.data(), n * bytes),
               output = bytes_view(g->small_in.data(), n * bytes);
    c10d::AllToAllOptions ao;
    ao.timeout = g->timeout;
    wait_for(g, g->pg->alltoall_base(output, input, g->split_send, g->split_send, ao));
    g->sent += (int64_t)((n - 1) * bytes);
    g->received += (int64_t)((n - 1) * bytes);
    const uint8_t *in = g->small_in.data();
    switch (dtype) {
    case GB_DTYPE_FLOAT32: reduce_copies((float *)buf, in, count, g->size, op); break;
    case GB_DTYPE_FLOAT64: reduce_copies((double *)buf, in, count, g->size, op); break;
    case GB_DTYPE_INT32: reduce_copies((int32_t *)buf, in, count, g->size, op); break;
    case GB_DTYPE_INT64: reduce_copies((int64_t *)buf, in, count, g->size, op); break;
    default: reduce_copies((uint8_t *)buf, in, count, g->size, op); break;
    }
}

} // namespace

extern "C" int gbt_group_open(const gb_group_opts *o, gb_group **out, gb_error *err)
{
    *out = nullptr;
    if (o->size < 1 || o->rank < 0 || o->rank >= o->size)
        return gb_error_set(err, GB_EINVAL, "group: rank %d of size %d", o->rank, o->size);
    if (!(o->timeout_s > 0) || !std::isfinite(o->timeout_s))
        return gb_error_set(err, GB_EINVAL, "group: timeout_s must be > 0 (got %g)", o->timeout_s);
    const int any_port = o->rank == 0 && o->store_ready; /* rank 0 may take any free port */
    if (!(o->store_path && o->store_path[0]) &&
        !(o->tcp_host && o->tcp_host[0] && o->tcp_port >= !any_port && o->tcp_port < 65536))
        return gb_error_set(err, GB_EINVAL, "group: needs a store_path, or a tcp_host and a "
                            "tcp_port in 1..65535 (got %d)", o->tcp_port);
    if (o->nccl && !gbt_group_has_nccl())
        return gb_error_set(err, GB_EUNSUPPORTED, "group: this libtorch has no NCCL (Debian's "
                            "is CPU-only): trainers on GPUs need a build against PyTorch's CUDA "
                            "wheel (tests/gpu/build_for_device.sh), or trainer.backend gloo");
    gb_group *g = new (std::nothrow) gb_group();
    if (!g)
        return gb_error_set(err, GB_ENOMEM, "group: out of memory");
    g->rank = o->rank;
    g->size = o->size;
    g->timeout = std::chrono::milliseconds((int64_t)std::ceil(o->timeout_s * 1000.0));
    g->abandon = o->abandon;
    g->abandon_arg = o->abandon_arg;
    int ready_rc = 0;
    int rc = group_call(g, "group open", err, [&] {
        c10::intrusive_ptr<c10d::Store> base;
        if (o->store_path && o->store_path[0]) {
            base = c10::make_intrusive<c10d::FileStore>(o->store_path, o->size);
            base->setTimeout(g->timeout);
        } else {
            c10d::TCPStoreOptions so;
            so.port = (uint16_t)o->tcp_port;
            so.isServer = o->rank == 0;
            so.numWorkers = (size_t)o->size;
            // with store_ready the others learn the port after the store listens: rank 0 must
            // not wait for them here (Gloo's rendezvous below waits for every rank anyway)
            so.waitWorkers = !o->store_ready;
            so.timeout = g->timeout;
            auto tcp = c10::make_intrusive<c10d::TCPStore>(std::string(o->tcp_host), so);
            if (o->rank == 0 && o->store_ready &&
                (ready_rc = o->store_ready(o->store_ready_arg, (int)tcp->getPort(), err)))
                return;
            base = tcp;
        }
        g->store = c10::make_intrusive<c10d::PrefixStore>(o->prefix ? o->prefix : "", base);
        if (g->abandon)
            wait_present(g);
        auto opts = c10d::ProcessGroupGloo::Options::create(g->timeout);
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(
            o->device_host && o->device_host[0] ? o->device_host : "127.0.0.1"));
        g->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(g->store, o->rank, o->size, opts);
#ifdef USE_C10D_NCCL
        if (o->nccl) { // its own keys in the same store; the device: each rank's current one
            auto nopts = c10d::ProcessGroupNCCL::Options::create();
            nopts->timeout = g->timeout;
            g->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
                c10::make_intrusive<c10d::PrefixStore>("nccl/", g->store), o->rank, o->size,
                nopts);
        }
#endif
    });
    if (rc == 0 && ready_rc)
        rc = ready_rc; // err filled by store_ready
    if (rc) {
        gbt_group_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

// Destroying the process group joins its worker threads: a collective still in flight after a
// failed call ends (Gloo's own timeout) before close returns, so the call's buffers are free.
// One a call left running as it ended early (group_wait.cpp's end_pending) may wait out the
// whole timeout: its group is not destroyed but left to its threads (its connections closed,
// it touches no caller buffer again), never freed.
extern "C" void gbt_group_close(gb_group *g)
{
    if (!g)
        return;
    bool running = false;
    for (auto &w : g->stuck)
        running = running || !w->isCompleted();
    if (running) {
        try {
            std::lock_guard<std::mutex> lock(abandoned_mutex);
            abandoned_groups.push_back(g);
        } catch (...) {
            // out of memory: left unlisted, still not freed
        }
        return;
    }
    try {
#ifdef USE_C10D_NCCL
        g->nccl.reset();
#endif
        g->pg.reset();
        g->store.reset();
    } catch (...) {
        // a destructor that throws while tearing down: nothing left to do
    }
    delete g;
}

extern "C" int gbt_group_rank(const gb_group *g) { return g->rank; }
extern "C" int gbt_group_size(const gb_group *g) { return g->size; }

extern "C" int gbt_group_allreduce(gb_group *g, gb_dtype dtype, void *buf, int64_t count,
                                   gb_group_op op, gb_error *err)
{
    torch::ScalarType t;
    if (!dtype_of(dtype, &t))
        return gb_error_set(err, GB_EINVAL, "allreduce: dtype %s not supported",
                            gb_dtype_name(dtype));
    if (count < 0 || (count > 0 && !buf))
        return gb_error_set(err, GB_EINVAL, "allreduce: %lld values at %p", (long long)count,
                            buf);
    if (op != GB_GROUP_SUM && op != GB_GROUP_MIN && op != GB_GROUP_MAX)
        return gb_error_set(err, GB_EINVAL, "allreduce: unknown op %d", (int)op);
    return group_call(g, "allreduce", err, [&] {
        if (count == 0) // every rank passes the same count: nothing to exchange anywhere
            return;
        if (g->size > 1 &&
            (size_t)count * gb_dtype_size(dtype) * (size_t)g->size <= kSmallAllreduceBytes)
            return small_allreduce(g, dtype, buf, count, op);
        const size_t bytes = (size_t)count * gb_dtype_size(dtype);
        uint8_t *work = staged(g, g->stage_out, buf, bytes, buf);
        std::vector<at::Tensor> ts{torch::from_blob(work, {count}, t)};
        wait_for(g, g->pg->allreduce(ts, allreduce_opts(g, op)));
        unstage(work, buf, bytes);
    });
}

extern "C" int gbt_group_has_nccl(void)
{
#ifdef USE_C10D_NCCL
    return 1;
#else
    return 0;
#endif
}

int gbt_group_nccl(const gb_group *g)
{
#ifdef USE_C10D_NCCL
    return g && g->nccl ? 1 : 0;
#else
    (void)g;
    return 0;
#endif
}

int gbt_group_allreduce_tensor(gb_group *g, torch::Tensor &t, gb_group_op op, gb_error *err)
{
    const gb_dtype dt = t.scalar_type() == torch::kFloat64 ? GB_DTYPE_FLOAT64 : GB_DTYPE_FLOAT32;
    if (!t.is_cuda())
        return gbt_group_allreduce(g, dt, t.data_ptr(), t.numel(), op, err);
#ifdef USE_C10D_NCCL
    if (g->nccl)
        return group_call(g, "allreduce (nccl)", err, [&] {
            std::vector<at::Tensor> ts{t};
            wait_for(g, g->nccl->allreduce(ts, allreduce_opts(g, op)));
        });
#endif
    torch::Tensor host = t.to(torch::kCPU).contiguous(); // staged through Gloo
    int rc = gbt_group_allreduce(g, dt, host.data_ptr(), host.numel(), op, err);
    if (rc == 0)
        t.copy_(host);
    return rc;
}

extern "C" int gbt_group_allgather(gb_group *g, const void *in, size_t bytes, void *out,
                                   gb_error *err)
{
    if (bytes > 0 && (!in || !out))
        return gb_error_set(err, GB_EINVAL, "allgather: NULL buffer for %zu bytes", bytes);
    return group_call(g, "allgather", err, [&] {
        if (bytes == 0)
            return;
        const size_t all = bytes * (size_t)g->size;
        const uint8_t *src = staged(g, g->stage_in, in, bytes, in);
        uint8_t *dst = staged(g, g->stage_out, out, all, nullptr);
        std::vector<at::Tensor> input{bytes_view(src, bytes)};
        std::vector<std::vector<at::Tensor>> output(1);
        for (int r = 0; r < g->size; r++)
            output[0].push_back(bytes_view(dst + (size_t)r * bytes, bytes));
        c10d::AllgatherOptions ao;
        ao.timeout = g->timeout;
        wait_for(g, g->pg->allgather(output, input, ao));
        unstage(dst, out, all);
    });
}

extern "C" int gbt_group_broadcast(gb_group *g, void *buf, size_t bytes, int root, gb_error *err)
{
    if (root < 0 || root >= g->size)
        return gb_error_set(err, GB_EINVAL, "broadcast: root %d of %d ranks", root, g->size);
    if (bytes > 0 && !buf)
        return gb_error_set(err, GB_EINVAL, "broadcast: NULL buffer for %zu bytes", bytes);
    return group_call(g, "broadcast", err, [&] {
        if (bytes == 0)
            return;
        std::vector<at::Tensor> ts{bytes_view(buf, bytes)};
        c10d::BroadcastOptions bo;
        bo.rootRank = root;
        bo.rootTensor = 0;
        bo.timeout = g->timeout;
        wait_for(g, g->pg->broadcast(ts, bo));
    });
}

namespace {

// An all-to-all with opts.abandon, in which Gloo's threads touch the caller's buffers only
// through the group's connections (which a given-up call closes; the file's head): its own part
// copied here, in the caller's thread, and the others moved by two concurrent all-to-alls on
// c10d's two threads, each with an empty own part (Gloo's local copy, the step that outlived a
// given-up call, copies nothing): "down" sends each rank's parts for the ranks below it and
// receives those from the ranks above, "up" the other way. Parts in rank order, so each one's
// views are contiguous. Every rank makes both calls in the same order. Two ranks make one call:
// each has ranks on one side only, so one view skips its own part (two would cost a second
// collective's latency: p50 over 40 calls of 64 KiB parts, forked ranks here, ~0.1-0.4 ms);
// one rank alone makes none (its own part is all there is).
void alltoall_apart(gb_group *g, const uint8_t *in, const size_t *send_bytes, uint8_t *out,
                    const size_t *recv_bytes)
{
    const size_t n = (size_t)g->size, me = (size_t)g->rank;
    for (auto *v : {&g->down_send, &g->down_recv, &g->up_send, &g->up_recv})
        v->assign(n, 0); // no allocation after the first call
    size_t below_send = 0, below_recv = 0, above_send = 0, above_recv = 0;
    for (size_t r = 0; r < n; r++) {
        if (r < me) {
            g->down_send[r] = (int64_t)send_bytes[r];
            g->up_recv[r] = (int64_t)recv_bytes[r];
            below_send += send_bytes[r];
            below_recv += recv_bytes[r];
        } else if (r > me) {
            g->up_send[r] = (int64_t)send_bytes[r];
            g->down_recv[r] = (int64_t)recv_bytes[r];
            above_send += send_bytes[r];
            above_recv += recv_bytes[r];
        }
    }
    const size_t own_in = below_send, own_out = below_recv, own = send_bytes[me];
    c10d::AllToAllOptions ao;
    ao.timeout = g->timeout;
    at::Tensor down_in = bytes_view(in, below_send),
               down_out = bytes_view(out ? out + own_out + own : nullptr, above_recv),
               up_in = bytes_view(in ? in + own_in + own : nullptr, above_send),
               up_out = bytes_view(out, below_recv);
    works ws;
    if (n == 2) { // the other rank is below (down) or above (up): one call, one side
        const bool down = me == 1;
        ws.push_back(g->pg->alltoall_base(down ? up_out : down_out, down ? down_in : up_in,
                                          down ? g->up_recv : g->down_recv,
                                          down ? g->down_send : g->up_send, ao));
    } else if (n > 2) { // one rank alone has nothing to move
        ws.push_back(g->pg->alltoall_base(down_out, down_in, g->down_recv, g->down_send, ao));
        ws.push_back(g->pg->alltoall_base(up_out, up_in, g->up_recv, g->up_send, ao));
    }
    if (own) // while the others move
        std::memcpy(out + own_out, in + own_in, own);
    wait_for(g, ws);
}

} // namespace

extern "C" int gbt_group_alltoall(gb_group *g, const void *in, const size_t *send_bytes,
                                  void *out, const size_t *recv_bytes, gb_error *err)
{
    size_t st = 0, rt = 0;
    for (int r = 0; r < g->size; r++) {
        st += send_bytes[r];
        rt += recv_bytes[r];
    }
    if ((st > 0 && !in) || (rt > 0 && !out))
        return gb_error_set(err, GB_EINVAL, "alltoall: NULL buffer for %zu bytes out, %zu in",
                            st, rt);
    if (send_bytes[g->rank] != recv_bytes[g->rank])
        return gb_error_set(err, GB_EINVAL, "alltoall: rank %d sends itself %zu bytes but "
                            "receives %zu", g->rank, send_bytes[g->rank], recv_bytes[g->rank]);
    return group_call(g, "alltoall", err, [&] {
        if (g->abandon) {
            alltoall_apart(g, (const uint8_t *)in, send_bytes, (uint8_t *)out, recv_bytes);
        } else {
            g->split_send.resize((size_t)g->size); // no allocation after the first call
            g->split_recv.resize((size_t)g->size);
            for (int r = 0; r < g->size; r++) {
                g->split_send[(size_t)r] = (int64_t)send_bytes[r];
                g->split_recv[(size_t)r] = (int64_t)recv_bytes[r];
            }
            at::Tensor input = bytes_view(in, st), output = bytes_view(out, rt);
            c10d::AllToAllOptions ao;
            ao.timeout = g->timeout;
            wait_for(g, g->pg->alltoall_base(output, input, g->split_recv, g->split_send, ao));
        }
        g->sent += (int64_t)(st - send_bytes[g->rank]);
        g->received += (int64_t)(rt - recv_bytes[g->rank]);
    });
}

extern "C" int gbt_group_failed(const gb_group *g) { return g && g->failed; }

extern "C" void gbt_group_traffic(const gb_group *g, int64_t *sent, int64_t *received)
{
    *sent = g ? g->sent : 0;
    *received = g ? g->received : 0;
}

extern "C" int gbt_group_barrier(gb_group *g, gb_error *err)
{
    return group_call(g, "barrier", err, [&] {
        c10d::BarrierOptions bo;
        bo.timeout = g->timeout;
        wait_for(g, g->pg->barrier(bo));
    });
}
