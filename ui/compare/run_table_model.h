// Compare page's run table: one RunSummary per run of runs.db (plan columns from the stored
// config, results from the metrics) and a QAbstractTableModel over them. Sort through a
// QSortFilterProxyModel on kSortRole (numbers sort as numbers, missing values last).
#pragma once
#include <QAbstractTableModel>
#include <QString>
#include <vector>

#include "engine/store/run_store.h"

namespace tessera::studio {

struct RunSummary {
    int64_t id = 0;
    QString name, status;
    bool config_ok = false;  // the stored config parsed
    int dp = 1, tp = 1, pp = 1, zero = 0;
    QString recompute = "none", offload = "none";
    int micro_batch = 0, grad_accum = 1, seq_len = 0;
    double final_val_loss = -1, best_val_loss = -1;  // -1 = no val/loss logged
    double final_train_loss = -1;
    double median_tok_per_s = -1;
    double peak_bytes_per_gpu = -1;  // max over ranks and steps of mem/total_bytes
    double duration_s = -1;          // -1 while running
    int64_t last_step = 0;
    double tokens_per_step() const { return double(micro_batch) * grad_accum * dp * seq_len; }
};

// Reads one run's summary (config parsed from config_text; metrics from the store).
RunSummary compare_summarize_run(const tessera::RunStore& store, const tessera::RunRow& run);

class RunTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Status, DP, TP, PP, Zero, Recompute, Offload, MicroBatch, FinalVal, BestVal,
                  TokPerS, PeakMem, Duration, ColumnCount };
    static constexpr int kSortRole = Qt::UserRole + 1;
    static constexpr int kRunIdRole = Qt::UserRole + 2;

    explicit RunTableModel(QObject* parent = nullptr);
    void setRuns(std::vector<RunSummary> runs);
    const std::vector<RunSummary>& runs() const { return m_runs; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    std::vector<RunSummary> m_runs;
};

}  // namespace tessera::studio
