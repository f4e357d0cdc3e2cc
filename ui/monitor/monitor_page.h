// The Monitor page: live charts of a run in the project's runs.db (loss with debiased-EMA
// smoothing, tokens/s, per-rank memory stacked by category with the estimator's prediction for the
// run's recorded device as a band, the engine's device total and the driver's measured use as
// ticks), Launch / Stop through RunController, a console with a rank filter and a status line.
// runs.db is read through a read-only RunStore: incremental metrics(after_rowid) every 250 ms,
// replots coalesced on a 40 ms timer (never per sample), adaptive sampling on every graph.
#pragma once
#include <QPointer>
#include <QTimer>
#include <QWidget>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/memory.h"
#include "engine/launch/run_control.h"
#include "engine/parallel/mesh.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/run_alerts.h"
#include "ui/monitor/monitor_series.h"

class QCustomPlot;
class QCPGraph;
class QCPItemRect;
class QComboBox;
class QCheckBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSlider;
class QTabWidget;
class QCPAbstractItem;

namespace tessera::studio {

class ProjectDocument;
class SystemCharts;

class MonitorPage : public QWidget {
    Q_OBJECT
  public:
    enum XAxis { XStep = 0, XWallTime = 1, XTokens = 2 };

    explicit MonitorPage(ProjectDocument* doc, QWidget* parent = nullptr);
    ~MonitorPage() override;

    // ---- hooks for tests and the bench (the timers call these) ----
    void pollNow();                  // one incremental read of runs.db
    void replotNow();                // applies pending data to the graphs and replots
    void setSmoothing(double beta);  // 0 .. 0.99
    double smoothing() const { return m_beta; }
    void setXAxis(int mode);
    void setLogY(bool on);
    bool selectRun(int64_t run_id);
    int64_t currentRun() const { return m_runId; }
    void setTesseraBinary(const QString& path) { m_bin = path; }
    QCustomPlot* lossPlot() const { return m_lossPlot; }
    QCustomPlot* speedPlot() const { return m_speedPlot; }
    QCustomPlot* memoryPlot() const { return m_memPlot; }
    QCPGraph* trainRawGraph() const { return m_trainRaw; }
    QCPGraph* trainSmoothGraph() const { return m_trainSmooth; }
    QCPGraph* valGraph() const { return m_val; }
    QCPGraph* speedGraph() const { return m_speed; }
    int predictionBandCount() const { return (int)m_bands.size(); }
    // The device table's entry the prediction is for ("H200", "cpu"), whether it is the run's own
    // recorded device, and the line above the memory chart that says so.
    QString predictionDevice() const { return QString::fromStdString(m_predDevice); }
    bool predictionFromRecordedDevice() const { return m_deviceRecorded; }
    QString deviceText() const;
    QString statusText() const;
    tessera::RunController* controller() { return m_ctl.get(); }
    // The step of the newest checkpoint in the project's checkpoint.dir, which Continue resumes;
    // nullopt when there is none (or no checkpoint.dir).
    std::optional<int64_t> resumableStep() const;
    // System metrics (GPU and host over time) and alerts: the loss spikes and non-finite losses
    // (run_alerts.h: the engine's rule) marked on the loss chart, throughput below the
    // prediction marked on the speed chart; one line each (alert_describe) above the charts.
    SystemCharts* systemCharts() const { return m_system; }
    void showSystemTab();
    QStringList alertLines() const;
    const std::vector<tessera::LossAlert>& lossAlerts() const { return m_lossAlerts; }
    const std::vector<tessera::ThroughputAlert>& throughputAlerts() const { return m_speedAlerts; }
    double predictedTokPerS() const { return m_predTokPerS; }
    // Replaces the selected run's data with synthetic series (bench): n points per loss series.
    void loadSynthetic(int n_train, int n_val, int n_speed);

  public Q_SLOTS:
    void setDarkTheme(bool dark);
    void launch();       // a new run from step 0 (`tessera train`)
    void continueRun();  // from the newest checkpoint (`tessera train --resume`)
    void stop();

  private:
    struct Series {
        std::vector<double> step, wall, value;
        int rank = -1;       // the rank whose rows this series keeps (the first seen)
        size_t plotted = 0;  // points already handed to the graph
    };

    void openStore();
    void startRun(const std::vector<std::string>& extra_args);
    void refreshRunButtons(tessera::RunState s);  // Launch / Continue / Stop for the state
    void refreshRuns();
    void resetRunData();
    void loadPrediction();
    void ingest(const std::vector<tessera::MetricRow>& rows);
    void scheduleReplot();
    void rebuildAll();  // x axis / smoothing changed: graphs get their data anew
    void appendGraph(QCPGraph* g, Series& s, const std::vector<double>* values);
    double keyOf(const Series& s, size_t i) const;
    void rebuildMemory();
    void updateStatus();
    void appendConsole(const tessera::ConsoleLine& l);
    void refilterConsole();
    bool lineVisible(const tessera::ConsoleLine& l) const;
    void onControllerState(tessera::RunState s);
    void styleAxes(QCustomPlot* p);
    void rebuildAlerts();  // recomputes the alerts and redraws their marks
    double keyAt(double step, double wall) const;

    ProjectDocument* m_doc;
    std::unique_ptr<tessera::RunController> m_ctl;
    std::optional<tessera::RunStore> m_store;
    QString m_bin;

    // selected run
    int64_t m_runId = 0;
    tessera::RunRow m_run;
    int64_t m_lastRowid = 0;
    int64_t m_tokensPerStep = 0;
    int64_t m_totalSteps = 0;
    bool m_epochOrder = false;  // the run reads its data in epoch order (data.order: epoch)
    double m_epoch = -1;        // its latest train/epoch; -1 = none yet
    Series m_trainLoss, m_valLoss, m_tokPerS, m_stepMs, m_mfu, m_gpuUtil;
    QCPGraph* m_mfuGraph = nullptr;
    QCPGraph* m_utilGraph = nullptr;
    tessera::MeshShape m_mesh;
    std::map<int, double> m_nvmlUsed;      // rank -> largest gpu/memory_used_bytes (the driver)
    std::map<int, double> m_engineDevice;  // rank -> largest mem/device_bytes (the engine)
    std::string m_predDevice;              // the device table entry the prediction is for
    bool m_deviceRecorded = false;         // ... is the run's own recorded device
    bool m_deviceSeen = false;     // the run has a device record (known to the table or not)
    std::vector<double> m_smooth;  // debiased EMA of m_trainLoss.value (full resolution)
    EmaState m_ema;
    double m_beta = 0.6;
    std::map<int, std::array<double, tessera::kMemCategoryCount>> m_mem;  // rank -> peak bytes
    std::vector<double> m_predTotal;  // predicted total peak per rank (bytes)
    double m_predTokPerS = 0;         // the estimator's tokens/s for the run's plan and device
    std::map<int, int> m_nodeOf;      // rank -> node index (hosts in the order ranks name them)
    std::vector<tessera::AlertPoint> m_lossRows, m_speedRows;  // every rank's rows, for the alerts
    std::vector<tessera::LossAlert> m_lossAlerts;
    std::vector<tessera::ThroughputAlert> m_speedAlerts;
    std::vector<QCPAbstractItem*> m_alertItems;
    QCPGraph* m_alertGraph = nullptr;  // spike points on the loss chart
    QCPGraph* m_predSpeed = nullptr;   // the predicted tokens/s (dashed)
    bool m_memDirty = false, m_dataDirty = false, m_fullRebuild = false;
    std::vector<int64_t> m_runIds;
    bool m_followNewRun = false;
    int64_t m_maxRunIdAtLaunch = 0;

    // console
    std::deque<tessera::ConsoleLine> m_lines;
    QStringList m_coords;

    int m_xMode = XStep;
    bool m_logY = false;
    bool m_dark = false;

    QTimer m_pollTimer, m_replotTimer;
    QComboBox* m_runCombo;
    QPushButton* m_launchBtn;
    QPushButton* m_continueBtn;
    QPushButton* m_stopBtn;
    QComboBox* m_xCombo;
    QCheckBox* m_logCheck;
    QSlider* m_smoothSlider;
    QLabel* m_smoothLabel;
    QLabel* m_status;
    QCustomPlot* m_lossPlot;
    QCustomPlot* m_speedPlot;
    QCustomPlot* m_memPlot;
    QLabel* m_deviceLabel;
    QCPGraph* m_trainRaw = nullptr;
    QCPGraph* m_trainSmooth = nullptr;
    QCPGraph* m_val = nullptr;
    QCPGraph* m_speed = nullptr;
    std::vector<QCPItemRect*> m_bands;
    QComboBox* m_rankFilter;
    QPlainTextEdit* m_console;
    QTabWidget* m_bottomTabs;
    SystemCharts* m_system;
    QLabel* m_alertLabel;
};

}  // namespace tessera::studio
