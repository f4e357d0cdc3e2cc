// The meta device's communicator: every collective is a no-op (see comm_meta.h).
#include "engine/parallel/comm_meta.h"

#include <cstdint>

namespace tessera {

namespace {

class MetaRequest final : public CommRequest {
  public:
    void wait() override {}
};

class MetaComm final : public Communicator {
  public:
    MetaComm(MetaBackend b, int rank, int size)
        : backend_(b), rank_(rank), size_(size), name_("meta[" + std::to_string(size) + "]") {}
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    const std::string& name() const override { return name_; }
    void all_reduce(float*, int64_t, ReduceOp) override {}
    void reduce_scatter(const float*, float*, int64_t) override {}
    void all_gather(const float*, float*, int64_t) override {}
    void broadcast(float*, int64_t, int) override {}
    void send(const float*, int64_t, int, int) override {}
    void recv(float*, int64_t, int, int) override {}
    std::unique_ptr<CommRequest> isend(const float*, int64_t, int, int) override { return done(); }
    std::unique_ptr<CommRequest> irecv(float*, int64_t, int, int) override { return done(); }
    void barrier() override {}
    int64_t sequence() const override { return 0; }
    std::string transport() const override { return "meta"; }
    std::unique_ptr<CommRequest> iall_reduce(float*, int64_t, float*) override { return nccl(); }
    std::unique_ptr<CommRequest> ireduce_scatter(float*, int64_t, float*) override {
        return nccl();
    }
    std::unique_ptr<CommRequest> iall_gather(void*, int64_t, DType t) override {
        return t == DType::bf16 ? nccl() : nullptr;
    }
    // A placeholder address, never dereferenced (the meta ops read and write nothing).
    void* symmetric_buffer(size_t) override {
        return backend_ == MetaBackend::nccl ? reinterpret_cast<void*>(uintptr_t(1) << 44)
                                             : nullptr;
    }
    void all_reduce(void*, int64_t, DType, ReduceOp) override {}
    std::unique_ptr<CommRequest> isend(const void*, int64_t, DType, int, int) override {
        return done();
    }
    std::unique_ptr<CommRequest> irecv(void*, int64_t, DType, int, int) override { return done(); }

  private:
    static std::unique_ptr<CommRequest> done() { return std::make_unique<MetaRequest>(); }
    std::unique_ptr<CommRequest> nccl() const {
        return backend_ == MetaBackend::nccl ? done() : nullptr;
    }
    MetaBackend backend_;
    int rank_, size_;
    std::string name_;
};

}  // namespace

std::unique_ptr<Communicator> comm_meta_create(MetaBackend backend, int rank, int size) {
    return std::make_unique<MetaComm>(backend, rank, size);
}

}  // namespace tessera
