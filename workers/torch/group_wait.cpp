// workers/torch/group_wait.cpp: how the process group's calls (group.cpp) wait for c10d's work,
// give up and end early.
// defines: gbt_wait::code_of, wait_for, wait_present (group_wait.hpp)
//
// What c10d 1.13's Gloo backend does when a peer fails, and what this file does about it:
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
//   waits in slices of kAbandonPollMs and asks it in between.
// - Giving up (end_pending): a work no c10d thread has started leaves c10d's queue and never
//   runs; one under way has the group's connections closed (Gloo moves no byte through a closed
//   pair: its reads and writes take the pair's lock and check its state) and is kept for close,
//   its thread parked in a wait until Gloo's timeout (Gloo's close wakes none). What such a
//   thread still does to the buffers is its local steps, which group.cpp keeps off the
//   caller's buffers. A call that fails ends its works the same way when it has several
//   (group.cpp's alltoall_apart; else close would wait out their timeout) or opts.abandon (a
//   work that timed out may still run; the caller's buffers are free at return, group.h).
#include "workers/torch/group_wait.hpp"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <thread>

namespace gbt_wait {
namespace {

// How often a waiting call asks opts.abandon.
constexpr int64_t kAbandonPollMs = 100;

// c10d keeps a Gloo group's contexts and work queue protected: reached through a derived
// class's member pointers.
struct GlooInside : c10d::ProcessGroupGloo {
    static std::vector<std::shared_ptr<::gloo::Context>> &contexts(c10d::ProcessGroupGloo &pg)
    {
        return pg.*(&GlooInside::contexts_);
    }
    // Takes work out of the queue if no thread has started it: true if it was there.
    static bool unqueue(c10d::ProcessGroupGloo &pg, const c10d::Work *work)
    {
        std::lock_guard<std::mutex> lock(pg.*(&GlooInside::workMutex_));
        auto &queue = pg.*(&GlooInside::workQueue_);
        for (auto it = queue.begin(); it != queue.end(); ++it)
            if (it->get() == work) {
                queue.erase(it);
                (pg.*(&GlooInside::workConsumeCV_)).notify_all();
                return true;
            }
        return false;
    }
};

bool contains(const std::string &haystack, const char *needle)
{
    return haystack.find(needle) != std::string::npos;
}

} // namespace

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

// Ends what a call leaves behind when it ends early (it gave up, or one of its works failed):
// works no thread has started leave c10d's queue (they never run), and those under way are
// kept for close with every connection of the group closed, so that they move no more bytes.
void end_pending(gb_group *g, const works &ws)
{
    bool running = false;
    for (auto &w : ws)
        if (!w->isCompleted() && !(g->pg && GlooInside::unqueue(*g->pg, w.get()))) {
            g->stuck.push_back(w);
            running = true;
        }
    if (running && g->pg)
        for (auto &context : GlooInside::contexts(*g->pg))
            context->closeConnections();
}

// Waits for one of a call's works until end, and with opts.abandon in slices, asking it between
// them (the work's timed wait throws "Operation timed out!" at the end of a slice while the
// work is still running, or as it ends: then waiting again returns its own result; a work that
// ended with an error rethrows that error). Gives the call up when opts.abandon says so.
void wait_until(gb_group *g, const c10::intrusive_ptr<c10d::Work> &work, const works &ws,
                std::chrono::steady_clock::time_point end)
{
    for (;;) {
        auto left = std::max(std::chrono::milliseconds(1), // 0 would be c10d's "no timeout"
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 end - std::chrono::steady_clock::now()));
        if (!g->abandon) {
            work->wait(left);
            return;
        }
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
        if (g->abandon(g->abandon_arg)) {
            end_pending(g, ws);
            throw abandoned_error();
        }
    }
}

// Waits for a call's works, all within the group's timeout; a call that fails ends what it
// left running first (end_pending: with several works or opts.abandon) and then goes on.
void wait_for(gb_group *g, const works &ws)
{
    const auto end = std::chrono::steady_clock::now() + g->timeout;
    try {
        for (auto &w : ws)
            wait_until(g, w, ws, end);
    } catch (const abandoned_error &) {
        throw;
    } catch (...) {
        if (ws.size() > 1 || g->abandon) // else close joins what still runs (group.h)
            end_pending(g, ws);
        throw;
    }
}

void wait_for(gb_group *g, const c10::intrusive_ptr<c10d::Work> &work)
{
    wait_for(g, works{work});
}

// With opts.abandon, before Gloo's rendezvous (which waits for every rank up to the timeout,
// unasked): each rank says it is here under "present/<rank>" and waits, asking opts.abandon,
// until every rank is. A rank that waits for a generation the caller gave up on stops at once;
// so does one that finds every rank present in a generation already given up (a rank that
// arrived late, as a trainer stopped while the others moved on: the dead ranks' keys stay in
// the store, and Gloo would wait out the timeout for their addresses).
void wait_present(gb_group *g)
{
    g->store->set("present/" + std::to_string(g->rank), std::vector<uint8_t>{1});
    std::vector<std::string> keys;
    for (int r = 0; r < g->size; r++)
        keys.push_back("present/" + std::to_string(r));
    const auto end = std::chrono::steady_clock::now() + g->timeout;
    for (;;) {
        if (g->abandon(g->abandon_arg))
            throw abandoned_error();
        if (g->store->check(keys))
            return;
        if (std::chrono::steady_clock::now() >= end)
            throw std::runtime_error("timed out waiting for the other ranks to join");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

} // namespace gbt_wait
