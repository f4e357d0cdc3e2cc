// LatestJob: work a page would otherwise do on the GUI thread (the Plan page's searches take
// seconds on a large plan), run on a worker thread one job at a time, keeping only the newest
// request. A request made while a job runs waits for it, replacing any request already waiting;
// a job's result reaches the GUI thread only if no newer request (or cancel) came since it
// started, so what a page shows always answers its latest state. The work returns what to do on
// the GUI thread with its result (a closure holding the result by value); an exception from the
// work reaches `failed` instead. The destructor waits for a running job (bounded work: the
// estimator's) and delivers nothing.
#pragma once
#include <QObject>
#include <QString>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>

namespace tessera::studio {

class LatestJob : public QObject {
    Q_OBJECT
  public:
    using Apply = std::function<void()>;  // runs on the GUI thread
    using Work = std::function<Apply()>;  // runs on the worker

    explicit LatestJob(QObject* parent = nullptr) : QObject(parent) {}
    ~LatestJob() override;
    LatestJob(const LatestJob&) = delete;
    LatestJob& operator=(const LatestJob&) = delete;

    // Runs `work` now if idle, else after the running job (replacing a waiting request).
    // `failed` receives the exception text of a work that threw (the newest request's only).
    void request(Work work, std::function<void(const QString&)> failed = {});
    // Drops the waiting request and the running job's result.
    void cancel();
    // A job running or waiting.
    bool busy() const { return m_running || m_pending.has_value(); }

  Q_SIGNALS:
    void idle();  // the last job ended (delivered, dropped or failed) and none waits

  private:
    struct Request {
        Work work;
        std::function<void(const QString&)> failed;
    };
    void start(Request r);
    void finished(uint64_t generation, const Apply& apply, const QString& error,
                  const std::function<void(const QString&)>& failed);

    std::thread m_worker;
    bool m_running = false;
    std::optional<Request> m_pending;
    uint64_t m_generation = 0;  // bumped by every request and cancel
};

}  // namespace tessera::studio
