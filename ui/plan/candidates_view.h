// Pinned plan candidates side by side (up to three): per candidate its summary, one bar per GPU of
// its predicted device peak (stacked by memory category) against the capacity, on one scale
// for all candidates, and its step time in parts (compute, exposed communication, bubble,
// offload) as one stacked bar, also on a shared scale. Draws only: the Plan page computes the
// estimates (engine/plan) and pins or unpins.
#pragma once
#include <QString>
#include <QWidget>
#include <vector>

#include "engine/plan/estimator.h"
#include "engine/plan/plan_advice.h"

namespace tessera::studio {

class CandidatesView : public QWidget {
    Q_OBJECT
  public:
    struct Candidate {
        QString title;  // plan_summary
        tessera::PlanEstimate estimate;
        tessera::StepBreakdown parts;
    };
    static constexpr int kMaxCandidates = 3;

    explicit CandidatesView(QWidget* parent = nullptr);
    void setCandidates(std::vector<Candidate> c);
    const std::vector<Candidate>& candidates() const { return m_candidates; }
    QSize sizeHint() const override { return {600, 190}; }

  protected:
    void paintEvent(QPaintEvent*) override;

  private:
    std::vector<Candidate> m_candidates;
};

}  // namespace tessera::studio
