// Compare page's run table (the Run column sorts by run id): one RunSummary per run of runs.db
// (plan columns from the stored config, results from the metrics) and a QAbstractTableModel over
// them: the fixed columns of Column, then one column per config key whose value differs among the
// runs (the config diff's comparison, compare_config_diff_flat). Sort through a
// QSortFilterProxyModel on kSortRole (numbers sort as numbers, missing values last).
#pragma once
#include <QAbstractTableModel>
#include <QSet>
#include <QSortFilterProxyModel>
#include <QString>
#include <optional>
#include <vector>

#include "engine/store/run_store.h"
#include "ui/compare/config_diff.h"

namespace tessera::studio {

struct RunSummary {
    int64_t id = 0;
    QString name, status;
    bool config_ok = false;  // the stored config parsed
    int dp = 1, tp = 1, pp = 1, zero = 0;
    QString recompute = "none", offload = "none";
    int micro_batch = 0, grad_accum = 1, seq_len = 0;
    double final_val_loss = -1, best_val_loss = -1;  // -1 = no val/loss logged (RunResults)
    double median_tok_per_s = -1;
    double peak_bytes_per_gpu = -1;         // max over ranks and steps of mem/total_bytes
    std::vector<std::string> metric_names;  // every metric the run logged, sorted
    double duration_s = -1;                 // -1 while running
    int64_t last_step = 0;
    double start_time = 0;            // seconds since epoch
    std::vector<ConfigEntry> config;  // the stored config flattened (empty if it did not parse)
    QStringList tags;                 // annotations (runs.db schema 3)
    QString note;
    bool archived = false;
    QString configValue(const QString& key) const;  // "" where the run has no such key
    // What a run groups under for `key`: a config key's value, for kGroupByTags its tags, for
    // kGroupByPlan its parallel plan ("dp2 × tp1 × pp1", with its ZeRO stage when on).
    QString groupValue(const QString& key) const;
    static constexpr const char* kGroupByTags = "tags";
    static constexpr const char* kGroupByPlan = "plan";
    double tokens_per_step() const { return double(micro_batch) * grad_accum * dp * seq_len; }
};

// One run's summary: the plan columns from its stored config; its results as the writer stored
// them (`stored`, a finished run's) or else from its metrics now (RunStore::run_results).
RunSummary compare_summarize_run(const tessera::RunStore& store, const tessera::RunRow& run,
                                 const tessera::RunResults* stored = nullptr);
// Every run's summary, in the order given, the stored results read once: on up to `threads`
// threads (0 = the machine's cores), each with its own read-only connection to `store`'s file;
// many runs parse their configs in parallel.
// Throws what a summary or a connection threw.
std::vector<RunSummary> compare_summarize_runs(const tessera::RunStore& store,
                                               const std::vector<tessera::RunRow>& runs,
                                               int threads = 0);

class RunTableModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    enum Column {
        Name,
        Status,
        Tags,
        DP,
        TP,
        PP,
        Zero,
        Recompute,
        Offload,
        MicroBatch,
        FinalVal,
        BestVal,
        TokPerS,
        PeakMem,
        Duration,
        Note,
        ColumnCount
    };
    static constexpr int kSortRole = Qt::UserRole + 1;
    static constexpr int kRunIdRole = Qt::UserRole + 2;

    explicit RunTableModel(QObject* parent = nullptr);
    void setRuns(std::vector<RunSummary> runs);
    const std::vector<RunSummary>& runs() const { return m_runs; }
    // The keys shown as columns ColumnCount, ColumnCount + 1, ...: those whose value differs among
    // the runs whose config parsed, less the ones a fixed column already shows.
    const QStringList& configKeys() const { return m_configKeys; }
    int configColumn(const QString& key) const;      // -1 when the key is not a column
    static QString columnTitle(const QString& key);  // "lr" for train.lr (the tooltip has the key)

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  private:
    std::vector<RunSummary> m_runs;
    QStringList m_configKeys;
    std::vector<bool> m_configNumeric;          // per config column: every value is a number
    std::vector<std::vector<QString>> m_cells;  // [row][config column]
};

// The run table's filter: archived runs hidden unless shown; every word of the filter text must
// occur (case-insensitively) in the run's name, status, a tag, the note, or a differing config
// key's value; "tag:x" asks for a tag equal to x.
class RunFilterProxy : public QSortFilterProxyModel {
    Q_OBJECT
  public:
    explicit RunFilterProxy(QObject* parent = nullptr);
    void setFilterWords(const QString& text);
    void setShowArchived(bool show);
    bool showArchived() const { return m_showArchived; }
    // Only these runs (the parallel coordinates' brushes); std::nullopt: no such limit.
    void setAllowedRuns(const std::optional<QSet<int64_t>>& runs);

  protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override;

  private:
    QStringList m_words;
    bool m_showArchived = false;
    std::optional<QSet<int64_t>> m_allowed;
};

}  // namespace tessera::studio
