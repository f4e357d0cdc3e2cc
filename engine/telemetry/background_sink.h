// BackgroundSink: a rank's telemetry written on a thread of its own. A training step ends with
// its records (metrics, spans, layer times) handed to the run's sink; writing them (a SQLite
// transaction in runs.db, or a line per record down the launcher's pipe) took 0.2-0.4 ms of the
// training thread per step, time in which a GPU sat idle between two steps. Here the step only
// buffers its records and hands them over; the thread writes them, in order, to the sink it wraps.
//
// Errors are not lost: the first exception the wrapped sink throws is rethrown by the next
// flush() or drain() on the training thread (a step later than a direct write would
// have). drain() is the synchronous point: it returns once everything handed over is written and
// flushed. The destructor drains too, but cannot report (an exception is usually unwinding).
// A wrapped sink slower than the steps (a disk that stalls) holds the steps back rather than
// letting the queue grow: flush() waits while more than `max_queued` records are handed over and
// not yet taken.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/telemetry/telemetry.h"

namespace tessera {

class BackgroundSink final : public TelemetrySink {
  public:
    // `inner` must outlive this sink and is written only by its thread until drain() returns.
    explicit BackgroundSink(TelemetrySink& inner, size_t max_queued = 1 << 16);
    ~BackgroundSink() override;
    BackgroundSink(const BackgroundSink&) = delete;
    BackgroundSink& operator=(const BackgroundSink&) = delete;

    void write(const Record& r) override;  // buffered on the caller's thread
    void flush() override;                 // hands the buffer over; waits only for a full queue
    void drain();                          // waits until `inner` has written and flushed it all

  private:
    void rethrow_failure();
    void loop();

    TelemetrySink& inner_;
    const size_t max_queued_;
    std::vector<Record> pending_;  // the caller's, not yet handed over
    std::mutex mu_;
    std::condition_variable work_cv_, taken_cv_;  // taken_cv_: a batch taken or written
    std::vector<Record> handed_;  // under mu_: handed over, not yet taken by the thread
    bool busy_ = false;           // under mu_: the thread is writing a batch
    bool stop_ = false;           // under mu_
    std::exception_ptr failure_;  // under mu_: the first exception of `inner`
    std::thread thread_;
};

}  // namespace tessera
