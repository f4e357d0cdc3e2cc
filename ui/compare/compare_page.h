// Compare page: the sortable table of every run in the project's runs.db; the selected runs'
// curves overlaid (any metric, x by step or by tokens) with a hover table of every selected
// run's values at the cursor; their config diff (differences-only toggle); export of the
// selected runs' metrics to one CSV and of the chart to PNG/PDF. Reads runs.db read-only.
#pragma once
#include <QMap>
#include <QVector>
#include <QWidget>
#include <memory>

#include "engine/store/run_store.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QSortFilterProxyModel;
class QTableView;
class QTableWidget;

namespace tessera::studio {

class ConfigDiffView;
class ProjectDocument;
class RunTableModel;

class ComparePage : public QWidget {
    Q_OBJECT
public:
    explicit ComparePage(ProjectDocument* doc, QWidget* parent = nullptr);
    ~ComparePage() override;

    void refresh();  // re-reads runs.db
    RunTableModel* runModel() const { return m_model; }
    QSortFilterProxyModel* proxyModel() const { return m_proxy; }
    QTableView* runView() const { return m_view; }
    ConfigDiffView* diffView() const { return m_diff; }
    QCustomPlot* plot() const { return m_plot; }
    QTableWidget* hoverTable() const { return m_hover; }

    QVector<int64_t> selectedRunIds() const;     // in table order
    void setSelectedRuns(const QVector<int64_t>& ids);
    void setMetric(const QString& name);         // the curves' metric (train/loss by default)
    void setXByTokens(bool tokens);
    void hoverAt(double x);                      // fills the hover table for chart x (step or tokens)

    // Writes the selected runs' metrics as CSV (run,step,rank,name,value,wall_time).
    bool exportCsv(const QString& path, QString* error);
    bool exportChart(const QString& path, QString* error);  // .png or .pdf by suffix
    void setDarkTheme(bool dark);

Q_SIGNALS:
    void loadFailed(const QString& message);
    void exportFailed(const QString& message);

private:
    using Series = QVector<QPair<double, double>>;  // (step, value), rank-0 rows in step order
    ProjectDocument* m_doc;
    std::unique_ptr<tessera::RunStore> m_store;
    RunTableModel* m_model;
    QSortFilterProxyModel* m_proxy;
    QTableView* m_view;
    QComboBox* m_metricBox;
    QComboBox* m_xBox;
    QCustomPlot* m_plot;
    QTableWidget* m_hover;
    ConfigDiffView* m_diff;
    QLabel* m_status;
    QMap<int64_t, QMap<QString, Series>> m_cache;  // run -> metric -> series

    const Series& series(int64_t run, const QString& metric);
    double tokensPerStep(int64_t run) const;
    void selectionChanged();
    void replot();
    void updateDiff();
    void exportCsvClicked();
    void exportChartClicked();
};

}  // namespace tessera::studio
