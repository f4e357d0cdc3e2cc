// Shared-memory collectives for members on one host. See shm_group.h.
#include "engine/parallel/shm_group.h"

#include <fcntl.h>
#include <gloo/rendezvous/store.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/unique_fd.h"

namespace tessera {

namespace {

constexpr size_t kLine = 64;

struct alignas(kLine) Counter {
    std::atomic<uint64_t> phase{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared counters must be lock-free");

// The owning types of the segment (scripts/check_raw_handles.sh): its mapping, and its name,
// unlinked once every member has mapped it (or given up).
struct Mapping {
    void* base = MAP_FAILED;
    size_t bytes = 0;
    Mapping() = default;
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping() {
        if (base != MAP_FAILED) munmap(base, bytes);
    }
    bool ok() const { return base != MAP_FAILED; }
    void reset() {
        if (base != MAP_FAILED) munmap(base, bytes);
        base = MAP_FAILED;
    }
    void* release() { return std::exchange(base, MAP_FAILED); }
};

struct SegmentName {
    std::string name;  // empty: nothing to unlink
    ~SegmentName() {
        if (!name.empty()) shm_unlink(name.c_str());
    }
};

std::vector<char> bytes_of(const std::string& s) {
    return {s.begin(), s.end()};
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

}  // namespace

// The segment: a token (checked by every member: the name reached the same memory), the
// counters, then two buffers of `size` slots and two result buffers.
struct ShmGroup::Header {
    char token[32];
    struct Member {
        int32_t pid;
        uint64_t start;  // the process's start time (/proc/PID/stat): a reused pid is not it
    } member[kMaxMembers];
    Counter arrive[kMaxMembers];
    Counter done[kMaxMembers];
};

namespace {
// Field 22 of /proc/PID/stat (clock ticks after boot); 0 when there is no such process here, or
// it has exited.
uint64_t process_start(int pid) {
    std::ifstream f(str_cat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(f, line)) return 0;
    const size_t paren = line.rfind(')');  // the command may hold spaces and parentheses
    if (paren == std::string::npos) return 0;
    std::istringstream rest(line.substr(paren + 2));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i) {
        if (i == 3 && (field == "Z" || field == "X")) return 0;  // exited, not yet reaped
        if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
    }
    return 0;
}
}  // namespace

namespace {
size_t segment_bytes(int size) {
    const size_t slot = sizeof(float) * ShmGroup::kSlotFloats;
    return ((sizeof(ShmGroup::Header) + kLine - 1) / kLine) * kLine + slot * 2 * (size_t(size) + 1);
}
}  // namespace

ShmGroup::ShmGroup(void* base, size_t bytes, int rank, int size, std::chrono::milliseconds timeout)
    : base_(base), bytes_(bytes), rank_(rank), size_(size), timeout_(timeout) {}

ShmGroup::~ShmGroup() {
    Mapping m;  // the segment's owner
    m.base = base_;
    m.bytes = bytes_;
}

std::unique_ptr<ShmGroup> ShmGroup::join(gloo::rendezvous::Store& store, const std::string& key,
                                         int rank, int size, std::chrono::milliseconds timeout) {
    if (size < 2 || size > kMaxMembers) return nullptr;
    if (const char* e = std::getenv("TESSERA_SHM"); e && std::string(e) == "0") return nullptr;
    const size_t bytes = segment_bytes(size);
    // Member 0 creates a fresh segment, writes a random token into it and names both in the
    // store; the others map it and check the token (a member in another IPC namespace, or on
    // another host with a /dev/shm of its own, would map something else or nothing). Every
    // member then reports, and the group is used only if all could.
    Mapping map;
    map.bytes = bytes;
    SegmentName created;  // member 0's: unlinked when join returns, every member having answered
    if (rank == 0) {
        std::random_device rd;
        const std::string token = str_cat(std::hex, rd(), rd(), rd());
        const std::string name = str_cat("/tessera-", getpid(), "-", token.substr(0, 12));
        UniqueFd fd(shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
        if (fd.get() >= 0) created.name = name;
        // allocate every page now: a /dev/shm too small for it fails here, not with a SIGBUS
        // in the middle of a collective
        if (fd.get() >= 0 && posix_fallocate(fd.get(), 0, off_t(bytes)) == 0)
            map.base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
        if (map.ok()) {
            auto* h = new (map.base) Header();
            std::strncpy(h->token, token.c_str(), sizeof(h->token) - 1);
        }
        store.set(key + "/shm", bytes_of(map.ok() ? name + " " + token : "-"));
    } else {
        const std::vector<char> v = store.get(key + "/shm");
        const std::string s(v.begin(), v.end());
        const size_t sp = s.find(' ');
        if (sp != std::string::npos) {
            const std::string token = s.substr(sp + 1);
            UniqueFd fd(shm_open(s.substr(0, sp).c_str(), O_RDWR, 0600));
            if (fd.get() >= 0)
                map.base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
            if (map.ok() && std::strncmp(static_cast<Header*>(map.base)->token, token.c_str(),
                                         sizeof(Header::token) - 1) != 0)
                map.reset();
        }
    }
    if (map.ok()) {
        auto& m = static_cast<Header*>(map.base)->member[rank];
        m.pid = getpid();
        m.start = process_start(getpid());
    }
    store.set(str_cat(key, "/shm_ok/", rank), bytes_of(map.ok() ? "1" : "0"));
    bool all = true;
    for (int r = 0; r < size; ++r)
        all = all && store.get(str_cat(key, "/shm_ok/", r)) == bytes_of("1");
    if (!all) return nullptr;
    // a member that exits mid-collective is noticed within milliseconds (as Gloo notices a
    // closed socket) where every member's process is visible here, as in one launcher's job;
    // in another pid namespace only the timeout can tell
    bool watch = true;
    for (int r = 0; r < size; ++r) {
        const auto& m = static_cast<Header*>(map.base)->member[r];
        watch = watch && m.start != 0 && process_start(m.pid) == m.start;
    }
    void* base = map.release();
    auto g = std::unique_ptr<ShmGroup>(new ShmGroup(base, bytes, rank, size, timeout));
    g->watch_ = watch;
    return g;
}

float* ShmGroup::slot(int buffer, int member) const {
    char* data = static_cast<char*>(base_) + ((sizeof(Header) + kLine - 1) / kLine) * kLine;
    return reinterpret_cast<float*>(data) +
           (size_t(buffer) * size_t(size_) + size_t(member)) * size_t(kSlotFloats);
}

float* ShmGroup::result(int buffer) const {
    return slot(0, 0) + (size_t(2) * size_t(size_) + size_t(buffer)) * size_t(kSlotFloats);
}

uint64_t ShmGroup::begin_phase() {
    return ++phase_;
}

void ShmGroup::arrive(uint64_t phase) {
    static_cast<Header*>(base_)->arrive[rank_].phase.store(phase, std::memory_order_release);
}

void ShmGroup::finish(uint64_t phase) {
    static_cast<Header*>(base_)->done[rank_].phase.store(phase, std::memory_order_release);
}

// Waits until every member's counter has reached `phase`: spinning first (the members usually
// arrive within microseconds of each other), then yielding (a member that shares this core gets
// it), then sleeping, looking every few milliseconds whether the awaited member's process is
// still there; throws after the timeout.
void ShmGroup::wait_all(bool done, uint64_t phase) const {
    const Header* h = static_cast<const Header*>(base_);
    const auto* c = reinterpret_cast<const Counter*>(done ? h->done : h->arrive);
    using Clock = std::chrono::steady_clock;
    Clock::time_point deadline{};
    for (int r = 0; r < size_; ++r) {
        for (int spins = 0; c[r].phase.load(std::memory_order_acquire) < phase; ++spins) {
            if (spins < 2000) {
                cpu_relax();
            } else if (spins < 4000) {
                sched_yield();
            } else {
                if (deadline == Clock::time_point{}) deadline = Clock::now() + timeout_;
                const char* what = done ? "finish" : "arrive at";
                if (Clock::now() > deadline)
                    throw std::runtime_error(str_cat("shared memory: group rank ", r, " did not ",
                                                     what, " phase ", phase));
                if (watch_ && spins % 256 == 0 &&
                    process_start(h->member[r].pid) != h->member[r].start)
                    throw std::runtime_error(str_cat("shared memory: group rank ", r, " (pid ",
                                                     h->member[r].pid, ") exited before it ", what,
                                                     " phase ", phase));
                std::this_thread::sleep_for(std::chrono::microseconds(20));
            }
        }
    }
}

void ShmGroup::wait_arrived(uint64_t phase) const {
    wait_all(false, phase);
}

void ShmGroup::wait_finished(uint64_t phase) const {
    wait_all(true, phase);
}

// out[0, count) := the members' slots of buffer b at [at, at + count), combined in rank order:
// every member that combines an element does it in the same order, so all get the same bits.
void ShmGroup::reduce_slots(float* out, int b, int64_t at, int64_t count, ReduceOp op) const {
    std::memcpy(out, slot(b, 0) + at, sizeof(float) * size_t(count));
    for (int r = 1; r < size_; ++r) {
        const float* in = slot(b, r) + at;
        if (op == ReduceOp::sum)
            for (int64_t i = 0; i < count; ++i) out[i] += in[i];
        else
            for (int64_t i = 0; i < count; ++i) out[i] = std::max(out[i], in[i]);
    }
}

void ShmGroup::all_reduce(float* data, int64_t n, ReduceOp op) {
    for (int64_t off = 0; off < n; off += kSlotFloats) {
        const int64_t len = std::min(kSlotFloats, n - off);
        const uint64_t ph = begin_phase();
        const int b = int(ph & 1);
        std::memcpy(slot(b, rank_), data + off, sizeof(float) * size_t(len));
        arrive(ph);
        wait_arrived(ph);
        // this member's share of the elements
        const int64_t lo = len * rank_ / size_, hi = len * (rank_ + 1) / size_;
        float* out = result(b);
        reduce_slots(out + lo, b, lo, hi - lo, op);
        finish(ph);
        wait_finished(ph);
        std::memcpy(data + off, out, sizeof(float) * size_t(len));
    }
    if (n == 0) barrier();  // still a synchronisation point, as in Gloo
}

void ShmGroup::reduce_scatter(const float* in, float* out, int64_t n) {
    // a chunk of every destination's range per phase: size chunks fill a slot
    const int64_t step = std::max<int64_t>(1, kSlotFloats / size_);
    for (int64_t off = 0; off < n; off += step) {
        const int64_t len = std::min(step, n - off);
        const uint64_t ph = begin_phase();
        const int b = int(ph & 1);
        float* mine = slot(b, rank_);
        for (int d = 0; d < size_; ++d)
            std::memcpy(mine + d * len, in + int64_t(d) * n + off, sizeof(float) * size_t(len));
        arrive(ph);
        wait_arrived(ph);
        reduce_slots(out + off, b, int64_t(rank_) * len, len, ReduceOp::sum);
    }
    if (n == 0) barrier();
}

void ShmGroup::all_gather(const float* in, float* out, int64_t n) {
    for (int64_t off = 0; off < n; off += kSlotFloats) {
        const int64_t len = std::min(kSlotFloats, n - off);
        const uint64_t ph = begin_phase();
        const int b = int(ph & 1);
        std::memcpy(slot(b, rank_), in + off, sizeof(float) * size_t(len));
        arrive(ph);
        wait_arrived(ph);
        for (int r = 0; r < size_; ++r)
            std::memcpy(out + int64_t(r) * n + off, slot(b, r), sizeof(float) * size_t(len));
    }
    if (n == 0) barrier();
}

void ShmGroup::broadcast(float* data, int64_t n, int root) {
    for (int64_t off = 0; off < n; off += kSlotFloats) {
        const int64_t len = std::min(kSlotFloats, n - off);
        const uint64_t ph = begin_phase();
        const int b = int(ph & 1);
        if (rank_ == root) std::memcpy(slot(b, root), data + off, sizeof(float) * size_t(len));
        arrive(ph);
        wait_arrived(ph);
        if (rank_ != root) std::memcpy(data + off, slot(b, root), sizeof(float) * size_t(len));
    }
    if (n == 0) barrier();
}

void ShmGroup::barrier() {
    const uint64_t ph = begin_phase();
    arrive(ph);
    wait_arrived(ph);
}

}  // namespace tessera
