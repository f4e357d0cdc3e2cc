// The Gloo communicator (CPU ranks) and comm_create_groups(): one gloo context per process group,
// rendezvoused through the TCP store with a PrefixStore per group.
//
// The watchdog is Gloo's own per-operation timeout (CommOptions.timeout, set on the context and on
// every operation's options): any gloo exception becomes a tessera::Error naming the rank, the
// collective, its sequence number and the group. To also name the rank that is missing, every
// collective first posts "<group>/progress/<group rank>" = its sequence number to the store (a
// fire-and-forget write, no round trip); on failure we read the peers' markers and name those
// that never reached this collective.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "engine/core/error.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/shm_group.h"
#include "engine/parallel/tcp_store.h"

namespace tessera {

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Point-to-point slots live far above the ones gloo's collectives use (prefix bytes 0x01..0x08
// in the top byte, or small nextSlot() counters).
uint64_t p2p_slot(int tag) {
    return (uint64_t(0x7a) << 56) | (uint64_t(uint32_t(tag)) << 8);
}

// Sends are eager: the data is copied and the call returns once the send is posted, so two
// stages may send to each other before either receives (Gloo's tcp send otherwise waits for the
// peer's recv). At most this many sends stay in flight before send() waits for the oldest.
constexpr size_t kMaxPendingSends = 64;

struct PendingSend {
    std::vector<float> data;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
    int peer = 0;
    int64_t seq = 0;
};

class GlooCommunicator;

// A posted isend/irecv on the caller's buffer, waited for once: wait() turns a failure into the
// watchdog's Error through the communicator (which must outlive the request); a request not
// waited for is waited for when it goes (a receive writes the caller's buffer until then).
class PostedRequest : public CommRequest {
  public:
    PostedRequest(GlooCommunicator* comm, bool is_send, std::string what)
        : comm_(comm), is_send_(is_send), what_(std::move(what)) {}
    ~PostedRequest() override = default;
    void wait() final;

  protected:
    // Derived destructors call this: finish() must not run once the derived part is gone.
    void wait_in_destructor();
    virtual void finish() = 0;  // until done; throws on failure
    virtual void abandon() {}   // after a failure, before the communicator reports it
    GlooCommunicator* comm_;
    bool is_send_;

  private:
    std::string what_;  // "isend #3 to rank 1 (dp0.tp1.pp0) (tag 2)"
    bool done_ = false;
};

class GlooRequest final : public PostedRequest {
  public:
    GlooRequest(GlooCommunicator* comm, std::unique_ptr<gloo::transport::UnboundBuffer> buf,
                bool is_send, std::string what)
        : PostedRequest(comm, is_send, std::move(what)), buf_(std::move(buf)) {}
    ~GlooRequest() override { wait_in_destructor(); }

  private:
    void finish() override;
    void abandon() override {
        (void)buf_.release();  // leaked on purpose: gloo's I/O thread may still refer to it
    }
    std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
};

// A send or receive through the group's shared-memory rings (ShmGroup's ticket or receive number).
class ShmRequest final : public PostedRequest {
  public:
    ShmRequest(GlooCommunicator* comm, bool is_send, int peer, uint64_t id, std::string what)
        : PostedRequest(comm, is_send, std::move(what)), peer_(peer), id_(id) {}
    ~ShmRequest() override { wait_in_destructor(); }

  private:
    void finish() override;
    int peer_;
    uint64_t id_;
};

class GlooCommunicator final : public Communicator {
  public:
    GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> ctx, std::string name,
                     std::vector<int> members, const MeshShape& mesh, int global_rank,
                     std::chrono::milliseconds timeout, std::unique_ptr<TcpStore> progress,
                     std::unique_ptr<ShmGroup> shm)
        : shm_(std::move(shm)),
          ctx_(std::move(ctx)),
          name_(std::move(name)),
          members_(std::move(members)),
          mesh_(mesh),
          global_rank_(global_rank),
          timeout_(timeout),
          progress_(std::move(progress)) {}

    ~GlooCommunicator() override {
        // Best effort: let posted sends finish; if a peer is gone, leak their buffers rather than
        // free memory gloo's I/O thread may still touch.
        try {
            drain_sends(std::chrono::milliseconds(std::min<int64_t>(timeout_.count(), 2000)));
        } catch (...) {
            for (auto& p : pending_) {
                (void)p.buf.release();
                new std::vector<float>(std::move(p.data));  // intentionally leaked with it
            }
            pending_.clear();
        }
    }

    int rank() const override { return ctx_->rank; }
    int size() const override { return ctx_->size; }
    const std::string& name() const override { return name_; }
    int64_t sequence() const override { return seq_; }
    std::string transport() const override { return shm_ ? "shared memory" : "gloo tcp"; }

    void all_reduce(float* data, int64_t n, ReduceOp op) override {
        run("all_reduce", [&](uint32_t tag) {
            if (shm_collectives()) return shm_->all_reduce(data, n, op);
            gloo::AllreduceOptions opts(ctx_);
            opts.setOutput(data, size_t(n));
            opts.setReduceFunction(op == ReduceOp::sum ? ReduceFn(&gloo::sum<float>)
                                                       : ReduceFn(&gloo::max<float>));
            opts.setTag(tag);
            opts.setTimeout(timeout_);
            gloo::allreduce(opts);
        });
    }

    // Gloo's only reduce-scatter is the old bound-buffer ReduceScatterHalvingDoubling algorithm
    // (no options/timeout API, allocates per call), so this is an all-reduce of a copy followed
    // by taking our chunk: twice the bytes of a true reduce-scatter, same result.
    void reduce_scatter(const float* in, float* out, int64_t n) override {
        if (shm_collectives())
            return run("reduce_scatter", [&](uint32_t) { shm_->reduce_scatter(in, out, n); });
        std::vector<float> tmp(in, in + n * size());
        run("reduce_scatter", [&](uint32_t tag) {
            gloo::AllreduceOptions opts(ctx_);
            opts.setOutput(tmp.data(), tmp.size());
            opts.setReduceFunction(ReduceFn(&gloo::sum<float>));
            opts.setTag(tag);
            opts.setTimeout(timeout_);
            gloo::allreduce(opts);
        });
        std::memcpy(out, tmp.data() + n * rank(), size_t(n) * sizeof(float));
    }

    void all_gather(const float* in, float* out, int64_t n) override {
        run("all_gather", [&](uint32_t tag) {
            if (shm_collectives()) return shm_->all_gather(in, out, n);
            gloo::AllgatherOptions opts(ctx_);
            opts.setInput(const_cast<float*>(in), size_t(n));
            opts.setOutput(out, size_t(n) * size_t(size()));
            opts.setTag(tag);
            opts.setTimeout(timeout_);
            gloo::allgather(opts);
        });
    }

    void broadcast(float* data, int64_t n, int root) override {
        TS_CHECK(root >= 0 && root < size(), "broadcast root ", root, " outside group ", name_);
        run("broadcast", [&](uint32_t tag) {
            if (shm_collectives()) return shm_->broadcast(data, n, root);
            gloo::BroadcastOptions opts(ctx_);
            opts.setOutput(data, size_t(n));
            opts.setRoot(root);
            opts.setTag(tag);
            opts.setTimeout(timeout_);
            gloo::broadcast(opts);
        });
    }

    void barrier() override {
        run("barrier", [&](uint32_t tag) {
            if (shm_) return shm_->barrier();
            gloo::BarrierOptions opts(ctx_);
            opts.setTag(tag);
            opts.setTimeout(timeout_);
            gloo::barrier(opts);
        });
    }

    void send(const float* data, int64_t n, int peer, int tag) override {
        check_usable("send");
        TS_CHECK(peer >= 0 && peer < size() && peer != rank(), "send to group rank ", peer,
                 " on group ", name_, " of size ", size());
        int64_t seq = ++p2p_seq_;
        if (shm_p2p(n)) {  // eager: the message is in the ring, or copied aside until it fits
            try {
                shm_post(true, const_cast<float*>(data), n, peer, tag);
            } catch (const std::exception& e) {
                fail(str_cat("send #", seq, " to ", peer_str(peer)), e.what(), false);
            }
            return;
        }
        if (pending_.size() >= kMaxPendingSends) wait_oldest_send(timeout_);
        PendingSend p;
        p.data.assign(data, data + n);
        p.peer = peer;
        p.seq = seq;
        try {
            p.buf = ctx_->createUnboundBuffer(p.data.data(), p.data.size() * sizeof(float));
            p.buf->send(peer, p2p_slot(tag));
        } catch (const std::exception& e) {
            fail(str_cat("send #", seq, " to ", peer_str(peer)), e.what(), false);
        }
        pending_.push_back(std::move(p));
    }

    void recv(float* data, int64_t n, int peer, int tag) override {
        check_usable("recv");
        TS_CHECK(peer >= 0 && peer < size() && peer != rank(), "recv from group rank ", peer,
                 " on group ", name_, " of size ", size());
        int64_t seq = ++p2p_seq_;
        try {
            if (shm_p2p(n)) return shm_->p2p_wait_recv(shm_post(false, data, n, peer, tag));
            auto buf = ctx_->createUnboundBuffer(data, size_t(n) * sizeof(float));
            buf->recv(peer, p2p_slot(tag));
            if (!buf->waitRecv(timeout_)) throw std::runtime_error("receive aborted");
        } catch (const std::exception& e) {
            fail(str_cat("recv #", seq, " from ", peer_str(peer), " (tag ", tag, ")"), e.what(),
                 false);
        }
    }

    std::unique_ptr<CommRequest> isend(const float* data, int64_t n, int peer, int tag) override {
        return post("isend", const_cast<float*>(data), n, peer, tag, true);
    }

    std::unique_ptr<CommRequest> irecv(float* data, int64_t n, int peer, int tag) override {
        return post("irecv", data, n, peer, tag, false);
    }

    std::chrono::milliseconds timeout() const { return timeout_; }
    ShmGroup& shm() { return *shm_; }

    [[noreturn]] void fail(const std::string& op, const std::string& why, bool collective) {
        broken_ = true;
        std::string msg = str_cat(
            "rank ", global_rank_, " (", mesh_coord_str(mesh_coord(mesh_, global_rank_)), "): ", op,
            " on group ", name_, " did not complete within ", timeout_.count(), " ms (", why, ")");
        if (collective) msg += missing_peers();
        throw Error(msg);
    }

  private:
    // A message of n floats into or out of the shared-memory rings (shm_p2p(n)): the send's
    // ticket or the receive's number, for ShmGroup's waits. Tags travel as their 32 bits.
    uint64_t shm_post(bool is_send, float* data, int64_t n, int peer, int tag) {
        const uint64_t t = uint64_t(uint32_t(tag));
        const int64_t bytes = n * int64_t(sizeof(float));
        return is_send ? shm_->p2p_send(peer, t, data, bytes)
                       : shm_->p2p_post_recv(peer, t, data, bytes);
    }

    std::unique_ptr<CommRequest> post(const char* what, float* data, int64_t n, int peer, int tag,
                                      bool is_send) {
        check_usable(what);
        TS_CHECK(peer >= 0 && peer < size() && peer != rank(), what, " with group rank ", peer,
                 " on group ", name_, " of size ", size());
        int64_t seq = ++p2p_seq_;
        std::string desc = str_cat(what, " #", seq, is_send ? " to " : " from ", peer_str(peer),
                                   " (tag ", tag, ")");
        if (shm_p2p(n)) {
            uint64_t id = 0;
            try {
                id = shm_post(is_send, data, n, peer, tag);
            } catch (const std::exception& e) {
                fail(desc, e.what(), false);
            }
            return std::make_unique<ShmRequest>(this, is_send, peer, id, std::move(desc));
        }
        std::unique_ptr<gloo::transport::UnboundBuffer> buf;
        try {
            buf = ctx_->createUnboundBuffer(data, size_t(n) * sizeof(float));
            if (is_send)
                buf->send(peer, p2p_slot(tag));
            else
                buf->recv(peer, p2p_slot(tag));
        } catch (const std::exception& e) {
            fail(desc, e.what(), false);
        }
        return std::make_unique<GlooRequest>(this, std::move(buf), is_send, std::move(desc));
    }

    // One collective: sequence number, progress marker, gloo call, errors -> watchdog message.
    template <typename F>
    void run(const char* what, F&& fn) {
        check_usable(what);
        int64_t seq = ++seq_;
        try {
            progress_->set_noreply(progress_key(rank()), std::to_string(seq));
        } catch (const std::exception&) {
            // the store is only for diagnosis; a lost store must not stop training
        }
        try {
            fn(uint32_t(seq));
        } catch (const std::exception& e) {
            fail(str_cat(what, " #", seq), e.what(), true);
        }
    }

    // "; rank 3 (dp1.tp1.pp0) has only reached #4" for every member behind us.
    std::string missing_peers() {
        std::string out;
        try {
            for (int g = 0; g < size(); ++g) {
                if (g == rank()) continue;
                std::vector<char> v;
                int64_t at = 0;
                if (progress_->try_get(progress_key(g), &v))
                    at = std::stoll(std::string(v.begin(), v.end()));
                if (at < seq_)
                    out += str_cat("; ", peer_str(g),
                                   at == 0 ? std::string(" has not issued any collective")
                                           : str_cat(" has only reached #", at));
            }
        } catch (const std::exception&) {
            // diagnosis is best effort
        }
        return out;
    }

    std::string peer_str(int g) const {
        int r = members_[size_t(g)];
        return str_cat("rank ", r, " (", mesh_coord_str(mesh_coord(mesh_, r)), ")");
    }

    std::string progress_key(int g) const { return str_cat(name_, "/progress/", g); }

    void check_usable(const char* what) {
        if (broken_)
            throw Error(str_cat("rank ", global_rank_, ": ", what, " on group ", name_,
                                ": the communicator is unusable after an earlier failure"));
    }

    void wait_oldest_send(std::chrono::milliseconds timeout) {
        PendingSend& p = pending_.front();
        try {
            if (!p.buf->waitSend(timeout)) throw std::runtime_error("send aborted");
        } catch (const std::exception& e) {
            int64_t seq = p.seq;
            int peer = p.peer;
            // leave it in pending_: the destructor leaks it instead of freeing live memory
            fail(str_cat("send #", seq, " to ", peer_str(peer)), e.what(), false);
        }
        pending_.pop_front();
    }

    void drain_sends(std::chrono::milliseconds timeout) {
        while (!pending_.empty()) wait_oldest_send(timeout);
    }

    // The group's shared memory where every member is on this host (shm_group.h): the
    // collectives' buffers, or (a pipeline's group) rings for its messages up to their size;
    // longer ones go through gloo.
    bool shm_collectives() const { return shm_ && shm_->collectives(); }
    bool shm_p2p(int64_t n) const { return shm_ && shm_->p2p_fits(n * int64_t(sizeof(float))); }
    std::unique_ptr<ShmGroup> shm_;
    std::shared_ptr<gloo::rendezvous::Context> ctx_;
    std::string name_;
    std::vector<int> members_;  // global ranks, in group-rank order
    MeshShape mesh_;
    int global_rank_;
    std::chrono::milliseconds timeout_;
    std::unique_ptr<TcpStore> progress_;
    int64_t seq_ = 0;      // collectives issued (the same on every member)
    int64_t p2p_seq_ = 0;  // sends + receives issued by this member
    bool broken_ = false;
    std::deque<PendingSend> pending_;
};

void PostedRequest::wait() {
    if (done_) return;
    done_ = true;
    try {
        finish();
    } catch (const std::exception& e) {
        abandon();
        comm_->fail(what_, e.what(), false);
    }
}

void PostedRequest::wait_in_destructor() {
    try {
        wait();
    } catch (const std::exception&) {
        // A destructor cannot throw; the failure marked the communicator broken, so the next
        // operation reports it.
    }
}

void GlooRequest::finish() {
    const bool ok = is_send_ ? buf_->waitSend(comm_->timeout()) : buf_->waitRecv(comm_->timeout());
    if (!ok) throw std::runtime_error("aborted");
}

void ShmRequest::finish() {
    if (is_send_)
        comm_->shm().p2p_wait_sent(peer_, id_);
    else
        comm_->shm().p2p_wait_recv(id_);
}

// A pipeline group's ring size on one host (ShmGroup::join).
int64_t pipeline_ring_bytes(int members) {
    const int64_t per = (int64_t(64) << 20) / (int64_t(members) * (members - 1));
    return std::clamp<int64_t>(per, int64_t(256) << 10, int64_t(32) << 20) / 4096 * 4096;
}

// The rendezvous server for jobs not started by tessera's launcher: rank 0 hosts it for the life
// of the process.
std::mutex g_server_mu;
std::unique_ptr<TcpStoreServer> g_server;

bool is_loopback(const std::string& host) {
    return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// The address this rank's gloo device listens on: TESSERA_GLOO_IFACE (an interface name) or
// TESSERA_GLOO_HOST, else loopback for a single-host job (master on loopback), else hostname.
gloo::transport::tcp::attr device_attr(const RankEnv& env) {
    gloo::transport::tcp::attr a;
    const char* iface = std::getenv("TESSERA_GLOO_IFACE");
    const char* host = std::getenv("TESSERA_GLOO_HOST");
    if (iface && *iface) {
        a.iface = iface;
    } else if (host && *host) {
        a.hostname = host;
    } else if (is_loopback(env.master_addr)) {
        a.hostname = "127.0.0.1";
    } else {
        char buf[256] = {};
        ::gethostname(buf, sizeof(buf) - 1);
        a.hostname = buf;
    }
    return a;
}

std::string group_name(const char* kind, const std::vector<int>& members) {
    std::string s = str_cat(kind, "[");
    for (size_t i = 0; i < members.size(); ++i) s += str_cat(i ? "," : "", members[i]);
    return s + "]";
}

}  // namespace

// ------------------------------------------------------------------------------------------------

ProcessGroups comm_create_groups(const RankEnv& env, const MeshShape& mesh, const CommOptions& o) {
    if (mesh.world() != env.world_size)
        throw InputError(str_cat("parallel: mesh dp ", mesh.dp, " x tp ", mesh.tp, " x pp ",
                                 mesh.pp, " = ", mesh.world(), " ranks, but the job has ",
                                 env.world_size, " (", env.source, ")"));
    ProcessGroups g;
    g.mesh = mesh;
    g.rank = env.rank;
    g.coord = mesh_coord(mesh, env.rank);
    if (mesh.world() == 1) return g;
    if (o.backend != "gloo" && o.backend != "nccl")
        throw InputError(str_cat("parallel: backend '", o.backend,
                                 "' is not available in this build (expected gloo)"));

    std::string who = str_cat("rank ", env.rank, " (", mesh_coord_str(g.coord), ")");
    if (env.source != "tessera" && env.rank == 0) {
        std::lock_guard<std::mutex> lock(g_server_mu);
        if (!g_server) g_server = std::make_unique<TcpStoreServer>("0.0.0.0", env.master_port);
    }
    // Joining may wait for slow starters: never less than 60 s for the rendezvous itself.
    auto join_timeout = std::max(o.timeout, std::chrono::milliseconds(60000));
    TcpStore store(env.master_addr, env.master_port, join_timeout);
#ifdef TESSERA_HAVE_CUDA
    if (o.backend == "nccl") return comm_create_groups_nccl(env, mesh, o, store);
#else
    if (o.backend == "nccl")
        throw InputError("parallel: the nccl backend needs a CUDA build of tessera");
#endif
    std::shared_ptr<gloo::transport::Device> dev;
    try {
        dev = gloo::transport::tcp::CreateDevice(device_attr(env));
    } catch (const std::exception& e) {
        throw Error(str_cat(who, ": cannot create the gloo tcp device (", e.what(),
                            "); set TESSERA_GLOO_IFACE or TESSERA_GLOO_HOST"));
    }

    // Same order on every rank; each rank joins only its own groups.
    struct Slot {
        const char* name;
        GroupKind kind;
        std::unique_ptr<Communicator>* out;
    };
    Slot slots[] = {{"world", GroupKind::world, &g.world},
                    {"dp", GroupKind::dp, &g.dp},
                    {"tp", GroupKind::tp, &g.tp},
                    {"pp", GroupKind::pp, &g.pp},
                    {"embedding", GroupKind::embedding, &g.embedding},
                    {"dp_async", GroupKind::dp, &g.dp_async}};
    for (const Slot& s : slots) {
        std::vector<int> members = mesh_group(mesh, env.rank, s.kind);
        // a middle pipeline stage is in no embedding group (mesh_group names first and last)
        if (members.size() <= 1 ||
            std::find(members.begin(), members.end(), env.rank) == members.end())
            continue;
        std::string name = group_name(s.name, members);
        int grank = int(std::find(members.begin(), members.end(), env.rank) - members.begin());
        auto ctx = std::make_shared<gloo::rendezvous::Context>(grank, int(members.size()));
        std::unique_ptr<ShmGroup> shm;
        try {
            gloo::rendezvous::PrefixStore prefix(name, store);
            ctx->setTimeout(join_timeout);
            ctx->connectFullMesh(prefix, dev);
            ctx->setTimeout(o.timeout);
            // the pipeline's group only sends and receives: rings for its messages, 64 MiB
            // over every ordered pair of its members (between 256 KiB and 32 MiB a ring: pp 2
            // moves GPT-2 124M's micro-batch of 4 x 1024 tokens, 12.6 MB, through them)
            const int n = int(members.size());
            if (s.kind != GroupKind::pp)
                shm = ShmGroup::join(prefix, "collectives", grank, n, o.timeout);
            else
                shm = ShmGroup::join(prefix, "p2p", grank, n, o.timeout, pipeline_ring_bytes(n));
        } catch (const std::exception& e) {
            throw Error(str_cat(who, ": rendezvous of group ", name, " through ", store.address(),
                                " failed (", e.what(), ")"));
        }
        auto progress = std::make_unique<TcpStore>(env.master_addr, env.master_port, join_timeout);
        *s.out = std::make_unique<GlooCommunicator>(std::move(ctx), name, members, mesh, env.rank,
                                                    o.timeout, std::move(progress), std::move(shm));
    }
    return g;
}

}  // namespace tessera
