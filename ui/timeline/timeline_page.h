// Timeline page: pick a run and a step; the measured per-stage spans of that step (forward,
// backward, recv, optimizer) as a Gantt chart above a plan's schedule simulated
// (schedule_simulate) from the run's measured per-layer forward/backward times — the run's plan,
// or (picked) the project's as edited since, where those times carry over to it; for a
// run without layer times the run's plan from the step's per-stage times; before any run, the
// estimator's predicted times — with its critical path outlined and its bubbles hatched; the
// measured, simulated and ideal (f = 1, b = 2) bubbles.
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
    // Simulate the project's plan (as edited since the run) instead of the run's.
    void setSimulateProject(bool project);
    int64_t currentRun() const;  // -1 = none
    int64_t currentStep() const;
    double measuredBubble() const { return m_measuredBubble; }    // -1 = unknown
    double predictedBubble() const { return m_predictedBubble; }  // -1 = unknown
    // the ranks' mean pipeline/rank_idle metric, -1 = none
    double loggedRankIdle() const { return m_loggedRankIdle; }
    double simulatedBubble() const {
        return m_simulatedBubble;
    }  // the simulated chart's, -1 = none
    bool simulatedFromMeasured() const { return m_simulatedFromMeasured; }  // else predicted times
    // measured per-layer times (else per-stage, or predicted)
    bool simulatedFromLayers() const { return m_simulatedFromLayers; }
    // the simulated plan is the project's (edited after the run), not the run's
    bool simulatesProject() const { return m_simulatesProject; }
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
    QComboBox* m_simPlanBox;
    QLabel* m_summary;
    QLabel* m_status;
    GanttView* m_measured;
    GanttView* m_ideal;
    double m_measuredBubble = -1, m_predictedBubble = -1, m_loggedRankIdle = -1,
           m_simulatedBubble = -1;
    bool m_simulatedFromMeasured = false, m_simulatedFromLayers = false, m_simulatesProject = false;

    void onRunChanged();
    void showStep();
    void showPredicted(const tessera::RunConfig& cfg,
                       const std::vector<tessera::DeviceRecord>& devices, const QString& what);
};

}  // namespace tessera::studio
