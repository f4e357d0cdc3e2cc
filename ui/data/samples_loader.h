// Decodes a few documents of a prepared folder (the engine's prepared_samples) for the Data page
// on a worker thread: loading the folder's tokenizer takes about a second for Qwen3 or Llama 3,
// which would freeze the page on the GUI thread. One long-lived worker answers the newest request
// only (a request made while another is loading supersedes it); answers arrive as signals on the
// GUI thread, and a superseded request's answer is dropped, so the page never shows a stale
// folder's samples.
#pragma once
#include <QObject>
#include <QString>
#include <QStringList>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

namespace tessera::studio {

class SamplesLoader : public QObject {
    Q_OBJECT
  public:
    explicit SamplesLoader(QObject* parent = nullptr);
    ~SamplesLoader() override;  // drops what is queued, waits for the load in progress (if any)

    // `n` documents of the prepared folder `dir`, each cut to `maxTokens` tokens, decoded with
    // `tokenizer` (empty: the folder's own).
    void request(const QString& dir, const QString& tokenizer, int n, int maxTokens);
    // Forgets the pending request: its answer, if it comes, is dropped.
    void drop();
    bool isLoading() const { return m_answered != m_requested; }

  Q_SIGNALS:
    void loaded(const QString& dir, const QStringList& samples);
    void failed(const QString& dir, const QString& message);

  private:
    struct Job {
        uint64_t id;
        QString dir, tokenizer;
        int n, maxTokens;
    };
    void work();

    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::optional<Job> m_next;  // guarded by m_mutex
    bool m_quit = false;        // guarded by m_mutex
    uint64_t m_requested = 0;   // GUI thread: the newest request's id
    uint64_t m_answered = 0;    // GUI thread: the newest id answered or dropped
    std::thread m_worker;       // last member: started once the rest exists
};

}  // namespace tessera::studio
