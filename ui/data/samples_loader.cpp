#include "ui/data/samples_loader.h"

#include <QCoreApplication>
#include <QMetaObject>
#include <QPointer>
#include <exception>
#include <string>
#include <vector>

#include "engine/data/prepare.h"

namespace tessera::studio {

SamplesLoader::SamplesLoader(QObject* parent) : QObject(parent), m_worker([this] { work(); }) {}

SamplesLoader::~SamplesLoader() {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_quit = true;
        m_next.reset();
    }
    m_wake.notify_one();
    m_worker.join();
}

void SamplesLoader::request(const QString& dir, const QString& tokenizer, int n, int maxTokens) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_next = Job{++m_requested, dir, tokenizer, n, maxTokens};
    }
    m_wake.notify_one();
}

void SamplesLoader::drop() {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_next.reset();
    m_answered = ++m_requested;  // an answer already on its way no longer matches
}

void SamplesLoader::work() {
    QPointer<SamplesLoader> self(this);
    // Runs `fn` on the GUI thread if the loader still exists and `id` is still the newest request.
    auto answer = [self](uint64_t id, auto fn) {
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [self, id, fn] {
                if (!self || id != self->m_requested) return;
                self->m_answered = id;
                fn(self.data());
            },
            Qt::QueuedConnection);
    };
    for (;;) {
        Job job;
        {
            std::unique_lock<std::mutex> lock(m_mutex);
            m_wake.wait(lock, [this] { return m_quit || m_next; });
            if (m_quit) return;
            job = *m_next;
            m_next.reset();
        }
        try {
            QStringList samples;
            for (const std::string& s : tessera::prepared_samples(
                     job.dir.toStdString(), job.tokenizer.toStdString(), job.n, job.maxTokens))
                samples << QString::fromStdString(s);
            answer(job.id,
                   [dir = job.dir, samples](SamplesLoader* l) { Q_EMIT l->loaded(dir, samples); });
        } catch (const std::exception& e) {
            const QString message = QString::fromStdString(e.what());
            answer(job.id,
                   [dir = job.dir, message](SamplesLoader* l) { Q_EMIT l->failed(dir, message); });
        }
    }
}

}  // namespace tessera::studio
