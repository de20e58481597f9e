// workers/torch/group_wait.hpp: the process group's state (shared by group.cpp, its calls, and
// group_wait.cpp, their waits), and how a call waits for c10d's work and ends early.
// defines: struct gb_group; gbt_wait::works, abandoned_error, code_of, group_call, wait_for,
//          wait_present
#pragma once

#include "workers/torch/bridge.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

struct gb_group {
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
    int rank = 0, size = 0;
    std::chrono::milliseconds timeout{0};
    bool failed = false; // a call failed: the group refuses every later call
    std::vector<uint8_t> small_out, small_in; // a small all-reduce's all-to-all (grow-only)
    std::vector<int64_t> split_send, split_recv; // all-to-all split sizes (sized once)
    std::vector<int64_t> down_send, down_recv, up_send, up_recv; // alltoall_apart's (sized once)
    std::vector<uint8_t> stage_in, stage_out; // opts.abandon: the calls' buffers (grow-only)
    int64_t sent = 0, received = 0; // all-to-all payload to and from other ranks (gb_group_traffic)
    int (*abandon)(void *) = nullptr; // opts.abandon
    void *abandon_arg = nullptr;
    std::vector<c10::intrusive_ptr<c10d::Work>> stuck; // left running by a call (gbt_group_close)
#ifdef USE_C10D_NCCL
    c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl; // device tensors (opts.nccl)
#endif
};

namespace gbt_wait {

using works = std::vector<c10::intrusive_ptr<c10d::Work>>;

// A call given up because opts.abandon said the group is gone.
struct abandoned_error : std::runtime_error {
    abandoned_error() : std::runtime_error("given up: another member of the group failed") {}
};

// The error code for a c10d or Gloo failure, from its message (c10d has a TimeoutError class,
// but Gloo's transport and the work's own timeout raise plain errors).
int code_of(const std::string &msg);

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

// Waits for a call's works, all within the group's timeout, and with opts.abandon asks it every
// kAbandonPollMs: a call it says is gone ends at once (abandoned_error), and one whose work
// failed ends what it left running (group_wait.cpp) before that error goes on.
void wait_for(gb_group *g, const works &ws);
void wait_for(gb_group *g, const c10::intrusive_ptr<c10d::Work> &work);

// With opts.abandon, before Gloo's rendezvous: every rank says it is here and waits for the
// others, asking opts.abandon (group_wait.cpp).
void wait_present(gb_group *g);

} // namespace gbt_wait
