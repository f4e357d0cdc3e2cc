// One communicator interface for every backend: Gloo for CPU ranks, NCCL for GPUs (CUDA issue).
// Collectives are blocking from the caller's point of view and are issued in the same order on
// every member of a group. Each call carries a sequence number; a collective that does not
// complete within the timeout raises an Error naming the rank, the group, the collective and its
// sequence number (the watchdog), after which the communicator is unusable.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/parallel/mesh.h"

namespace tessera {

enum class ReduceOp { sum, max };

// A point-to-point operation in flight; wait() blocks until it completed (or throws the
// watchdog's Error). The buffer must stay alive until then. Destroying an unwaited request waits.
class CommRequest {
  public:
    virtual ~CommRequest() = default;
    virtual void wait() = 0;
};

class Communicator {
  public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;  // rank within this group
    virtual int size() const = 0;
    virtual const std::string& name() const = 0;  // e.g. "dp[0,2]" — for messages

    // data (n) := reduction over the group of data (n)
    virtual void all_reduce(float* data, int64_t n, ReduceOp op = ReduceOp::sum) = 0;
    // out (n) := sum over the group of in[rank * n .. (rank + 1) * n); in is (size * n)
    virtual void reduce_scatter(const float* in, float* out, int64_t n) = 0;
    // out (size * n) := concatenation of every member's in (n), in group-rank order
    virtual void all_gather(const float* in, float* out, int64_t n) = 0;
    virtual void broadcast(float* data, int64_t n, int root) = 0;
    // point to point with a group-rank peer; tags separate concurrent streams
    virtual void send(const float* data, int64_t n, int peer, int tag) = 0;
    virtual void recv(float* data, int64_t n, int peer, int tag) = 0;
    // Non-blocking variants (pipeline schedules post sends and keep going).
    virtual std::unique_ptr<CommRequest> isend(const float* data, int64_t n, int peer, int tag) = 0;
    virtual std::unique_ptr<CommRequest> irecv(float* data, int64_t n, int peer, int tag) = 0;
    virtual void barrier() = 0;
    virtual int64_t sequence() const = 0;  // collectives issued so far
    // How the collectives (a pipeline group: its messages) travel, for the start-up banner and
    // tests: "shared memory", "gloo tcp", "nccl", "meta".
    virtual std::string transport() const = 0;

    // A sum all-reduce that runs in the background: null where the backend has none (the caller
    // then reduces on its comm thread). NCCL: ordered after the work queued so far on the
    // compute stream, on the communicator's own stream, with no host wait; wait() makes the
    // compute stream wait for it. data must stay untouched until then.
    // `staging`, where given: a symmetric buffer (see symmetric_buffer) as large as data, for
    // a backend that can exchange the slices on copy engines and then add them with one small
    // kernel instead of reducing with SMs for the whole transfer; n is then a multiple of size.
    virtual std::unique_ptr<CommRequest> iall_reduce(float* data, int64_t n,
                                                     float* staging = nullptr) {
        (void)data, (void)n, (void)staging;
        return nullptr;
    }
    // The same for the two halves of an all-reduce, in place on data (size * n):
    // ireduce_scatter leaves the sum of every member's slice `rank` in data[rank * n, +n) (the
    // other slices are left undefined); iall_gather copies every member's slice into the others.
    virtual std::unique_ptr<CommRequest> ireduce_scatter(float* data, int64_t n,
                                                         float* staging = nullptr) {
        (void)data, (void)n, (void)staging;
        return nullptr;
    }
    virtual std::unique_ptr<CommRequest> iall_gather(void* data, int64_t n, DType t) {
        (void)data, (void)n, (void)t;
        return nullptr;
    }
    // A device buffer of `bytes` that every member allocates in the same call (collective) and
    // registers symmetrically, so that all-gathers and all-to-alls within such buffers can run
    // on the copy engines instead of SMs (NCCL windows); null where the backend has no such
    // thing. Lives as long as the communicator.
    virtual void* symmetric_buffer(size_t bytes) {
        (void)bytes;
        return nullptr;
    }

    // Typed variants for activations in other dtypes (bf16 on GPUs). The defaults serve f32;
    // backends that move other dtypes (NCCL) override them.
    virtual void all_reduce(void* data, int64_t n, DType t, ReduceOp op = ReduceOp::sum) {
        TS_CHECK(t == DType::f32, name(), ": this backend reduces only f32, not ", dtype_name(t));
        all_reduce(static_cast<float*>(data), n, op);
    }
    virtual std::unique_ptr<CommRequest> isend(const void* data, int64_t n, DType t, int peer,
                                               int tag) {
        TS_CHECK(t == DType::f32, name(), ": this backend sends only f32, not ", dtype_name(t));
        return isend(static_cast<const float*>(data), n, peer, tag);
    }
    virtual std::unique_ptr<CommRequest> irecv(void* data, int64_t n, DType t, int peer, int tag) {
        TS_CHECK(t == DType::f32, name(), ": this backend receives only f32, not ", dtype_name(t));
        return irecv(static_cast<float*>(data), n, peer, tag);
    }
};

// How this process learned its place in the job: from `tessera train`'s launcher, or from
// torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), mpirun
// (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK) or srun (SLURM_PROCID/NTASKS/LOCALID).
struct RankEnv {
    int rank = 0, world_size = 1, local_rank = 0;
    std::string master_addr = "127.0.0.1";
    int master_port = 0;
    std::string source;  // "tessera" | "torchrun" | "mpirun" | "srun" | "single"
};
RankEnv rank_env_from_environment();

// The communicators one rank needs, built from the mesh; null where the group has one member.
struct ProcessGroups {
    MeshShape mesh;
    MeshCoord coord;
    int rank = 0;
    std::unique_ptr<Communicator> world, dp, tp, pp, embedding;
    // A second DP communicator for the gradient-bucket thread (collectives on one communicator
    // are never issued from two threads).
    std::unique_ptr<Communicator> dp_async;
};

struct CommOptions {
    std::string backend = "gloo";  // gloo | nccl
    std::chrono::milliseconds timeout{60000};
};

#ifdef TESSERA_HAVE_CUDA
class TcpStore;
// NCCL groups (engine/parallel/comm_nccl.cpp), called by comm_create_groups with the rendezvous
// store: group rank 0 publishes each group's ncclUniqueId there.
ProcessGroups comm_create_groups_nccl(const RankEnv& env, const MeshShape& mesh,
                                      const CommOptions& o, TcpStore& store);
#endif

ProcessGroups comm_create_groups(const RankEnv& env, const MeshShape& mesh, const CommOptions& o);

// TESSERA_COMM_TRACE set: the GPU communicators print each blocking collective's start and
// duration, and the rank loop its step milestones, on one clock (trace_ms: host steady clock).
bool comm_trace();
double trace_ms();

}  // namespace tessera
