// RunTableModel: run summaries from runs.db and their table model.
#include "ui/compare/run_table_model.h"

#include <QBrush>
#include <QColor>
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/config/config.h"
#include "ui/common/vocabulary.h"

namespace tessera::studio {

// ------------------------------------------------------------------------------------------------
// summaries

RunSummary compare_summarize_run(const tessera::RunStore& store, const tessera::RunRow& run) {
    RunSummary s;
    s.id = run.id;
    s.name = QString::fromStdString(run.name);
    s.status = QString::fromStdString(run.status);
    s.last_step = run.last_step;
    s.duration_s = run.end_time > 0 ? run.end_time - run.start_time : -1;
    try {
        tessera::RunConfig c = tessera::config_parse(run.config_text, run.name + " (runs.db)");
        s.config_ok = true;
        s.dp = c.parallel.dp;
        s.tp = c.parallel.tp;
        s.pp = c.parallel.pp;
        s.zero = c.parallel.zero;
        QStringList rc;
        for (const auto& r : c.parallel.recompute) rc << QString::fromStdString(r);
        rc.removeDuplicates();
        s.recompute = rc.isEmpty() ? QStringLiteral("none") : rc.join('/');
        QStringList off;
        if (c.parallel.offload_activations) off << "act";
        if (c.parallel.offload_optimizer) off << "optim";
        s.offload = off.isEmpty() ? QStringLiteral("none") : off.join('+');
        s.micro_batch = c.train.micro_batch;
        s.grad_accum = c.train.grad_accum;
        s.seq_len = c.model.seq_len;
    } catch (const std::exception&) {
        // an unreadable stored config leaves the plan columns at their defaults
    }
    double best = std::numeric_limits<double>::infinity();
    for (const auto& m : store.metrics(run.id, tessera::metric::val_loss)) {
        if (!std::isfinite(m.value)) continue;
        best = std::min(best, m.value);
        s.final_val_loss = m.value;
    }
    if (std::isfinite(best)) s.best_val_loss = best;
    if (auto m = store.metric_last(run.id, tessera::metric::train_loss)) s.final_train_loss = m->value;
    std::vector<double> tok;
    for (const auto& m : store.metrics(run.id, tessera::metric::perf_tok_per_s))
        if (std::isfinite(m.value)) tok.push_back(m.value);
    if (!tok.empty()) {
        std::nth_element(tok.begin(), tok.begin() + tok.size() / 2, tok.end());
        s.median_tok_per_s = tok[tok.size() / 2];
    }
    for (const auto& m : store.metrics(run.id, tessera::metric::mem_total_bytes))
        if (std::isfinite(m.value)) s.peak_bytes_per_gpu = std::max(s.peak_bytes_per_gpu, m.value);
    return s;
}

// ------------------------------------------------------------------------------------------------
// model

namespace {
QString bytes_text(double b) {
    if (b < 0) return QStringLiteral("–");
    if (b >= 1024.0 * 1024 * 1024) return QString::number(b / (1024.0 * 1024 * 1024), 'f', 2) + " GiB";
    return QString::number(b / (1024.0 * 1024), 'f', 1) + " MiB";
}
QString duration_text(double s) {
    if (s < 0) return QStringLiteral("–");
    if (s < 10) return QString::number(s, 'f', 2) + " s";
    if (s < 60) return QString::number(s, 'f', 1) + " s";
    if (s < 3600) return QString::number(s / 60, 'f', 1) + " min";
    return QString::number(s / 3600, 'f', 2) + " h";
}
QString opt_num(double v, int prec) { return v < 0 ? QStringLiteral("–") : QString::number(v, 'f', prec); }
// missing values sort after every real value in ascending order
QVariant sort_num(double v) { return v < 0 ? QVariant(std::numeric_limits<double>::max()) : QVariant(v); }
}  // namespace

RunTableModel::RunTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunTableModel::setRuns(std::vector<RunSummary> runs) {
    beginResetModel();
    m_runs = std::move(runs);
    endResetModel();
}

int RunTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(m_runs.size());
}

int RunTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= int(m_runs.size()) || index.column() >= ColumnCount) return {};
    const RunSummary& r = m_runs[index.row()];
    if (role == kRunIdRole) return QVariant::fromValue<qlonglong>(r.id);
    if (role == Qt::TextAlignmentRole)
        return index.column() <= Status || index.column() == Recompute || index.column() == Offload
                   ? QVariant(int(Qt::AlignLeft | Qt::AlignVCenter))
                   : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
    if (role == Qt::ForegroundRole && index.column() == Status) {
        if (r.status == vocab(tessera::run_status::failed)) return QBrush(QColor(0xc0, 0x39, 0x2b));
        if (r.status == vocab(tessera::run_status::running)) return QBrush(QColor(0x29, 0x80, 0xb9));
        return {};
    }
    if (role == Qt::ToolTipRole && index.column() == Name)
        return QString("run #%1, %2 steps").arg(r.id).arg(r.last_step);
    const bool display = role == Qt::DisplayRole;
    const bool sort = role == kSortRole;
    if (!display && !sort) return {};
    switch (index.column()) {
    case Name: return display ? QString("#%1 %2").arg(r.id).arg(r.name) : QVariant(r.name.toLower());
    case Status: return r.status;
    case DP: return r.dp;
    case TP: return r.tp;
    case PP: return r.pp;
    case Zero: return r.zero;
    case Recompute: return r.recompute;
    case Offload: return r.offload;
    case MicroBatch: return r.micro_batch;
    case FinalVal: return display ? QVariant(opt_num(r.final_val_loss, 4)) : sort_num(r.final_val_loss);
    case BestVal: return display ? QVariant(opt_num(r.best_val_loss, 4)) : sort_num(r.best_val_loss);
    case TokPerS: return display ? QVariant(opt_num(r.median_tok_per_s, 0)) : sort_num(r.median_tok_per_s);
    case PeakMem: return display ? QVariant(bytes_text(r.peak_bytes_per_gpu)) : sort_num(r.peak_bytes_per_gpu);
    case Duration: return display ? QVariant(duration_text(r.duration_s)) : sort_num(r.duration_s);
    default: return {};
    }
}

QVariant RunTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
    static const char* names[] = {"Run", "Status", "DP", "TP", "PP", "ZeRO", "Recompute", "Offload",
                                  "Micro-batch", "Final val loss", "Best val loss", "Tok/s (median)",
                                  "Peak mem/GPU", "Duration"};
    if (role == Qt::DisplayRole) return QString(names[section]);
    if (role == Qt::ToolTipRole && section == PeakMem) return QString("max of mem/total_bytes over ranks and steps");
    return {};
}

}  // namespace tessera::studio
