#include "ui/common/latest_job.h"

#include <QCoreApplication>
#include <QMetaObject>
#include <QPointer>
#include <exception>

namespace tessera::studio {

LatestJob::~LatestJob() {
    if (m_worker.joinable()) m_worker.join();
}

void LatestJob::request(Work work, std::function<void(const QString&)> failed) {
    ++m_generation;
    Request r{std::move(work), std::move(failed)};
    if (m_running)
        m_pending = std::move(r);
    else
        start(std::move(r));
}

void LatestJob::cancel() {
    ++m_generation;
    m_pending.reset();
}

void LatestJob::start(Request r) {
    if (m_worker.joinable()) m_worker.join();  // the previous worker has posted its end
    m_running = true;
    const uint64_t generation = m_generation;
    QPointer<LatestJob> self(this);
    m_worker = std::thread([self, generation, r] {
        Apply apply;
        QString error;
        try {
            apply = r.work();
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        // to the GUI thread; `self` is null there if the job's owner is gone
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [self, generation, apply, error, failed = r.failed] {
                if (self) self->finished(generation, apply, error, failed);
            },
            Qt::QueuedConnection);
    });
}

void LatestJob::finished(uint64_t generation, const Apply& apply, const QString& error,
                         const std::function<void(const QString&)>& failed) {
    m_running = false;
    if (m_worker.joinable()) m_worker.join();
    if (generation == m_generation) {
        if (!error.isEmpty()) {
            if (failed) failed(error);
        } else if (apply) {
            apply();
        }
    }
    if (m_pending) {
        Request next = std::move(*m_pending);
        m_pending.reset();
        start(std::move(next));
    } else {
        Q_EMIT idle();
    }
}

}  // namespace tessera::studio
