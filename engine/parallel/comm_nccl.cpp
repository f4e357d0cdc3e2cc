// NCCL communicators for GPU ranks (compiled only in CUDA builds).
//
// Two modes. Groups used by the main thread (world, tp, pp, embedding) are stream-ordered with
// the rank's compute stream: each operation's NCCL stream first waits for the work queued so far
// on the compute stream, and the compute stream then waits for the operation — the host does not
// block (host buffers are staged through the device and synchronised). The DP group used by the
// gradient thread (dp_async) blocks its caller until the operation completed: that thread already
// waited for the gradients, and the compute stream must not stall behind a reduction. DP's
// gradient all-reduces skip that thread: iall_reduce queues them on the communicator's stream
// behind the layer's backward, and the compute stream waits for them only when the gradients
// are finished (host threads that wait for events and launch NCCL kernels starve behind the main
// thread's launches: the reductions then ran only after the whole backward).
//
// Pipeline sends and receives use two NCCL communicators per pp group, one per direction
// (activations forward, gradients backward; the direction is bit 24 of the tag), so two stages
// sending to each other never queue behind one another on one stream.
//
// The watchdog: every host wait polls with the timeout; past it the communicator is aborted
// (ncclCommAbort) and an Error names the rank, the collective, its sequence number and the group.
#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/cuda_handles.cuh"
#include "engine/kernels/cuda/device.cuh"
#include "engine/kernels/cuda/elementwise.cuh"
#include "engine/parallel/comm.h"
#include "engine/parallel/nccl_handles.h"
#include "engine/parallel/tcp_store.h"

#define NCCL_CHECK(stmt)                                                                     \
    do {                                                                                     \
        ncclResult_t r_ = (stmt);                                                            \
        if (r_ != ncclSuccess)                                                               \
            ::tessera::cuda_fail("NCCL", #stmt, __FILE__, __LINE__, ncclGetErrorString(r_)); \
    } while (0)

namespace tessera {

namespace {

ncclDataType_t nccl_type(DType t) {
    switch (t) {
        case DType::f32:
            return ncclFloat32;
        case DType::bf16:
            return ncclBfloat16;
        case DType::i32:
            return ncclInt32;
        default:
            throw Error(str_cat("NCCL cannot move ", dtype_name(t)));
    }
}

bool is_host_pointer(const void* p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return true;
    }
    return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost;
}

class NcclCommunicator;

class NcclRequest final : public CommRequest {
  public:
    explicit NcclRequest(CudaEvent done) : done_(std::move(done)) {}
    // the compute stream waits for the transfer (a receive's data, a send's buffer release)
    void wait() override {
        if (done_) CUDA_CHECK(cudaStreamWaitEvent(cuda_stream(), done_.get(), 0));
        done_.reset();
    }
    ~NcclRequest() override {
        try {
            wait();
        } catch (...) {
        }
    }

  private:
    CudaEvent done_;
};

class NcclCommunicator final : public Communicator {
  public:
    NcclCommunicator(std::vector<NcclComm> comms, std::string name, int rank, int size,
                     bool blocking, std::chrono::milliseconds timeout, std::string who)
        : name_(std::move(name)),
          rank_(rank),
          size_(size),
          blocking_(blocking),
          timeout_(timeout),
          who_(std::move(who)) {
        // communication streams at the device's highest priority: a reduction's blocks are
        // scheduled ahead of queued compute blocks instead of waiting behind a whole GEMM
        int least = 0, greatest = 0;
        CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        for (size_t i = 0; i < comms.size(); ++i)
            streams_.push_back(cuda_stream_create(cudaStreamNonBlocking, greatest));
        stage_ = cuda_malloc_device(stage_bytes_);
        comms_ = std::move(comms);
    }
    // The members' destructors, in reverse order of declaration: windows (deregistered on the
    // live communicator, then freed), communicators, streams, the staging buffer.
    ~NcclCommunicator() override = default;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    const std::string& name() const override { return name_; }
    int64_t sequence() const override { return seq_; }
    std::string transport() const override { return "nccl"; }

    std::unique_ptr<CommRequest> iall_reduce(float* data, int64_t n, float* staging) override {
        return background("all_reduce", data, [&](cudaStream_t s) {
            if (!staging) {
                NCCL_CHECK(ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm(), s));
                return;
            }
            TS_CHECK(n % size_ == 0, name_, ": a staged all-reduce needs a multiple of ", size_,
                     " elements");
            const int64_t k = n / size_;
            reduce_scatter_on(s, data, k, staging);
            NCCL_CHECK(ncclAllGather(data + rank_ * k, data, k, ncclFloat, comm(), s));
        });
    }
    std::unique_ptr<CommRequest> ireduce_scatter(float* data, int64_t n, float* staging) override {
        return background("reduce_scatter", data,
                          [&](cudaStream_t s) { reduce_scatter_on(s, data, n, staging); });
    }
    // ncclMemAlloc (CUDA VMM memory) registered as a symmetric window; null (and a note) when
    // the driver or NCCL cannot: the caller then uses ordinary buffers.
    void* symmetric_buffer(size_t bytes) override {
#if !TS_NCCL_WINDOWS
        (void)bytes;
        return nullptr;
#else
        auto [r, win] = NcclWindow::create(comm(), bytes);
        if (r != ncclSuccess) {
            std::fprintf(stderr,
                         "%s: no symmetric NCCL window on %s (%s); reducing and gathering through "
                         "ordinary buffers\n",
                         who_.c_str(), name_.c_str(), ncclGetErrorString(r));
            return nullptr;
        }
        return windows_.emplace_back(std::move(win)).data();
#endif
    }
    std::unique_ptr<CommRequest> iall_gather(void* data, int64_t n, DType t) override {
        return background("all_gather", data, [&](cudaStream_t s) {
            const char* mine = static_cast<const char*>(data) + rank_ * n * dtype_size(t);
            NCCL_CHECK(ncclAllGather(mine, data, n, nccl_type(t), comm(), s));
        });
    }

    void all_reduce(float* data, int64_t n, ReduceOp op) override {
        all_reduce(static_cast<void*>(data), n, DType::f32, op);
    }
    void all_reduce(void* data, int64_t n, DType t, ReduceOp op) override {
        collective(
            "all_reduce", data, data, n * dtype_size(t), n * dtype_size(t),
            [&](const void* in, void* out, cudaStream_t s) {
                NCCL_CHECK(ncclAllReduce(in, out, n, nccl_type(t),
                                         op == ReduceOp::sum ? ncclSum : ncclMax, comm(), s));
            });
    }
    void reduce_scatter(const float* in, float* out, int64_t n) override {
        collective("reduce_scatter", in, out, n * size_ * 4, n * 4,
                   [&](const void* i, void* o, cudaStream_t s) {
                       NCCL_CHECK(ncclReduceScatter(i, o, n, ncclFloat32, ncclSum, comm(), s));
                   });
    }
    void all_gather(const float* in, float* out, int64_t n) override {
        collective("all_gather", in, out, n * 4, n * size_ * 4,
                   [&](const void* i, void* o, cudaStream_t s) {
                       NCCL_CHECK(ncclAllGather(i, o, n, ncclFloat32, comm(), s));
                   });
    }
    void broadcast(float* data, int64_t n, int root) override {
        collective("broadcast", data, data, n * 4, n * 4,
                   [&](const void* i, void* o, cudaStream_t s) {
                       NCCL_CHECK(ncclBroadcast(i, o, n, ncclFloat32, root, comm(), s));
                   });
    }
    void barrier() override {
        float x = 0;
        all_reduce(&x, 1, ReduceOp::sum);
    }
    void send(const float* data, int64_t n, int peer, int tag) override {
        isend(static_cast<const void*>(data), n, DType::f32, peer, tag)->wait();
        wait_stream(streams_[dir(tag)].get(), "send");
    }
    void recv(float* data, int64_t n, int peer, int tag) override {
        irecv(static_cast<void*>(data), n, DType::f32, peer, tag)->wait();
        wait_stream(cuda_stream(), "recv");
    }
    std::unique_ptr<CommRequest> isend(const float* data, int64_t n, int peer, int tag) override {
        return isend(static_cast<const void*>(data), n, DType::f32, peer, tag);
    }
    std::unique_ptr<CommRequest> irecv(float* data, int64_t n, int peer, int tag) override {
        return irecv(static_cast<void*>(data), n, DType::f32, peer, tag);
    }
    std::unique_ptr<CommRequest> isend(const void* data, int64_t n, DType t, int peer,
                                       int tag) override {
        return p2p(true, const_cast<void*>(data), n, t, peer, tag);
    }
    std::unique_ptr<CommRequest> irecv(void* data, int64_t n, DType t, int peer, int tag) override {
        return p2p(false, data, n, t, peer, tag);
    }

  private:
    int dir(int tag) const {
        return comms_.size() > 1 ? ((tag >> 24) & 1) : 0;
    }
    ncclComm_t comm(int i = 0) const {
        return comms_[size_t(i)].get();
    }

    // In place: data[rank * n, +n) := the sum of every member's slice `rank`. With a staging
    // buffer the slices are exchanged by an all-to-all (on the copy engines within symmetric
    // windows under the zero-CTA policy) and added on s: the own slice, then the others in
    // group-rank order.
    void reduce_scatter_on(cudaStream_t s, float* data, int64_t n, float* staging) {
        if (!staging) {
            NCCL_CHECK(ncclReduceScatter(data, data + rank_ * n, n, ncclFloat, ncclSum, comm(), s));
            return;
        }
        NCCL_CHECK(ncclAlltoAll(data, staging, n, ncclFloat, comm(), s));
        for (int r = 0; r < size_; ++r)
            if (r != rank_) accumulate_cuda(data + rank_ * n, staging + r * n, n, s);
    }

    // s waits for the work queued so far on the compute stream.
    static void after_compute(cudaStream_t s) {
        CudaEvent ready = cuda_event_create();
        CUDA_CHECK(cudaEventRecord(ready.get(), cuda_stream()));
        CUDA_CHECK(cudaStreamWaitEvent(s, ready.get(), 0));
    }
    // A request done with the work queued so far on s (its wait() makes the compute stream wait).
    static std::unique_ptr<CommRequest> request_after(cudaStream_t s) {
        CudaEvent done = cuda_event_create();
        CUDA_CHECK(cudaEventRecord(done.get(), s));
        return std::make_unique<NcclRequest>(std::move(done));
    }

    std::unique_ptr<CommRequest> p2p(bool send, void* data, int64_t n, DType t, int peer, int tag) {
        TS_CHECK(!is_host_pointer(data), name_, ": point-to-point buffers must be on the GPU");
        int d = dir(tag);
        cudaStream_t s = streams_[d].get();
        after_compute(s);
        if (send)
            NCCL_CHECK(ncclSend(data, n, nccl_type(t), peer, comm(d), s));
        else
            NCCL_CHECK(ncclRecv(data, n, nccl_type(t), peer, comm(d), s));
        return request_after(s);
    }

    // A collective queued on the communicator's stream behind the compute stream's work.
    template <typename F>
    std::unique_ptr<CommRequest> background(const char* what, const void* data, F&& op) {
        TS_CHECK(!is_host_pointer(data), name_, ": background collectives need GPU buffers");
        ++seq_;
        last_op_ = what;
        cudaStream_t s = streams_[0].get();
        after_compute(s);
        op(s);
        return request_after(s);
    }

    // Runs one collective; host buffers go through the staging buffer.
    template <typename F>
    void collective(const char* what, const void* in, void* out, int64_t in_bytes,
                    int64_t out_bytes, F&& op) {
        ++seq_;
        last_op_ = what;
        cudaStream_t s = streams_[0].get();
        const bool host = is_host_pointer(in) || is_host_pointer(out);
        if (!blocking_ || host) after_compute(s);
        if (host) {
            int64_t need = std::max(in_bytes, out_bytes);
            if (need > stage_bytes_) {
                stage_.reset();  // cudaFree synchronises: no queued copy still reads it
                stage_bytes_ = need;
                stage_ = cuda_malloc_device(stage_bytes_);
            }
            void* stage = stage_.get();
            CUDA_CHECK(cudaMemcpyAsync(stage, in, in_bytes, cudaMemcpyHostToDevice, s));
            op(stage, stage, s);
            CUDA_CHECK(cudaMemcpyAsync(out, stage, out_bytes, cudaMemcpyDeviceToHost, s));
            wait_stream(s, what);
            return;
        }
        const double t0 = comm_trace() ? trace_ms() : 0;
        op(in, out, s);
        if (blocking_) {
            wait_stream(s, what);
            if (comm_trace())
                std::fprintf(stderr, "[comm] %s %s #%lld %lld bytes at %.3f ms took %.3f ms\n",
                             who_.c_str(), what, (long long)seq_, (long long)in_bytes, t0,
                             trace_ms() - t0);
        } else {
            CudaEvent done = cuda_event_create();
            CUDA_CHECK(cudaEventRecord(done.get(), s));
            CUDA_CHECK(cudaStreamWaitEvent(cuda_stream(), done.get(), 0));
        }
    }

    // Host wait with the watchdog.
    void wait_stream(cudaStream_t s, const char* what) {
        auto t0 = std::chrono::steady_clock::now();
        for (;;) {
            cudaError_t e = cudaStreamQuery(s);
            if (e == cudaSuccess) return;
            if (e != cudaErrorNotReady) CUDA_CHECK(e);
            ncclResult_t async = ncclSuccess;
            for (const NcclComm& c : comms_) {
                ncclCommGetAsyncError(c.get(), &async);
                if (async != ncclSuccess && async != ncclInProgress) break;
            }
            bool late = std::chrono::steady_clock::now() - t0 > timeout_;
            if (late || (async != ncclSuccess && async != ncclInProgress)) {
#if TS_NCCL_WINDOWS
                for (NcclWindow& w : windows_) w.forget_comm();
#endif
                for (NcclComm& c : comms_) nccl_comm_abort(c);
                comms_.clear();
                throw Error(
                    str_cat(who_, ": ", what, " #", seq_, " on group ", name_,
                            late ? str_cat(" did not complete within ", timeout_.count(), " ms")
                                 : str_cat(" failed: ", ncclGetErrorString(async))));
            }
            // spin through short waits (a step's small collectives), sleep through long ones
            if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(2))
                std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    // Handles, destroyed in reverse order of declaration (see ~NcclCommunicator).
    DeviceBuffer<> stage_;  // host buffers of collectives go through it
    int64_t stage_bytes_ = 1 << 20;
    std::vector<CudaStream> streams_;
    std::vector<NcclComm> comms_;
#if TS_NCCL_WINDOWS
    std::vector<NcclWindow> windows_;
#endif
    std::string name_;
    int rank_, size_;
    bool blocking_;
    std::chrono::milliseconds timeout_;
    std::string who_;
    int64_t seq_ = 0;
    const char* last_op_ = "";
};

}  // namespace

ProcessGroups comm_create_groups_nccl(const RankEnv& env, const MeshShape& mesh,
                                      const CommOptions& o, TcpStore& store) {
    ProcessGroups g;
    g.mesh = mesh;
    g.rank = env.rank;
    g.coord = mesh_coord(mesh, env.rank);
    std::string who = str_cat("rank ", env.rank, " (", mesh_coord_str(g.coord), ")");
    struct Slot {
        const char* name;
        GroupKind kind;
        std::unique_ptr<Communicator>* out;
        int comms;
        bool blocking;
    };
    Slot slots[] = {{"world", GroupKind::world, &g.world, 1, false},
                    {"dp", GroupKind::dp, &g.dp, 1, false},
                    {"tp", GroupKind::tp, &g.tp, 1, false},
                    {"pp", GroupKind::pp, &g.pp, 2, false},
                    {"embedding", GroupKind::embedding, &g.embedding, 1, false},
                    {"dp_async", GroupKind::dp, &g.dp_async, 1, true}};
    for (const Slot& s : slots) {
        std::vector<int> members = mesh_group(mesh, env.rank, s.kind);
        if (members.size() <= 1 ||
            std::find(members.begin(), members.end(), env.rank) == members.end())
            continue;
        std::string name = str_cat(s.name, "[");
        for (size_t i = 0; i < members.size(); ++i) name += str_cat(i ? "," : "", members[i]);
        name += "]";
        int grank = int(std::find(members.begin(), members.end(), env.rank) - members.begin());
        std::vector<NcclComm> comms;
        // a failure part-way (a second communicator, the store): the ones made are aborted, not
        // destroyed (ncclCommDestroy could wait for peers that are failing too)
        struct AbortUnlessHandedOver {
            std::vector<NcclComm>& comms;
            ~AbortUnlessHandedOver() {
                for (NcclComm& c : comms) nccl_comm_abort(c);
            }
        } abort_on_error{comms};
        for (int c = 0; c < s.comms; ++c) {
            std::string key = str_cat("nccl/", name, "/", c);
            ncclUniqueId id;
            if (grank == 0) {
                NCCL_CHECK(ncclGetUniqueId(&id));
                store.set(key, std::vector<char>((char*)&id, (char*)&id + sizeof id));
            } else {
                std::vector<char> v = store.get(key);
                TS_CHECK(v.size() == sizeof id, "bad NCCL id for ", name);
                std::memcpy(&id, v.data(), sizeof id);
            }
            ncclComm_t comm;
            ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
            // the background gradient/parameter communicator: no SMs where NCCL can avoid them
            // (all-gathers within a symmetric window run on the copy engines: ZeRO-1/2's
            // parameter gathers then cost the next forward nothing)
#if TS_NCCL_WINDOWS
            if (s.out == &g.dp_async) cfg.CTAPolicy = NCCL_CTA_POLICY_ZERO;
#endif
            NCCL_CHECK(ncclCommInitRankConfig(&comm, (int)members.size(), id, grank, &cfg));
            comms.emplace_back(comm);
        }
        *s.out = std::make_unique<NcclCommunicator>(
            std::move(comms), name, grank, (int)members.size(), s.blocking, o.timeout, who);
    }
    return g;
}

}  // namespace tessera
#endif
