// The pipeline partition editor: the model's layer stack (embedding, transformer blocks, final LN
// + head) drawn left to right, each layer as wide as its FLOPs (gpt_layer_specs), on the lane of
// the pipeline stage that runs it (pp lanes; with virtual stages a stage's chunks interleave along
// the stack). Each block is split into its TP shards; the DP replica count is drawn at the right.
// Dragging a chunk boundary emits stagesEdited with the new parallel.stages (the page turns a
// whole drag into one undoable edit via dragStarted's serial number).
#pragma once
#include <QRectF>
#include <QWidget>
#include <vector>

#include "engine/config/config.h"

namespace tessera::studio {

class PartitionEditor : public QWidget {
    Q_OBJECT
  public:
    explicit PartitionEditor(QWidget* parent = nullptr);

    void setConfig(const tessera::RunConfig& cfg);
    const std::vector<int>& blocksPerChunk() const { return m_chunks; }
    // What the editor says instead of lanes when there are no layers (an MLP, or no model);
    // empty otherwise.
    QString emptyMessage() const;
    // Widget x of the boundary after chunk k (k in 0 .. chunks-2): where a drag starts.
    int boundaryX(int k) const;
    // Widget x of the right edge of block b (1-based block index; 0 = the embedding).
    int blockEdgeX(int b) const;
    int laneCenterY(int stage) const;
    // Marks a stage's lane as the plan's memory or time outlier (plan_stage_imbalance): an amber
    // outline (grey when no move helps) and `tag` in the lane beside the stage's layers; `tip` is
    // the tag's tooltip (the advice). stage -1 clears it.
    void setOutlier(int stage, const QString& tag, const QString& tip, bool fixable);
    int outlierStage() const { return m_outlier; }
    QString outlierTag() const { return m_outlierTag; }

    QSize sizeHint() const override { return {760, 200}; }
    QSize minimumSizeHint() const override { return {360, 140}; }

  Q_SIGNALS:
    void dragStarted(int serial);                       // a new drag: one undo step per serial
    void stagesEdited(const std::vector<int>& stages);  // blocks per chunk after a move

  protected:
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mouseReleaseEvent(QMouseEvent*) override;
    bool event(QEvent*) override;  // tooltips

  private:
    double layerX(int layer) const;       // left edge of layer (0 = embedding .. L+1 = head), px
    int hitBoundary(int x) const;         // boundary within a few px of x, or -1
    bool dropBlock(int block, int lane);  // move a block (and its run to the boundary) to a lane
    QRectF plotRect() const;
    int layerAt(int x) const;

    tessera::RunConfig m_cfg;
    std::vector<double> m_cost;  // per layer: forward FLOPs per token (embedding .. head)
    std::vector<int> m_chunks;   // blocks per chunk
    int m_pp = 1, m_tp = 1, m_dp = 1, m_v = 1;
    int m_drag = -1;       // boundary being dragged
    int m_blockDrag = -1;  // transformer block picked up (dropped on a lane)
    int m_dragSerial = 0;
    int m_hover = -1;
    int m_outlier = -1;
    QString m_outlierTag, m_outlierTip;
    QRectF m_outlierBox;  // where the tag was drawn
    bool m_outlierFixable = false;
};

}  // namespace tessera::studio
