// Timeline page: pick a run and a step; the measured per-stage spans of that step (forward,
// backward, recv, optimizer) as a Gantt chart above the ideal schedule of the same plan
// (schedule_build, f = 1, B = W = 1, scaled to the measured pipeline window), with the measured and
// the predicted bubble. Reads the project's runs.db read-only; never writes.
#pragma once
#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

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

    void refresh();                     // re-reads the run list from the project's runs.db
    bool selectRun(int64_t run_id);     // false if the run is not listed
    void setStep(int64_t step);         // 1-based, as in the metrics and the console
    int64_t currentRun() const;         // -1 = none
    int64_t currentStep() const;
    double measuredBubble() const { return m_measuredBubble; }   // -1 = unknown
    double predictedBubble() const { return m_predictedBubble; } // -1 = unknown
    double loggedBubble() const { return m_loggedBubble; }       // pipeline/bubble metric, -1 = none
    GanttView* measuredView() const { return m_measured; }
    GanttView* idealView() const { return m_ideal; }
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
    double m_measuredBubble = -1, m_predictedBubble = -1, m_loggedBubble = -1;

    void onRunChanged();
    void showStep();
};

}  // namespace tessera::studio
