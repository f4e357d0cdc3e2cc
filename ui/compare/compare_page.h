// Compare page: the sortable table of every run in the project's runs.db (the config keys that
// differ among the runs as columns; the newest runs selected when it opens); the selected runs'
// curves overlaid (any metric, x by step, tokens or wall time; EMA smoothing over the faint raw
// curve; grouped by a config key: one mean line per group with a min–max band), downsampled for
// display per pixel column (curve_math); a hover table of every selected run's values at the
// cursor; their config diff (differences-only toggle); export of the selected runs' metrics to one
// CSV and of the chart to PNG/PDF; parallel coordinates of the differing numeric config keys
// against the final metrics, whose brushes filter the run table. Tags and notes on runs, and
// archiving (hiding) them, are the page's one write to runs.db (RunStore::run_annotate); a filter
// box searches names, tags, notes and config values. Everything else reads runs.db read-only.
#pragma once
#include <QMap>
#include <QVector>
#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

#include "engine/store/run_store.h"
#include "ui/common/qcustomplot_qt.h"

class QComboBox;
class QDoubleSpinBox;
class QCustomPlot;
class QCheckBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSortFilterProxyModel;
class QTableView;
class QTableWidget;

namespace tessera::studio {

class ConfigDiffView;
class ParallelCoordsView;
struct RunSummary;
class ProjectDocument;
class RunFilterProxy;
class RunTableModel;

class ComparePage : public QWidget {
    Q_OBJECT
  public:
    explicit ComparePage(ProjectDocument* doc, QWidget* parent = nullptr);
    ~ComparePage() override;

    void refresh();  // re-reads runs.db
    RunTableModel* runModel() const { return m_model; }
    QSortFilterProxyModel* proxyModel() const;
    QTableView* runView() const { return m_view; }
    ConfigDiffView* diffView() const { return m_diff; }
    ParallelCoordsView* parallelView() const { return m_parallel; }
    QCustomPlot* plot() const { return m_plot; }
    QTableWidget* hoverTable() const { return m_hover; }

    static constexpr int kDefaultSelection = 5;  // runs selected when the page opens (the newest)
    QVector<int64_t> selectedRunIds() const;     // by run id
    QVector<int64_t> newestRuns(int n) const;    // the n highest run ids
    void setSelectedRuns(const QVector<int64_t>& ids);
    void setMetric(const QString& name);          // the curves' metric (train/loss by default)
    enum class XAxis { Step, Tokens, WallTime };  // wall time: minutes since the run started
    void setXByTokens(bool tokens);
    void setXAxis(XAxis x);
    XAxis xAxis() const;
    // Group the selected runs by a config key ("train.seed"); "" = one line per run.
    void setGroupKey(const QString& key);
    QString groupKey() const;
    void setSmoothing(double beta);  // debiased EMA, 0 = raw curves only
    int displayColumns() const;      // the downsampling's pixel columns (the plot's width)
    // Off: every point goes to QCustomPlot (its own adaptive sampling only): the bench's peer.
    void setDisplayDownsampling(bool on);
    void replot();            // rebuilds the curves of the selected runs and redraws
    void redownsampleView();  // the downsampled curves again over the x range in view
    void hoverAt(double x);   // fills the hover table for chart x (step or tokens)

    // Replaces the given parts of these runs' annotations in runs.db (a short read-write
    // connection; the rest of the page stays read-only), then reloads. false + error (also
    // annotateFailed) when the file cannot be written or a tag is bad.
    bool annotate(const QVector<int64_t>& ids, const std::optional<QStringList>& tags,
                  const std::optional<QString>& note, std::optional<bool> archived, QString* error);
    void setFilterText(const QString& text);  // the filter box
    void setShowArchived(bool show);

    // Writes the selected runs' metrics as CSV (run,step,rank,name,value,wall_time).
    bool exportCsv(const QString& path, QString* error);
    bool exportChart(const QString& path, QString* error);  // .png or .pdf by suffix

  public Q_SLOTS:
    // the shell finds it by name (MainWindow::addPage): as a plain method the chart stayed light
    void setDarkTheme(bool dark);

  Q_SIGNALS:
    void loadFailed(const QString& message);
    void exportFailed(const QString& message);
    void annotateFailed(const QString& message);

  private:
    struct Series {                             // the lowest rank's rows in step order
        std::vector<double> step, value, wall;  // wall: seconds since the run started
    };
    ProjectDocument* m_doc;
    std::unique_ptr<tessera::RunStore> m_store;
    RunTableModel* m_model;
    RunFilterProxy* m_proxy;
    QTableView* m_view;
    QComboBox* m_metricBox;
    QComboBox* m_xBox;
    QComboBox* m_groupBox;
    QDoubleSpinBox* m_smoothBox;
    QCustomPlot* m_plot;
    QTableWidget* m_hover;
    ConfigDiffView* m_diff;
    ParallelCoordsView* m_parallel;
    QLabel* m_status;
    QLineEdit* m_filter;
    QCheckBox* m_showArchived;
    QLineEdit* m_tagsEdit;
    QLineEdit* m_noteEdit;
    QPushButton* m_archiveButton;
    QMap<int64_t, QMap<QString, Series>> m_cache;  // run -> metric -> series
    bool m_downsample = true;
    // the x range the curves were last downsampled for; during redownsampleView's build, the view
    // each curve is downsampled over (null: the whole curve)
    QCPRange m_viewRange;
    const QCPRange* m_buildView = nullptr;
    bool m_viewPending = false;
    // refresh() draws its default selection's curves after the table is shown (the next turn of
    // the event loop): opening 1,000 runs shows the table first, then reads the curves
    bool m_deferPlot = false, m_plotPending = false;
    QString m_loaded;  // "N runs in FILE" after a good load

    const Series& series(int64_t run, const QString& metric);
    double tokensPerStep(int64_t run) const;
    const RunSummary* summary(int64_t run) const;
    std::vector<double> xValues(int64_t run, const Series& s) const;  // under the current x axis
    void plotRuns(const QVector<int64_t>& ids, const QString& metric, double beta);
    void plotGroups(const QVector<int64_t>& ids, const QString& metric, double beta);
    void fillGroupKeys();
    void selectionChanged();
    static constexpr int kThinLinesFrom = 9;  // curves in the chart from which lines are 1 px
    static int lineWidth(qsizetype curves);
    void updateDiff();
    void exportCsvClicked();
    void saveAnnotationClicked();
    void archiveClicked();
    void showAnnotation();
    void showCount();  // the first selected run's tags and note in the edit row
    void exportChartClicked();
};

}  // namespace tessera::studio
