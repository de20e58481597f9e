// workers/torch/group.cpp: the trainers' process group (workers/torch/group.h) over libtorch's
// c10d: a FileStore or TCPStore rendezvous (under a PrefixStore) and ProcessGroupGloo; every call
// wraps the caller's buffers in tensors (torch::from_blob) and waits for c10d's work object.
// defines: struct gb_group, gb_group_* (group.h)
//
// What c10d 1.13's Gloo backend offers and what this file does about it:
// - allgather: ProcessGroupGloo has no _allgather_base ("no support for _allgather_base in Gloo
//   process group"), so gbt_group_allgather calls allgather with one view of out per rank (Gloo
//   gathers into a flat buffer of its own and copies into the views).
// - alltoall: alltoall_base with split sizes is supported on CPU tensors of any dtype; uint8
//   tensors make the sizes bytes.
// - A peer that exits makes the next call fail at once with Gloo's "Connection reset by peer" or
//   "Connection closed by peer"; a peer that hangs makes it fail after the timeout (Gloo's own
//   "Timed out waiting ..." or the work's "Operation timed out!").
// - Except: a send that Gloo could not write in place (the socket's buffer full, or the peer
//   already gone: EPIPE) waits in the pair's queue, and when the pair then fails, Gloo signals
//   the queued sends of bound buffers only (tcp::Pair::signalException looks at op.buf, not
//   op.ubuf; Debian's 2022 Gloo and Gloo's main branch alike): the collective's send waits out
//   the whole timeout although its peer is dead. Seen in tests/launch/run_slurm_nodes.sh (a
//   trainer killed just after the group formed, over a bridge with a 1448-byte MSS): the
//   survivor sat in UnboundBuffer::waitSend and was killed as hung. Hence opts.abandon: a call
//   waits in slices of kAbandonPollMs and asks it in between; an abandoned call closes the
//   group's connections (no data moves into or out of the caller's buffers after it returns)
//   and leaves the collective to its Gloo thread, which ends at the timeout (gbt_group_close).
#include "workers/torch/group.hpp"
#include "workers/torch/module.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

struct gb_group {
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
    int rank = 0, size = 0;
    std::chrono::milliseconds timeout{0};
    bool failed = false; // a call failed: the group refuses every later call
    std::vector<uint8_t> small_out, small_in; // a small all-reduce's all-to-all (grow-only)
    std::vector<int64_t> split_send, split_recv; // all-to-all split sizes (sized once)
    int64_t sent = 0, received = 0; // all-to-all payload to and from other ranks (gb_group_traffic)
    int (*abandon)(void *) = nullptr; // opts.abandon
    void *abandon_arg = nullptr;
    c10::intrusive_ptr<c10d::Work> stuck; // an abandoned call's collective (gbt_group_close)
#ifdef USE_C10D_NCCL
    c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl; // device tensors (opts.nccl)
#endif
};

namespace {

// How often a waiting call asks opts.abandon.
constexpr int64_t kAbandonPollMs = 100;

// A call given up because opts.abandon said the group is gone.
struct abandoned_error : std::runtime_error {
    abandoned_error() : std::runtime_error("given up: another member of the group failed") {}
};

// c10d keeps a Gloo group's contexts protected: reached through a derived class's member pointer.
struct GlooContexts : c10d::ProcessGroupGloo {
    static std::vector<std::shared_ptr<::gloo::Context>> &of(c10d::ProcessGroupGloo &pg)
    {
        return pg.*(&GlooContexts::contexts_);
    }
};

// Abandoned groups, never freed (their Gloo threads may still wait in a collective): reachable,
// so that leak checkers do not count them.
std::mutex abandoned_mutex;
std::vector<gb_group *> abandoned_groups;

bool contains(const std::string &haystack, const char *needle)
{
    return haystack.find(needle) != std::string::npos;
}

// The error code for a c10d or Gloo failure, from its message (c10d has a TimeoutError class,
// but Gloo's transport and the work's own timeout raise plain errors).
int code_of(const std::string &msg)
{
    std::string m = msg;
    std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
    if (contains(m, "timed out") || contains(m, "timeout"))
        return GB_ETIMEOUT;
    if (contains(m, "closed by peer") || contains(m, "reset by peer") ||
        contains(m, "connection closed") || contains(m, "broken pipe") ||
        contains(m, "connection refused") || contains(m, "socket closed"))
        return GB_ECLOSED;
    return GB_ETORCH;
}

// Runs body (which waits for its work), turning an exception into GB_ETIMEOUT, GB_ECLOSED or
// GB_ETORCH with "what (rank r of n): message"; a failure marks the group failed.
template <class F> int group_call(gb_group *g, const char *what, gb_error *err, F &&body)
{
    if (g->failed)
        return gb_error_set(err, GB_ECLOSED, "%s (rank %d of %d): the group failed in an earlier "
                            "call; close it", what, g->rank, g->size);
    std::string msg;
    try {
        body();
        return 0;
    } catch (const abandoned_error &e) {
        g->failed = true;
        return gb_error_set(err, GB_ECLOSED, "%s (rank %d of %d): %s", what, g->rank, g->size,
                            e.what());
    } catch (const c10::Error &e) {
        msg = e.what_without_backtrace();
    } catch (const std::bad_alloc &) {
        g->failed = true;
        return gb_error_set(err, GB_ENOMEM, "%s (rank %d of %d): out of memory", what, g->rank,
                            g->size);
    } catch (const std::exception &e) {
        msg = e.what();
    }
    g->failed = true;
    return gb_error_set(err, code_of(msg), "%s (rank %d of %d): %s", what, g->rank, g->size,
                        msg.c_str());
}

c10d::AllreduceOptions allreduce_opts(const gb_group *g, gb_group_op op)
{
    c10d::AllreduceOptions ao;
    ao.reduceOp = op == GB_GROUP_SUM   ? c10d::ReduceOp::SUM
                  : op == GB_GROUP_MIN ? c10d::ReduceOp::MIN
                                       : c10d::ReduceOp::MAX;
    ao.timeout = g->timeout;
    return ao;
}

// Gives the call up (opts.abandon said so): closes every connection of the group, so that its
// collective, still waiting in a Gloo thread, moves no more bytes, and keeps the work for close.
[[noreturn]] void give_up(gb_group *g, const c10::intrusive_ptr<c10d::Work> &work)
{
    g->stuck = work;
    if (g->pg)
        for (auto &context : GlooContexts::of(*g->pg))
            context->closeConnections();
    throw abandoned_error();
}

// Waits for a call's work: at most the group's timeout, and with opts.abandon in slices, asking
// it between them (the work's timed wait throws "Operation timed out!" at the end of a slice
// while the work is still running, or as it ends: then waiting again returns its own result;
// a work that ended with an error rethrows that error).
void wait_for(gb_group *g, const c10::intrusive_ptr<c10d::Work> &work)
{
    if (!g->abandon) {
        work->wait(g->timeout);
        return;
    }
    const auto end = std::chrono::steady_clock::now() + g->timeout;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            end - std::chrono::steady_clock::now());
        try {
            work->wait(std::min(left, std::chrono::milliseconds(kAbandonPollMs)));
            return;
        } catch (...) {
            if (left.count() <= kAbandonPollMs) // the whole timeout waited
                throw;
        }
        if (work->isCompleted()) { // it ended as the slice did: its own result
            work->wait(g->timeout);
            return;
        }
        if (g->abandon(g->abandon_arg))
            give_up(g, work);
    }
}

// With opts.abandon, before Gloo's rendezvous (which waits for every rank up to the timeout,
// unasked): each rank says it is here under "present/<rank>" and waits, asking opts.abandon,
// until every rank is. A rank that waits for a generation the caller gave up on stops at once.
void wait_present(gb_group *g)
{
    g->store->set("present/" + std::to_string(g->rank), std::vector<uint8_t>{1});
    std::vector<std::string> keys;
    for (int r = 0; r < g->size; r++)
        keys.push_back("present/" + std::to_string(r));
    const auto end = std::chrono::steady_clock::now() + g->timeout;
    while (!g->store->check(keys)) {
        if (g->abandon(g->abandon_arg))
            throw abandoned_error();
        if (std::chrono::steady_clock::now() >= end)
            throw std::runtime_error("timed out waiting for the other ranks to join");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

torch::Tensor bytes_view(const void *p, size_t bytes)
{
    static uint8_t none; // from_blob wants a pointer even for zero bytes
    return torch::from_blob(p ? const_cast<void *>(p) : &none, {(int64_t)bytes}, torch::kUInt8);
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
// An abandoned call's collective may wait out the whole timeout: its group is not destroyed but
// left to its threads (its connections closed, it touches no caller buffer again), never freed.
extern "C" void gbt_group_close(gb_group *g)
{
    if (!g)
        return;
    if (g->stuck && !g->stuck->isCompleted()) {
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
        std::vector<at::Tensor> ts{torch::from_blob(buf, {count}, t)};
        wait_for(g, g->pg->allreduce(ts, allreduce_opts(g, op)));
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
        std::vector<at::Tensor> input{bytes_view(in, bytes)};
        std::vector<std::vector<at::Tensor>> output(1);
        for (int r = 0; r < g->size; r++)
            output[0].push_back(bytes_view((char *)out + (size_t)r * bytes, bytes));
        c10d::AllgatherOptions ao;
        ao.timeout = g->timeout;
        wait_for(g, g->pg->allgather(output, input, ao));
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
    return group_call(g, "alltoall", err, [&] {
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
