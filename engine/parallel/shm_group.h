// Collectives through shared memory for a group whose members all run on this host (CPU ranks
// started by one launcher, or any local job): the Gloo communicator's fast path. Gloo moves every
// byte through a loopback TCP socket and its I/O thread, which costs a core's time a host with a
// core per rank does not have (docs/benchmarks.md, "CPU step time"); here each member copies its
// contribution into its slot of a POSIX shared-memory segment, and the members reduce a share of
// the elements each, in rank order, so every member gets the same bits (for two members the same
// as Gloo's: one addition, which commutes). Point-to-point messages stay on Gloo.
//
// Phases: every collective is one or more phases (one per chunk of the slots' size); a member
// writes its slot of buffer `phase % 2`, publishes `arrive = phase`, waits for every member's
// arrival, then reads. Reusing a buffer two phases later is safe because a member arrives at a
// phase only after it finished reading the one before. An all-reduce adds a second wait
// (`done`) before members read the shared result. Waits spin briefly, then yield, then sleep,
// and give up after the communicator's timeout (the caller turns that into the watchdog's error).
//
// A pipeline's group carries point-to-point messages instead (join with ring_bytes > 0; no
// collective buffers then): a ring of ring_bytes for every ordered pair of members, which only
// the sender advances its head of and only the receiver its tail. A send copies the message
// (tag, length, payload) into the ring when it has room, else aside until it has: sends are
// eager, as Gloo's are here. The receiver takes the messages in the order they were sent, each
// into the earliest posted receive of its tag or, where none is posted yet, aside until one is;
// so messages of one tag arrive in order and tags do not block each other. Waiting on a send or
// a receive also drains this member's incoming rings and pushes its own messages set aside, so
// two members sending to each other never wait on one another. Gloo's loopback socket cost
// 0.2-1.3 ms a send of 32-512 KB on the 2-core machine, in the sender's own time.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/parallel/comm.h"

namespace gloo::rendezvous {
class Store;
}

namespace tessera {

class ShmGroup {
  public:
    // Collective over the group's members (each calls it with the same key): member 0 creates
    // the segment and names it in `store` under key, the others map it; every member reports
    // whether it could, and the group is used only if all could (else null on every member:
    // the caller keeps Gloo). TESSERA_SHM=0 turns it off.
    static std::unique_ptr<ShmGroup> join(gloo::rendezvous::Store& store, const std::string& key,
                                          int rank, int size, std::chrono::milliseconds timeout,
                                          int64_t ring_bytes = 0);
    ~ShmGroup();
    ShmGroup(const ShmGroup&) = delete;
    ShmGroup& operator=(const ShmGroup&) = delete;

    // The Communicator's semantics (comm.h). A member that does not arrive within the timeout
    // makes the call throw std::runtime_error naming it.
    void all_reduce(float* data, int64_t n, ReduceOp op);
    void reduce_scatter(const float* in, float* out, int64_t n);
    void all_gather(const float* in, float* out, int64_t n);
    void broadcast(float* data, int64_t n, int root);
    void barrier();
    // Whether the group has the collectives' buffers (not a point-to-point group).
    bool collectives() const { return ring_bytes_ == 0; }

    // Point to point (a group joined with rings). Whether a message of `bytes` travels through
    // the rings: both sides decide by its length alone, and the caller moves longer ones
    // otherwise.
    bool p2p_fits(int64_t bytes) const;
    // Sends a copy of data (now or, where the ring is full, later); returns the message's
    // number for p2p_wait_sent.
    uint64_t p2p_send(int peer, uint64_t tag, const void* data, int64_t bytes);
    // Until the message numbered `ticket` to `peer` is in the ring.
    void p2p_wait_sent(int peer, uint64_t ticket);
    // Posts a receive into data (bytes long); returns its number for p2p_wait_recv, which waits
    // until it has been filled (a message of another length fails it).
    uint64_t p2p_post_recv(int peer, uint64_t tag, void* data, int64_t bytes);
    void p2p_wait_recv(uint64_t id);

    static constexpr int64_t kSlotFloats = 1 << 18;  // 1 MiB a member per buffer
    static constexpr int kMaxMembers = 64;
    struct Header;  // the segment's first bytes (shm_group.cpp)
    struct Ring;    // a point-to-point ring's positions (shm_group.cpp)

  private:
    ShmGroup(void* base, size_t bytes, int rank, int size, std::chrono::milliseconds timeout,
             int64_t ring_bytes);
    float* slot(int buffer, int member) const;
    Ring* ring(int from, int to) const;
    char* ring_data(int from, int to) const;
    bool p2p_write(int peer, uint64_t tag, const void* data, int64_t bytes);
    void p2p_flush(int peer);
    void p2p_progress();
    // One step of a wait on `peer`: spins, then yields, then sleeps; throws naming `what` (and
    // the phase, where >= 0) after the timeout, or at once where the peer's process is seen gone.
    struct Backoff {
        int spins = 0;
        std::chrono::steady_clock::time_point deadline{};
    };
    void backoff(Backoff& b, int peer, const char* what, int64_t phase = -1) const;
    float* result(int buffer) const;
    void reduce_slots(float* out, int buffer, int64_t at, int64_t count, ReduceOp op) const;
    uint64_t begin_phase();
    void arrive(uint64_t phase);
    void finish(uint64_t phase);
    void wait_arrived(uint64_t phase) const;
    void wait_finished(uint64_t phase) const;
    void wait_all(bool done, uint64_t phase) const;

    void* base_;
    size_t bytes_;
    int rank_, size_;
    std::chrono::milliseconds timeout_;
    uint64_t phase_ = 0;
    bool watch_ = false;  // every member's process is visible: a dead one is noticed at once

    // point to point
    int64_t ring_bytes_ = 0;
    struct Outgoing {
        uint64_t ticket, tag;
        std::vector<char> data;
    };
    std::vector<std::deque<Outgoing>> set_aside_;  // per peer, waiting for room in its ring
    std::vector<uint64_t> tickets_, written_;      // per peer: messages numbered, in the ring
    struct Posted {
        int peer;
        uint64_t tag;
        void* data;
        int64_t bytes;
    };
    std::map<uint64_t, Posted> posted_;  // by number: the earliest posted first
    struct Arrived {
        int peer;
        uint64_t tag;
        std::vector<char> data;
    };
    std::deque<Arrived> arrived_;  // messages no receive was posted for yet, in arrival order
    std::set<uint64_t> filled_;    // receives filled and not yet waited for
    std::string failed_;           // a message that did not fit its receive (thrown by the wait)
    uint64_t recv_ids_ = 0;
};

}  // namespace tessera
