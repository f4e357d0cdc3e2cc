#include "ui/data/prepare_runner.h"

#include <QCoreApplication>
#include <QMetaObject>
#include <QPointer>

namespace tessera::studio {

PrepareRunner::PrepareRunner(QObject* parent) : QObject(parent) {
    qRegisterMetaType<tessera::PrepareProgress>();
    qRegisterMetaType<tessera::PreparedSet>();
}

PrepareRunner::~PrepareRunner() {
    if (m_stop) m_stop->store(true);
    join();
}

void PrepareRunner::join() {
    if (m_worker.joinable()) m_worker.join();
}

bool PrepareRunner::start(const tessera::PrepareOptions& options) {
    if (m_running) return false;
    join();  // the previous worker has signalled its end; reap it
    m_running = true;
    m_stop = std::make_shared<std::atomic<bool>>(false);
    QPointer<PrepareRunner> self(this);
    auto stop = m_stop;
    // Signals are queued to the GUI thread; `self` is null there if the runner is gone.
    auto post = [self](auto fn) {
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [self, fn] {
                if (self) fn(self.data());
            },
            Qt::QueuedConnection);
    };
    m_worker = std::thread([options, stop, post] {
        try {
            tessera::PreparedSet set =
                tessera::data_prepare(options, [&](const tessera::PrepareProgress& p) {
                    post([p](PrepareRunner* r) { Q_EMIT r->progressed(p); });
                    return !stop->load();
                });
            post([set](PrepareRunner* r) {
                r->m_running = false;
                Q_EMIT r->finished(set);
            });
        } catch (const tessera::PrepareCancelled&) {
            post([](PrepareRunner* r) {
                r->m_running = false;
                Q_EMIT r->cancelled();
            });
        } catch (const std::exception& e) {
            const QString msg = QString::fromStdString(e.what());
            post([msg](PrepareRunner* r) {
                r->m_running = false;
                Q_EMIT r->failed(msg);
            });
        }
    });
    return true;
}

void PrepareRunner::cancel() {
    if (m_running && m_stop) m_stop->store(true);
}

}  // namespace tessera::studio
