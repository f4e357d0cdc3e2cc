// Runs the engine's data_prepare (engine/data/prepare.h) for the Data page on a worker thread, so
// the page stays responsive: progress arrives as signals on the GUI thread (coalesced by the
// engine's own few-per-second callback), cancel() makes the engine stop at its next callback and
// leave nothing half-written, and every outcome is one signal. The engine's error text (file:line
// for a bad JSONL line) reaches the page unchanged.
#pragma once
#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <thread>

#include "engine/data/prepare.h"

namespace tessera::studio {

class PrepareRunner : public QObject {
    Q_OBJECT
  public:
    explicit PrepareRunner(QObject* parent = nullptr);
    ~PrepareRunner() override;  // cancels and joins a running job

    // false when a job is already running
    bool start(const tessera::PrepareOptions& options);
    void cancel();
    bool isRunning() const { return m_running; }

  Q_SIGNALS:
    void progressed(const tessera::PrepareProgress& progress);
    void finished(const tessera::PreparedSet& set);
    void failed(const QString& message);
    void cancelled();

  private:
    void join();

    std::thread m_worker;
    std::shared_ptr<std::atomic<bool>> m_stop;
    bool m_running = false;
};

}  // namespace tessera::studio

Q_DECLARE_METATYPE(tessera::PrepareProgress)
Q_DECLARE_METATYPE(tessera::PreparedSet)
