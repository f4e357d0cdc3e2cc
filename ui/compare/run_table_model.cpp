// RunTableModel: run summaries from runs.db and their table model.
#include "ui/compare/run_table_model.h"

#include <QBrush>
#include <QColor>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <thread>
#include <unordered_map>

#include "engine/config/config.h"
#include "ui/common/stored_config.h"
#include "ui/common/vocabulary.h"

namespace tessera::studio {

// ------------------------------------------------------------------------------------------------
// summaries

RunSummary compare_summarize_run(const tessera::RunStore& store, const tessera::RunRow& run,
                                 const tessera::RunResults* stored) {
    RunSummary s;
    s.id = run.id;
    s.name = QString::fromStdString(run.name);
    s.status = QString::fromStdString(run.status);
    s.last_step = run.last_step;
    s.duration_s = run.end_time > 0 ? run.end_time - run.start_time : -1;
    s.start_time = run.start_time;
    try {
        tessera::RunConfig c = stored_run_config(store, run.config_text, run.name + " (runs.db)");
        s.config_ok = true;
        s.config = compare_config_flatten(c);
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
    // a finished run's results as its writer stored them; a running one's (or an older file's)
    // from its metrics now
    const tessera::RunResults r = stored && run.end_time > 0 ? *stored : store.run_results(run.id);
    s.final_val_loss = r.final_val_loss;
    s.best_val_loss = r.best_val_loss;
    s.median_tok_per_s = r.median_tok_per_s;
    s.peak_bytes_per_gpu = r.peak_total_bytes;
    s.metric_names = r.metric_names;
    return s;
}

std::vector<RunSummary> compare_summarize_runs(const tessera::RunStore& store,
                                               const std::vector<tessera::RunRow>& runs,
                                               int threads) {
    std::unordered_map<int64_t, tessera::RunResults> stored;
    for (tessera::RunResults& r : store.stored_results()) stored.emplace(r.run_id, std::move(r));
    auto summarize = [&](const tessera::RunStore& st, size_t i) {
        auto it = stored.find(runs[i].id);
        return compare_summarize_run(st, runs[i], it == stored.end() ? nullptr : &it->second);
    };
    std::vector<RunSummary> out(runs.size());
    if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::min(threads, int(runs.size() / 64) + 1);  // a thread is worth ~64 runs
    if (threads <= 1) {
        for (size_t i = 0; i < runs.size(); ++i) out[i] = summarize(store, i);
        return out;
    }
    std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t)
        pool.emplace_back([&, t] {
            try {
                // a connection per thread (connections are opened without SQLite's mutexes)
                const tessera::RunStore own = tessera::RunStore::open(store.path(), true);
                for (size_t i = size_t(t); i < runs.size(); i += size_t(threads))
                    out[i] = summarize(own, i);
            } catch (...) {
                errors[size_t(t)] = std::current_exception();
            }
        });
    try {
        for (size_t i = 0; i < runs.size(); i += size_t(threads)) out[i] = summarize(store, i);
    } catch (...) {
        errors[0] = std::current_exception();
    }
    for (auto& th : pool) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    return out;
}

QString RunSummary::groupValue(const QString& key) const {
    if (key == kGroupByTags) return tags.isEmpty() ? QString() : tags.join(", ");
    if (key == kGroupByPlan) {  // a key a stored config leaves out has its default
        auto value = [&](const char* k, const char* d) {
            const QString v = configValue(k);
            return v.isEmpty() ? QString(d) : v;
        };
        QString plan = QString("dp%1 × tp%2 × pp%3")
                           .arg(value("parallel.dp", "1"), value("parallel.tp", "1"),
                                value("parallel.pp", "1"));
        const QString zero = value("parallel.zero", "0");
        return zero == "0" ? plan : plan + QString(", ZeRO-%1").arg(zero);
    }
    return configValue(key);
}

QString RunSummary::configValue(const QString& key) const {
    for (const ConfigEntry& e : config)
        if (e.key == key) return e.value;
    return {};
}

// ------------------------------------------------------------------------------------------------
// model

namespace {
QString bytes_text(double b) {
    if (b < 0) return QStringLiteral("–");
    if (b >= 1024.0 * 1024 * 1024)
        return QString::number(b / (1024.0 * 1024 * 1024), 'f', 2) + " GiB";
    return QString::number(b / (1024.0 * 1024), 'f', 1) + " MiB";
}
QString duration_text(double s) {
    if (s < 0) return QStringLiteral("–");
    if (s < 10) return QString::number(s, 'f', 2) + " s";
    if (s < 60) return QString::number(s, 'f', 1) + " s";
    if (s < 3600) return QString::number(s / 60, 'f', 1) + " min";
    return QString::number(s / 3600, 'f', 2) + " h";
}
QString opt_num(double v, int prec) {
    return v < 0 ? QStringLiteral("–") : QString::number(v, 'f', prec);
}
// missing values sort after every real value in ascending order
QVariant sort_num(double v) {
    return v < 0 ? QVariant(std::numeric_limits<double>::max()) : QVariant(v);
}
}  // namespace

RunTableModel::RunTableModel(QObject* parent) : QAbstractTableModel(parent) {}

namespace {
// keys a fixed column already shows (or that follow from them)
bool shown_by_fixed_column(const QString& key) {
    static const QStringList fixed = {"parallel.dp",
                                      "parallel.tp",
                                      "parallel.pp",
                                      "parallel.zero",
                                      "parallel.world_size (derived)",
                                      "train.micro_batch",
                                      "parallel.offload_activations",
                                      "parallel.offload_optimizer"};
    return fixed.contains(key) || key.startsWith("parallel.recompute[");
}
}  // namespace

void RunTableModel::setRuns(std::vector<RunSummary> runs) {
    beginResetModel();
    m_runs = std::move(runs);
    m_configKeys.clear();
    m_configNumeric.clear();
    m_cells.assign(m_runs.size(), {});
    std::vector<std::vector<ConfigEntry>> flat;
    for (const RunSummary& r : m_runs)
        if (r.config_ok) flat.push_back(r.config);
    for (const ConfigDiffRow& row : compare_config_diff_flat(flat))
        if (row.differs && !shown_by_fixed_column(row.key)) m_configKeys << row.key;
    m_configNumeric.assign(m_configKeys.size(), true);
    for (size_t r = 0; r < m_runs.size(); ++r) {
        std::map<QString, QString> by_key;
        for (const ConfigEntry& e : m_runs[r].config) by_key.emplace(e.key, e.value);
        for (int k = 0; k < m_configKeys.size(); ++k) {
            auto it = by_key.find(m_configKeys[k]);
            m_cells[r].push_back(it == by_key.end() ? QString() : it->second);
            bool ok = false;
            m_cells[r].back().toDouble(&ok);
            if (!ok && !m_cells[r].back().isEmpty()) m_configNumeric[k] = false;
        }
    }
    endResetModel();
}

QString RunTableModel::columnTitle(const QString& key) {
    static const QStringList groups = {"model", "data", "train", "parallel", "runtime"};
    QString t = key.mid(key.indexOf('.') + 1);
    t.remove(QStringLiteral(" (derived)"));
    return groups.contains(t) ? key : t;  // "lr" for train.lr; data.train keeps its group
}

int RunTableModel::configColumn(const QString& key) const {
    const int k = m_configKeys.indexOf(key);
    return k < 0 ? -1 : ColumnCount + k;
}

int RunTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(m_runs.size());
}

int RunTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount + int(m_configKeys.size());
}

QVariant RunTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= int(m_runs.size()) || index.column() >= columnCount())
        return {};
    const RunSummary& r = m_runs[index.row()];
    if (role == kRunIdRole) return QVariant::fromValue<qlonglong>(r.id);
    if (index.column() >= ColumnCount) {  // a differing config key
        const int k = index.column() - ColumnCount;
        const QString& v = m_cells[index.row()][k];
        if (role == Qt::DisplayRole) return v.isEmpty() ? QStringLiteral("–") : v;
        if (role == Qt::ToolTipRole) return QString("%1 = %2").arg(m_configKeys[k], v);
        if (role == Qt::TextAlignmentRole)
            return int((m_configNumeric[k] ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter);
        if (role == kSortRole)
            return m_configNumeric[k] ? (v.isEmpty() ? QVariant(std::numeric_limits<double>::max())
                                                     : QVariant(v.toDouble()))
                                      : QVariant(v.toLower());
        return {};
    }
    if (role == Qt::TextAlignmentRole)
        return index.column() <= Tags || index.column() == Recompute || index.column() == Offload ||
                       index.column() == Note
                   ? QVariant(int(Qt::AlignLeft | Qt::AlignVCenter))
                   : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
    if (role == Qt::ForegroundRole && index.column() == Status) {
        if (r.status == vocab(tessera::run_status::failed)) return QBrush(QColor(0xc0, 0x39, 0x2b));
        if (r.status == vocab(tessera::run_status::running))
            return QBrush(QColor(0x29, 0x80, 0xb9));
        return {};
    }
    if (role == Qt::ToolTipRole && index.column() == Name)
        return QString("run #%1, %2 steps%3%4")
            .arg(r.id)
            .arg(r.last_step)
            .arg(r.archived ? QStringLiteral(" (archived)") : QString())
            .arg(r.note.isEmpty() ? QString() : "\n" + r.note);
    if (role == Qt::ToolTipRole && index.column() == Note && !r.note.isEmpty()) return r.note;
    if (role == Qt::ForegroundRole && r.archived) return QBrush(QColor(0x95, 0xa5, 0xa6));
    const bool display = role == Qt::DisplayRole;
    const bool sort = role == kSortRole;
    if (!display && !sort) return {};
    switch (index.column()) {
        case Name:
            return display ? QVariant(QString("#%1 %2").arg(r.id).arg(r.name))
                           : QVariant(qlonglong(r.id));
        case Status:
            return r.status;
        case Tags:
            return r.tags.join(", ");
        case Note:
            return display ? QVariant(r.note.section('\n', 0, 0)) : QVariant(r.note.toLower());
        case DP:
            return r.dp;
        case TP:
            return r.tp;
        case PP:
            return r.pp;
        case Zero:
            return r.zero;
        case Recompute:
            return r.recompute;
        case Offload:
            return r.offload;
        case MicroBatch:
            return r.micro_batch;
        case FinalVal:
            return display ? QVariant(opt_num(r.final_val_loss, 4)) : sort_num(r.final_val_loss);
        case BestVal:
            return display ? QVariant(opt_num(r.best_val_loss, 4)) : sort_num(r.best_val_loss);
        case TokPerS:
            return display ? QVariant(opt_num(r.median_tok_per_s, 0))
                           : sort_num(r.median_tok_per_s);
        case PeakMem:
            return display ? QVariant(bytes_text(r.peak_bytes_per_gpu))
                           : sort_num(r.peak_bytes_per_gpu);
        case Duration:
            return display ? QVariant(duration_text(r.duration_s)) : sort_num(r.duration_s);
        default:
            return {};
    }
}

QVariant RunTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
    if (section >= ColumnCount) {
        const QString& key = m_configKeys[section - ColumnCount];
        if (role == Qt::DisplayRole) return columnTitle(key);
        if (role == Qt::ToolTipRole) return tr("%1: differs among the runs").arg(key);
        return {};
    }
    static const char* names[] = {"Run",
                                  "Status",
                                  "Tags",
                                  "DP",
                                  "TP",
                                  "PP",
                                  "ZeRO",
                                  "Recompute",
                                  "Offload",
                                  "Micro-batch",
                                  "Final val loss",
                                  "Best val loss",
                                  "Tok/s (median)",
                                  "Peak mem/GPU",
                                  "Duration",
                                  "Note"};
    static_assert(std::size(names) == ColumnCount);
    if (role == Qt::DisplayRole) return QString(names[section]);
    if (role == Qt::ToolTipRole && section == PeakMem)
        return QString("max of mem/total_bytes over ranks and steps");
    return {};
}

// ------------------------------------------------------------------------------------------------
// filter

RunFilterProxy::RunFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {}

void RunFilterProxy::setFilterWords(const QString& text) {
    m_words = text.simplified().toLower().split(' ', Qt::SkipEmptyParts);
    invalidateFilter();
}

void RunFilterProxy::setShowArchived(bool show) {
    m_showArchived = show;
    invalidateFilter();
}

void RunFilterProxy::setAllowedRuns(const std::optional<QSet<int64_t>>& runs) {
    m_allowed = runs;
    invalidateFilter();
}

bool RunFilterProxy::filterAcceptsRow(int row, const QModelIndex& parent) const {
    auto* m = qobject_cast<RunTableModel*>(sourceModel());
    if (!m || parent.isValid() || row >= int(m->runs().size())) return true;
    const RunSummary& r = m->runs()[row];
    if (r.archived && !m_showArchived) return false;
    if (m_allowed && !m_allowed->contains(r.id)) return false;
    for (const QString& w : m_words) {
        if (w.startsWith("tag:")) {
            const QString want = w.mid(4);
            if (!std::any_of(r.tags.begin(), r.tags.end(),
                             [&](const QString& t) { return t.toLower() == want; }))
                return false;
            continue;
        }
        bool hit = r.name.toLower().contains(w) || r.status.toLower().contains(w) ||
                   r.note.toLower().contains(w) ||
                   std::any_of(r.tags.begin(), r.tags.end(),
                               [&](const QString& t) { return t.toLower().contains(w); });
        for (int c = RunTableModel::ColumnCount; !hit && c < m->columnCount(); ++c)
            hit = m->index(row, c).data().toString().toLower().contains(w);
        if (!hit) return false;
    }
    return true;
}

}  // namespace tessera::studio
