// Timeline page: pick a run and a step; the measured per-stage spans of that step (forward,
// backward, recv, optimizer) as a Gantt chart above the same plan's schedule simulated
// (schedule_simulate) with that step's measured per-stage forward/backward times — or, for a step
// without spans and before any run, the estimator's predicted times — with its critical path
// outlined and its bubbles hatched; the measured, simulated and ideal (f = 1, b = 2) bubbles.
// Reads the project's runs.db read-only; never writes.
#pragma once
#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

#include "engine/config/config.h"
#include "engine/store/run_store.h"

class QComboBox;
class QLabel;
class QSpinBox;

namespace tessera::studio {

class GanttView;
class ProjectDocument;

class TimelinePage : public QWidget {
    Q_OBJECT
  public:
    explicit TimelinePage(ProjectDocument* doc, QWidget* parent = nullptr);
    ~TimelinePage() override;

    void refresh();                  // re-reads the run list from the project's runs.db
    bool selectRun(int64_t run_id);  // false if the run is not listed
    void setStep(int64_t step);      // 1-based, as in the metrics and the console
    int64_t currentRun() const;      // -1 = none
    int64_t currentStep() const;
    double measuredBubble() const { return m_measuredBubble; }    // -1 = unknown
    double predictedBubble() const { return m_predictedBubble; }  // -1 = unknown
    // the ranks' mean pipeline/rank_idle metric, -1 = none
    double loggedRankIdle() const { return m_loggedRankIdle; }
    double simulatedBubble() const {
        return m_simulatedBubble;
    }  // the simulated chart's, -1 = none
    bool simulatedFromMeasured() const { return m_simulatedFromMeasured; }  // else predicted times
    GanttView* measuredView() const { return m_measured; }
    GanttView* idealView() const { return m_ideal; }  // the simulated schedule (see above)
    QString statusText() const;

  Q_SIGNALS:
    void loadFailed(const QString& message);

  private:
    ProjectDocument* m_doc;
    std::unique_ptr<tessera::RunStore> m_store;
    std::vector<tessera::RunRow> m_runs;
    QComboBox* m_runBox;
    QSpinBox* m_stepBox;
    QLabel* m_summary;
    QLabel* m_status;
    GanttView* m_measured;
    GanttView* m_ideal;
    double m_measuredBubble = -1, m_predictedBubble = -1, m_loggedRankIdle = -1,
           m_simulatedBubble = -1;
    bool m_simulatedFromMeasured = false;

    void onRunChanged();
    void showStep();
    void showPredicted(const tessera::RunConfig& cfg,
                       const std::vector<tessera::DeviceRecord>& devices, const QString& what);
};

}  // namespace tessera::studio
