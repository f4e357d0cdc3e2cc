// Owning handles for NCCL (CUDA builds only): communicators, memory from ncclMemAlloc, and that
// memory registered as a symmetric window. The only places where ncclCommDestroy, ncclCommAbort,
// ncclMemFree and ncclCommWindowDeregister appear (scripts/check_raw_handles.sh keeps it so).
// Destructors ignore NCCL's result (never throw from one).
//
// Order matters: a window is deregistered on its communicator, so it must go before the
// communicator does (NcclCommunicator declares its windows after its communicators); once a
// communicator was aborted, its windows only free their memory (forget_comm()).
#pragma once
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

// symmetric windows (NCCL 2.27) and the zero-CTA policy (2.28): the copy-engine collectives
#define TS_NCCL_WINDOWS (NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0))

namespace tessera {

struct NcclCommDeleter {
    void operator()(ncclComm_t c) const { ncclCommDestroy(c); }
};
// A communicator, destroyed (ncclCommDestroy) with its owner.
using NcclComm = std::unique_ptr<std::remove_pointer_t<ncclComm_t>, NcclCommDeleter>;

// Ends a communicator that may never complete (a peer died, the watchdog's timeout, a failed
// setup): ncclCommAbort instead of ncclCommDestroy, which could wait for the peers.
inline void nccl_comm_abort(NcclComm& c) {
    if (c) ncclCommAbort(c.release());
}

struct NcclMemDeleter {
    void operator()(void* p) const { ncclMemFree(p); }
};
using NcclMem = std::unique_ptr<void, NcclMemDeleter>;

#if TS_NCCL_WINDOWS
// `bytes` of ncclMemAlloc memory registered as a symmetric window on `comm` (not owned: the
// window must be destroyed before it). Move-only.
class NcclWindow {
  public:
    // ncclSuccess and the window, or NCCL's error and an empty window (memory already freed).
    static std::pair<ncclResult_t, NcclWindow> create(ncclComm_t comm, size_t bytes) {
        NcclWindow w;
        void* p = nullptr;
        ncclResult_t r = ncclMemAlloc(&p, bytes);
        w.mem_.reset(p);
        if (r == ncclSuccess)
            r = ncclCommWindowRegister(comm, p, bytes, &w.win_, NCCL_WIN_COLL_SYMMETRIC);
        if (r != ncclSuccess) return {r, NcclWindow()};  // w frees the memory
        w.comm_ = comm;
        return {r, std::move(w)};
    }
    NcclWindow() = default;
    NcclWindow(NcclWindow&& o) noexcept
        : comm_(std::exchange(o.comm_, nullptr)),
          win_(std::exchange(o.win_, nullptr)),
          mem_(std::move(o.mem_)) {}
    NcclWindow& operator=(NcclWindow&& o) noexcept {
        if (this != &o) {
            deregister();
            comm_ = std::exchange(o.comm_, nullptr);
            win_ = std::exchange(o.win_, nullptr);
            mem_ = std::move(o.mem_);
        }
        return *this;
    }
    ~NcclWindow() { deregister(); }  // then mem_ frees the memory

    void* data() const { return mem_.get(); }
    // The communicator was aborted: the registration went with it; only the memory is freed.
    void forget_comm() { comm_ = nullptr; }

  private:
    void deregister() {
        if (comm_ && win_) ncclCommWindowDeregister(comm_, win_);
        comm_ = nullptr;
        win_ = nullptr;
    }
    ncclComm_t comm_ = nullptr;
    ncclWindow_t win_ = nullptr;
    NcclMem mem_;
};
#endif

}  // namespace tessera
