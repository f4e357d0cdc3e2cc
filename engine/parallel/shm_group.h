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
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

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
                                          int rank, int size, std::chrono::milliseconds timeout);
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

    static constexpr int64_t kSlotFloats = 1 << 18;  // 1 MiB a member per buffer
    static constexpr int kMaxMembers = 64;
    struct Header;  // the segment's first bytes (shm_group.cpp)

  private:
    ShmGroup(void* base, size_t bytes, int rank, int size, std::chrono::milliseconds timeout);
    float* slot(int buffer, int member) const;
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
};

}  // namespace tessera
