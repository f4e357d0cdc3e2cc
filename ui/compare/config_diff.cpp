// Config diff: flattening, the per-key comparison and the tree view with its toggle.
#include "ui/compare/config_diff.h"

#include <QCheckBox>
#include <QHeaderView>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <map>

namespace tessera::studio {

namespace {
QString num(double v) {
    return QString::number(v, 'g', 6);
}
QString str(const std::string& s) {
    return s.empty() ? QStringLiteral("(none)") : QString::fromStdString(s);
}
QString yes_no(bool b) {
    return b ? QStringLiteral("yes") : QStringLiteral("no");
}
const QStringList kGroups = {"model", "data", "train", "parallel", "runtime"};
}  // namespace

// ------------------------------------------------------------------------------------------------
// flattening and diff

std::vector<ConfigEntry> compare_config_flatten(const tessera::RunConfig& c) {
    std::vector<ConfigEntry> e;
    auto add = [&](const char* group, const QString& key, const QString& value) {
        e.push_back({group, QString(group) + "." + key, value});
    };
    const auto& m = c.model;
    add("model", "preset", str(m.preset));
    add("model", "n_layer", QString::number(m.n_layer));
    add("model", "n_head", QString::number(m.n_head));
    add("model", "d_model", QString::number(m.d_model));
    add("model", "seq_len", QString::number(m.seq_len));
    add("model", "vocab", str(m.vocab));
    if (!m.hidden.empty()) {
        QStringList h;
        for (int x : m.hidden) h << QString::number(x);
        add("model", "hidden", h.join(", "));
    }
    add("model", "init_from", str(m.init_from));
    add("data", "dataset", str(c.data.dataset));
    add("data", "train", str(c.data.train));
    add("data", "val", str(c.data.val));
    add("data", "order", str(c.data.order));
    const auto& t = c.train;
    add("train", "steps", QString::number(t.steps));
    add("train", "micro_batch", QString::number(t.micro_batch));
    add("train", "grad_accum", QString::number(t.grad_accum));
    add("train", "global_batch (derived)",
        QString::number(int64_t(t.micro_batch) * t.grad_accum * c.parallel.dp));
    add("train", "lr", num(t.lr));
    add("train", "min_lr", num(t.min_lr));
    add("train", "warmup_steps", QString::number(t.warmup_steps));
    add("train", "weight_decay", num(t.weight_decay));
    add("train", "grad_clip", num(t.grad_clip));
    add("train", "beta1", num(t.beta1));
    add("train", "beta2", num(t.beta2));
    add("train", "eps", num(t.eps));
    add("train", "seed", QString::number(t.seed));
    add("train", "eval_every", QString::number(t.eval_every));
    add("train", "eval_steps", QString::number(t.eval_steps));
    const auto& p = c.parallel;
    add("parallel", "world_size (derived)", QString::number(p.dp * p.tp * p.pp));
    add("parallel", "dp", QString::number(p.dp));
    add("parallel", "tp", QString::number(p.tp));
    add("parallel", "pp", QString::number(p.pp));
    add("parallel", "zero", QString::number(p.zero));
    add("parallel", "schedule", p.pp > 1 ? str(p.schedule) : QStringLiteral("(no pipeline)"));
    add("parallel", "virtual_stages", QString::number(p.virtual_stages));
    QStringList stages;
    for (int s : p.stages) stages << QString::number(s);
    add("parallel", "stages", stages.isEmpty() ? QStringLiteral("balanced") : stages.join(", "));
    // recompute: one value per stage (a single value applies to every stage)
    for (int s = 0; s < std::max(1, p.pp); ++s) {
        QString v = "none";
        if (p.recompute.size() == 1)
            v = QString::fromStdString(p.recompute[0]);
        else if (s < int(p.recompute.size()))
            v = QString::fromStdString(p.recompute[s]);
        add("parallel", QString("recompute[stage %1]").arg(s), v);
    }
    add("parallel", "offload_activations", yes_no(p.offload_activations));
    add("parallel", "offload_optimizer", yes_no(p.offload_optimizer));
    add("runtime", "device", str(c.runtime.device));
    add("runtime", "precision", str(c.runtime.precision));
    add("runtime", "threads", t.threads == 0 ? QStringLiteral("auto") : QString::number(t.threads));
    return e;
}

std::vector<ConfigDiffRow> compare_config_diff(const std::vector<tessera::RunConfig>& configs) {
    std::vector<std::vector<ConfigEntry>> flat;
    flat.reserve(configs.size());
    for (const auto& c : configs) flat.push_back(compare_config_flatten(c));
    return compare_config_diff_flat(flat);
}

std::vector<ConfigDiffRow> compare_config_diff_flat(
    const std::vector<std::vector<ConfigEntry>>& configs) {
    std::vector<ConfigDiffRow> rows;
    std::map<QString, size_t> at;  // key -> row
    for (size_t r = 0; r < configs.size(); ++r) {
        for (const ConfigEntry& e : configs[r]) {
            auto it = at.find(e.key);
            if (it == at.end()) {
                it = at.emplace(e.key, rows.size()).first;
                rows.push_back({e.group, e.key, QStringList(), false});
            }
            QStringList& v = rows[it->second].values;
            while (v.size() < int(r)) v << QString();
            v << e.value;
        }
    }
    for (auto& row : rows) {
        while (row.values.size() < int(configs.size())) row.values << QString();
        row.differs = row.values.count(row.values.value(0)) != row.values.size();
    }
    // group order model, data, train, parallel, runtime (stable within a group)
    std::stable_sort(rows.begin(), rows.end(), [](const ConfigDiffRow& a, const ConfigDiffRow& b) {
        return kGroups.indexOf(a.group) < kGroups.indexOf(b.group);
    });
    return rows;
}

// ------------------------------------------------------------------------------------------------
// view

ConfigDiffView::ConfigDiffView(QWidget* parent)
    : QWidget(parent),
      m_only(new QCheckBox(tr("Differences only"), this)),
      m_tree(new QTreeWidget(this)) {
    m_only->setObjectName("diffOnly");
    m_tree->setObjectName("configDiff");
    m_tree->setRootIsDecorated(true);
    m_tree->setUniformRowHeights(true);
    m_tree->setAlternatingRowColors(true);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(m_only);
    lay->addWidget(m_tree);
    connect(m_only, &QCheckBox::toggled, this, [this] { applyFilter(); });
    setRuns({}, {});
}

void ConfigDiffView::setRuns(const QStringList& names,
                             const std::vector<tessera::RunConfig>& configs) {
    m_tree->clear();
    QStringList headers{tr("Key")};
    headers << names;
    m_tree->setColumnCount(headers.size());
    m_tree->setHeaderLabels(headers);
    std::map<QString, QTreeWidgetItem*> groups;
    for (const ConfigDiffRow& row : compare_config_diff(configs)) {
        QTreeWidgetItem*& g = groups[row.group];
        if (!g) {
            g = new QTreeWidgetItem(m_tree, QStringList{row.group});
            QFont f = g->font(0);
            f.setBold(true);
            g->setFont(0, f);
            g->setFirstColumnSpanned(true);
        }
        QStringList cells{row.key.mid(row.group.size() + 1)};
        cells << row.values;
        auto* item = new QTreeWidgetItem(g, cells);
        item->setData(0, Qt::UserRole, row.key);
        item->setData(0, Qt::UserRole + 1, row.differs);
        if (row.differs)
            for (int c = 0; c < cells.size(); ++c) {
                QFont f = item->font(c);
                f.setBold(true);
                item->setFont(c, f);
                item->setForeground(c, QColor(0xd3, 0x54, 0x00));
            }
    }
    m_tree->expandAll();
    m_tree->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
    applyFilter();
}

void ConfigDiffView::setDifferencesOnly(bool on) {
    m_only->setChecked(on);
}
bool ConfigDiffView::differencesOnly() const {
    return m_only->isChecked();
}

void ConfigDiffView::applyFilter() {
    const bool only = m_only->isChecked();
    for (int g = 0; g < m_tree->topLevelItemCount(); ++g) {
        QTreeWidgetItem* group = m_tree->topLevelItem(g);
        int shown = 0;
        for (int i = 0; i < group->childCount(); ++i) {
            QTreeWidgetItem* item = group->child(i);
            const bool hide = only && !item->data(0, Qt::UserRole + 1).toBool();
            item->setHidden(hide);
            shown += !hide;
        }
        group->setHidden(shown == 0);
    }
}

QStringList ConfigDiffView::visibleKeys() const {
    QStringList keys;
    for (int g = 0; g < m_tree->topLevelItemCount(); ++g) {
        QTreeWidgetItem* group = m_tree->topLevelItem(g);
        if (group->isHidden()) continue;
        for (int i = 0; i < group->childCount(); ++i)
            if (!group->child(i)->isHidden())
                keys << group->child(i)->data(0, Qt::UserRole).toString();
    }
    return keys;
}

}  // namespace tessera::studio
