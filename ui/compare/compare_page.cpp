// ComparePage: run table, overlaid curves with hover values, config diff, CSV/PNG/PDF export.
#include "ui/compare/compare_page.h"
#include "ui/common/plot_theme.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <fstream>
#include "ui/common/qcustomplot_qt.h"

#include "engine/config/config.h"
#include "ui/common/project_document.h"
#include "ui/common/vocabulary.h"
#include "ui/compare/config_diff.h"
#include "ui/compare/run_table_model.h"

namespace tessera::studio {

namespace {
const QColor kRunColors[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xe1, 0x57, 0x59), QColor(0x59, 0xa1, 0x4f),
                             QColor(0xf2, 0x8e, 0x2b), QColor(0xb0, 0x7a, 0xa1), QColor(0x76, 0xb7, 0xb2),
                             QColor(0xed, 0xc9, 0x48), QColor(0x9c, 0x75, 0x5f)};
const QStringList kHoverMetrics = {vocab(metric::train_loss), vocab(metric::val_loss),
                                   vocab(metric::perf_tok_per_s), vocab(metric::train_lr)};

// The last point at or before x (x in steps); nullptr if none.
const QPair<double, double>* value_at(const QVector<QPair<double, double>>& s, double step) {
    const QPair<double, double>* best = nullptr;
    for (const auto& p : s) {
        if (p.first > step + 1e-9) break;
        best = &p;
    }
    return best;
}
}  // namespace

ComparePage::ComparePage(ProjectDocument* doc, QWidget* parent)
    : QWidget(parent), m_doc(doc), m_model(new RunTableModel(this)), m_proxy(new QSortFilterProxyModel(this)),
      m_view(new QTableView(this)), m_metricBox(new QComboBox(this)), m_xBox(new QComboBox(this)),
      m_plot(new QCustomPlot(this)), m_hover(new QTableWidget(this)), m_diff(new ConfigDiffView(this)),
      m_status(new QLabel(this)) {
    setObjectName("comparePage");
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(RunTableModel::kSortRole);
    m_view->setObjectName("runTable");
    m_view->setModel(m_proxy);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(RunTableModel::Name, Qt::AscendingOrder);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_view->verticalHeader()->hide();
    m_view->setAlternatingRowColors(true);
    m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->setMinimumHeight(120);

    m_metricBox->setObjectName("compareMetric");
    m_metricBox->setEditable(false);
    m_metricBox->addItems(kHoverMetrics);
    m_xBox->setObjectName("compareX");
    m_xBox->addItems({tr("by step"), tr("by tokens")});

    m_plot->setObjectName("compareChart");
    m_plot->setMinimumSize(360, 220);
    m_plot->legend->setVisible(true);
    m_plot->legend->setFont(QFont(font().family(), 8));
    m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);

    m_hover->setObjectName("hoverTable");
    QStringList hh{tr("Run"), tr("Step"), tr("Tokens")};
    hh << kHoverMetrics;
    m_hover->setColumnCount(hh.size());
    m_hover->setHorizontalHeaderLabels(hh);
    m_hover->verticalHeader()->hide();
    m_hover->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_hover->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    m_hover->setMaximumHeight(110);

    auto* reload = new QPushButton(tr("Reload"), this);
    auto* csv = new QPushButton(tr("Export CSV…"), this);
    auto* png = new QPushButton(tr("Export chart…"), this);
    csv->setToolTip(tr("The selected runs' metrics: run,step,rank,name,value,wall_time"));
    png->setToolTip(tr("The chart as PNG or PDF"));
    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Select runs to compare (Ctrl/Shift-click)."), this));
    top->addStretch(1);
    top->addWidget(new QLabel(tr("Metric"), this));
    top->addWidget(m_metricBox);
    top->addWidget(new QLabel(tr("x"), this));
    top->addWidget(m_xBox);
    top->addWidget(reload);
    top->addWidget(csv);
    top->addWidget(png);

    auto* chartBox = new QWidget(this);
    auto* chartLay = new QVBoxLayout(chartBox);
    chartLay->setContentsMargins(0, 0, 0, 0);
    chartLay->addWidget(m_plot, 1);
    chartLay->addWidget(m_hover);
    auto* bottom = new QSplitter(Qt::Horizontal, this);
    bottom->addWidget(chartBox);
    bottom->addWidget(m_diff);
    bottom->setStretchFactor(0, 3);
    bottom->setStretchFactor(1, 2);
    bottom->setSizes({620, 480});
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_view);
    split->addWidget(bottom);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 3);

    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top);
    lay->addWidget(split, 1);
    lay->addWidget(m_status);

    connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] { selectionChanged(); });
    connect(m_metricBox, &QComboBox::currentTextChanged, this, [this] { replot(); });
    connect(m_xBox, &QComboBox::currentIndexChanged, this, [this] { replot(); });
    connect(reload, &QPushButton::clicked, this, &ComparePage::refresh);
    connect(csv, &QPushButton::clicked, this, &ComparePage::exportCsvClicked);
    connect(png, &QPushButton::clicked, this, &ComparePage::exportChartClicked);
    connect(m_plot, &QCustomPlot::mouseMove, this,
            [this](QMouseEvent* e) { hoverAt(m_plot->xAxis->pixelToCoord(e->position().x())); });
    if (m_doc) connect(m_doc, &ProjectDocument::opened, this, &ComparePage::refresh);
    refresh();
}

ComparePage::~ComparePage() = default;

// ------------------------------------------------------------------------------------------------
// data

void ComparePage::refresh() {
    const QVector<int64_t> keep = selectedRunIds();
    m_store.reset();
    m_cache.clear();
    std::vector<RunSummary> rows;
    const QString db = m_doc ? m_doc->dbPath() : QString();
    if (db.isEmpty() || !QFileInfo::exists(db)) {
        m_status->setText(db.isEmpty() ? tr("No project open.") : tr("No runs yet: %1 does not exist.").arg(db));
    } else {
        try {
            m_store = std::make_unique<tessera::RunStore>(tessera::RunStore::open(db.toStdString(), true));
            for (const auto& r : m_store->runs_list()) {
                rows.push_back(compare_summarize_run(*m_store, r));
                for (const auto& name : m_store->metric_names(r.id))  // every logged metric can be plotted
                    if (m_metricBox->findText(QString::fromStdString(name)) < 0)
                        m_metricBox->addItem(QString::fromStdString(name));
            }
            m_status->setText(tr("%1 runs in %2").arg(rows.size()).arg(db));
        } catch (const std::exception& e) {
            m_store.reset();
            rows.clear();
            m_status->setText(QString::fromUtf8(e.what()));
            Q_EMIT loadFailed(QString::fromUtf8(e.what()));
        }
    }
    m_model->setRuns(std::move(rows));
    setSelectedRuns(keep);
    selectionChanged();
}

const ComparePage::Series& ComparePage::series(int64_t run, const QString& metric) {
    auto& per_run = m_cache[run];
    auto it = per_run.find(metric);
    if (it != per_run.end()) return *it;
    Series s;
    if (m_store) {
        auto rows = m_store->metrics(run, metric.toStdString());
        int rank = INT32_MAX;  // per-rank metrics: take the lowest rank that logged it
        for (const auto& r : rows) rank = std::min(rank, r.rank);
        for (const auto& r : rows)
            if (r.rank == rank) s.push_back({double(r.step), r.value});
        std::stable_sort(s.begin(), s.end(), [](auto& a, auto& b) { return a.first < b.first; });
    }
    return *per_run.insert(metric, s);
}

double ComparePage::tokensPerStep(int64_t run) const {
    for (const auto& r : m_model->runs())
        if (r.id == run) return r.tokens_per_step();
    return 0;
}

QVector<int64_t> ComparePage::selectedRunIds() const {
    QVector<int64_t> ids;
    if (!m_view->selectionModel()) return ids;
    QModelIndexList rows = m_view->selectionModel()->selectedRows();
    std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.row() < b.row(); });
    for (const QModelIndex& i : rows) ids << i.data(RunTableModel::kRunIdRole).toLongLong();
    return ids;
}

void ComparePage::setSelectedRuns(const QVector<int64_t>& ids) {
    QItemSelection sel;
    for (int r = 0; r < m_proxy->rowCount(); ++r) {
        const QModelIndex i = m_proxy->index(r, 0);
        if (ids.contains(i.data(RunTableModel::kRunIdRole).toLongLong()))
            sel.select(i, m_proxy->index(r, m_proxy->columnCount() - 1));
    }
    m_view->selectionModel()->select(sel, QItemSelectionModel::ClearAndSelect);
}

void ComparePage::setMetric(const QString& name) {
    if (m_metricBox->findText(name) < 0) m_metricBox->addItem(name);
    m_metricBox->setCurrentText(name);
}

void ComparePage::setXByTokens(bool tokens) { m_xBox->setCurrentIndex(tokens ? 1 : 0); }

void ComparePage::selectionChanged() {
    replot();
    updateDiff();
}

// ------------------------------------------------------------------------------------------------
// chart, hover table, diff

void ComparePage::replot() {
    m_plot->clearGraphs();
    m_plot->clearItems();
    const QString metric = m_metricBox->currentText();
    const bool tokens = m_xBox->currentIndex() == 1;
    const QVector<int64_t> ids = selectedRunIds();
    int k = 0;
    for (int64_t id : ids) {
        const Series& s = series(id, metric);
        const double scale = tokens ? tokensPerStep(id) : 1.0;
        QVector<double> x, y;
        for (const auto& p : s) {
            x << p.first * scale;
            y << p.second;
        }
        QCPGraph* g = m_plot->addGraph();
        QString name;
        for (const auto& r : m_model->runs())
            if (r.id == id) name = QString("#%1 %2").arg(r.id).arg(r.name);
        g->setName(name);
        g->setPen(QPen(kRunColors[k++ % 8], 2));
        if (x.size() < 20) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
        g->setData(x, y, true);
    }
    m_plot->xAxis->setLabel(tokens ? tr("tokens") : tr("step"));
    m_plot->yAxis->setLabel(metric);
    if (ids.isEmpty()) {
        auto* t = new QCPItemText(m_plot);
        t->position->setType(QCPItemPosition::ptAxisRectRatio);
        t->position->setCoords(0.5, 0.5);
        t->setText(m_model->rowCount() ? tr("select runs in the table above") : tr("no runs"));
        m_plot->legend->setVisible(false);
    } else {
        m_plot->legend->setVisible(true);
        m_plot->rescaleAxes();
        m_plot->xAxis->scaleRange(1.05, m_plot->xAxis->range().center());
        m_plot->yAxis->scaleRange(1.1, m_plot->yAxis->range().center());
    }
    m_plot->replot();
    m_hover->setRowCount(0);
    if (!ids.isEmpty()) hoverAt(m_plot->xAxis->range().upper);
}

void ComparePage::hoverAt(double x) {
    const bool tokens = m_xBox->currentIndex() == 1;
    const QVector<int64_t> ids = selectedRunIds();
    m_hover->setRowCount(ids.size());
    for (int r = 0; r < ids.size(); ++r) {
        const int64_t id = ids[r];
        const double tps = tokensPerStep(id);
        const double step = tokens ? (tps > 0 ? x / tps : 0) : x;
        QString name;
        for (const auto& s : m_model->runs())
            if (s.id == id) name = QString("#%1 %2").arg(s.id).arg(s.name);
        auto set = [&](int c, const QString& text) {
            auto* item = new QTableWidgetItem(text);
            if (c > 0) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            if (c == 0) item->setForeground(kRunColors[r % 8]);
            m_hover->setItem(r, c, item);
        };
        set(0, name);
        const auto* at = value_at(series(id, vocab(metric::train_loss)), step);
        const double shown_step = at ? at->first : std::floor(std::max(0.0, step));
        set(1, QString::number(int64_t(shown_step)));
        set(2, QString::number(int64_t(shown_step * tps)));
        for (int m = 0; m < kHoverMetrics.size(); ++m) {
            const auto* p = value_at(series(id, kHoverMetrics[m]), step);
            const int prec = kHoverMetrics[m] == vocab(metric::perf_tok_per_s) ? 0 : 4;
            set(3 + m, p ? (kHoverMetrics[m] == vocab(metric::train_lr) ? QString::number(p->second, 'e', 2)
                                                          : QString::number(p->second, 'f', prec))
                         : QStringLiteral("–"));
        }
    }
    // the cursor line
    for (int i = m_plot->itemCount() - 1; i >= 0; --i)
        if (m_plot->item(i)->objectName() == "cursor") m_plot->removeItem(i);
    if (!ids.isEmpty()) {
        auto* line = new QCPItemStraightLine(m_plot);
        line->setObjectName("cursor");
        line->setPen(QPen(QColor(128, 128, 128), 1, Qt::DashLine));
        line->point1->setCoords(x, 0);
        line->point2->setCoords(x, 1);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }
}

void ComparePage::updateDiff() {
    QStringList names;
    std::vector<tessera::RunConfig> configs;
    if (m_store) {
        for (int64_t id : selectedRunIds()) {
            auto run = m_store->run_get(id);
            if (!run) continue;
            try {
                configs.push_back(tessera::config_parse(run->config_text, run->name + " (runs.db)"));
                names << QString("#%1 %2").arg(id).arg(QString::fromStdString(run->name));
            } catch (const std::exception& e) {
                m_status->setText(tr("run #%1: %2").arg(id).arg(QString::fromUtf8(e.what())));
            }
        }
    }
    m_diff->setRuns(names, configs);
}

// ------------------------------------------------------------------------------------------------
// export

bool ComparePage::exportCsv(const QString& path, QString* error) {
    auto fail = [&](const QString& msg) {
        if (error) *error = msg;
        Q_EMIT exportFailed(msg);
        return false;
    };
    const QVector<int64_t> ids = selectedRunIds();
    if (!m_store) return fail(tr("no runs.db open"));
    if (ids.isEmpty()) return fail(tr("select at least one run to export"));
    std::ofstream out(path.toStdString(), std::ios::binary);
    if (!out) return fail(tr("cannot write %1").arg(path));
    try {
        m_store->export_csv(out, std::vector<int64_t>(ids.begin(), ids.end()));
    } catch (const std::exception& e) {
        return fail(QString::fromUtf8(e.what()));
    }
    out.close();
    if (!out) return fail(tr("writing %1 failed").arg(path));
    m_status->setText(tr("exported %1 runs to %2").arg(ids.size()).arg(path));
    return true;
}

bool ComparePage::exportChart(const QString& path, QString* error) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    bool ok = false;
    if (suffix == "pdf") ok = m_plot->savePdf(path, 800, 500);
    else if (suffix == "png") ok = m_plot->savePng(path, 1000, 600, 1.0);
    else {
        const QString msg = tr("%1: expected a .png or .pdf file name, found '.%2'").arg(path, suffix);
        if (error) *error = msg;
        Q_EMIT exportFailed(msg);
        return false;
    }
    if (!ok) {
        const QString msg = tr("cannot write %1").arg(path);
        if (error) *error = msg;
        Q_EMIT exportFailed(msg);
    } else {
        m_status->setText(tr("chart saved to %1").arg(path));
    }
    return ok;
}

void ComparePage::exportCsvClicked() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export runs to CSV"), "runs.csv", tr("CSV (*.csv)"));
    QString err;
    if (!path.isEmpty() && !exportCsv(path, &err)) m_status->setText(err);
}

void ComparePage::exportChartClicked() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export chart"), "compare.png",
                                                      tr("PNG image (*.png);;PDF (*.pdf)"));
    QString err;
    if (!path.isEmpty() && !exportChart(path, &err)) m_status->setText(err);
}

void ComparePage::setDarkTheme(bool dark) {
    plot_apply_theme(m_plot, dark);
    m_plot->replot();
}

}  // namespace tessera::studio
