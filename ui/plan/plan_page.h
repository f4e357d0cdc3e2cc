// The Plan page: how the run is split over GPUs. A partition editor (drag stage boundaries), the
// GPU grid in mesh order, the plan's controls with plan_validate's issues next to each, the live
// prediction (estimate_plan: per-GPU memory by category vs capacity, step time, tokens/s, MFU,
// bubble, communication), "Balance stages" (balance_stages) and "Suggest a plan" (the plans
// that fit a target global batch, plan_rank_for_batch, each with why it loses to the one above).
// Answers next to the controls (engine/plan/plan_advice.h, computed on a short coalescing timer
// after each change): what fits (largest micro-batch, longest sequence), the cheapest
// recompute/offload policy that fits (one click applies it), a first or last stage made the
// outlier by the embedding or head (one click moves the blocks); up to three pinned plans drawn
// side by side (CandidatesView).
// Every change is one ProjectDocument::edit (a drag is one undo step); the page redraws from
// configChanged(). With cluster hosts (Hosts page) the GPUs are their slots, drawn host by host.
// The modelling is Qt-free (engine/plan); the widgets only draw it.
#pragma once
#include <QMap>
#include <QTimer>
#include <QWidget>
#include <memory>
#include <vector>

#include "engine/plan/estimator.h"
#include "engine/plan/plan_advice.h"
#include "engine/plan/plan_search.h"
#include "ui/common/latest_job.h"

class QComboBox;
class QSpinBox;
class QCheckBox;
class QGroupBox;
class QLabel;
class QListWidget;
class QPushButton;
class QHBoxLayout;
class QGridLayout;

namespace tessera::studio {

class ProjectDocument;
class PartitionEditor;
class GpuGrid;
class MemoryChart;
class CandidatesView;

class PlanPage : public QWidget {
    Q_OBJECT
  public:
    explicit PlanPage(ProjectDocument* doc, QWidget* parent = nullptr);

    PartitionEditor* partitionEditor() const { return m_editor; }
    GpuGrid* gpuGrid() const { return m_grid; }
    QListWidget* suggestionList() const { return m_suggestList; }
    QString suggestionMessage() const;  // the line above the list: searching, stopped, its heading
    // "step 0.18 s | 4.6 M tok/s | MFU 24.1% | bubble 9.7% | comm 1.2 GiB/step" (or why not)
    QString predictionText() const;
    QString issueText(const QString& key) const;  // what the control for `key` shows ("" = fine)
    QString validityText() const;
    bool planValid() const { return m_valid; }
    QString balanceMessage() const;
    QString overCapacityText() const;
    const tessera::PlanEstimate& estimate() const { return m_estimate; }
    bool hasEstimate() const { return m_hasEstimate; }

    // the answers (updateAnswers fills them; "" before)
    QString fitsText() const;
    QString policyText() const;
    QString imbalanceText() const;
    const tessera::PolicyAdvice& policyAdvice() const { return m_policy; }
    const tessera::StageImbalance& stageImbalance() const { return m_imbalance; }
    CandidatesView* candidatesView() const { return m_candidates; }
    bool answersPending() const;       // answers asked for or being worked out
    bool searching() const;            // a "Suggest plans" search runs
    void setGlobalBatch(int samples);  // the target of "Suggest a plan"

    void setDeviceName(const QString& name);  // H100 | H200 | A100-80GB | A100-40GB | cpu
    void setGpuCount(int gpus);               // GPUs available (the grid; validation)

  public Q_SLOTS:
    void setDarkTheme(bool dark);  // the shell calls it when the theme changes (plots follow)
    void balanceStages();  // balance_stages -> one undoable edit, or the reason in the label
    // Fills the list with plan_rank_for_batch's top 5, searched off the GUI thread ("searching:
    // k of N layouts"); pressed again while it runs ("Stop"), stops the search.
    void suggestPlans();
    void applySuggestion(int row);
    // What fits, policy advice, stage imbalance (every change of the plan asks), worked out off
    // the GUI thread; the answers shown stay, greyed, until the current plan's arrive.
    void updateAnswers();
    void applyPolicy();        // the advised recompute/offload policy, one undoable edit
    void applyImbalanceFix();  // the advised block move, one undoable edit
    void pinCurrentPlan();     // up to three; the oldest drops out
    void clearPins();

  private:
    struct Answers;
    static Answers computeAnswers(const tessera::RunConfig& cfg, const tessera::DeviceSpec& dev,
                                  bool fits);
    void showAnswers(const Answers& a, const tessera::RunConfig& cfg);
    void clearAnswers();
    void showSuggestions(std::vector<tessera::RankedPlan> plans);
    void stopSearch();   // a running search skips its layouts left; its result is dropped
    void searchEnded();  // the button and progress back to idle
    void buildUi();
    void refresh();  // config -> controls, issues, editor, grid, prediction
    void editParallel(const QString& text, const std::function<void(tessera::RunConfig&)>& change);
    void rebuildRecompute(int pp);
    void dropStaleSuggestions();  // a list for other GPUs than the page now shows
    QLabel* issueLabel(const QString& key);
    int gpuCount() const;
    QString rankNoun() const;  // what one rank is called on the chosen device: "GPU" or "rank"

    ProjectDocument* m_doc;
    PartitionEditor* m_editor;
    GpuGrid* m_grid;
    MemoryChart* m_chart;
    QComboBox *m_device, *m_schedule, *m_zero, *m_precision;
    QSpinBox *m_gpus, *m_perNode, *m_dp, *m_tp, *m_pp, *m_virtual, *m_micro, *m_accum;
    QCheckBox *m_offloadAct, *m_offloadOpt;
    QWidget* m_recomputeBox;
    QGridLayout* m_recomputeLayout;
    std::vector<QComboBox*> m_recompute;
    QLabel *m_valid_label, *m_prediction, *m_over, *m_balanceMsg, *m_suggestMsg;
    QLabel *m_gpusLabel, *m_perNodeLabel;  // "GPUs ...", or "Ranks ..." for CPU ranks
    QGroupBox* m_gridBox;
    QPushButton *m_balance, *m_suggest, *m_addStage, *m_removeStage;
    QListWidget* m_suggestList;
    QSpinBox* m_globalBatch;
    QLabel *m_fitsLabel, *m_policyLabel, *m_imbalanceLabel;
    QPushButton *m_applyPolicy, *m_applyImbalance, *m_pin, *m_clearPins;
    CandidatesView* m_candidates;
    QLabel* m_pinHint;
    QString m_suggestKey;  // "16 x H200": the GPUs the suggestions are for
    LatestJob* m_answersJob;
    LatestJob* m_searchJob;
    std::shared_ptr<tessera::PlanSearchControl> m_search;  // the running search's, else null
    QTimer m_searchProgress;
    tessera::PolicyAdvice m_policy;
    tessera::StageImbalance m_imbalance;
    bool m_globalBatchFollows = true;
    QMap<QString, QLabel*> m_issues;
    std::vector<tessera::RankedPlan> m_suggestions;
    tessera::PlanEstimate m_estimate;
    bool m_hasEstimate = false;
    bool m_valid = false;
    bool m_gpusFollowWorld = true;
    bool m_updating = false;
    int m_dragMergeBase = 0x504c0000;  // "PL": one merge id per drag
    int m_dragMergeId = -1;
};

}  // namespace tessera::studio
