// The GPU grid: nodes x GPUs per node, each GPU coloured by the (stage, TP rank) of the rank it
// runs in engine/parallel/mesh.h order (global rank = tp + TP (dp + DP pp), filled node by node),
// labelled with its rank and DP replica; GPUs beyond the world are idle (grey), GPUs over memory
// capacity get a red frame. Tooltips give the global rank and coordinates.
#pragma once
#include <QWidget>
#include <vector>

#include "engine/parallel/mesh.h"

namespace tessera::studio {

class GpuGrid : public QWidget {
    Q_OBJECT
public:
    explicit GpuGrid(QWidget* parent = nullptr);

    // gpus: devices shown; over[r]: rank r is over capacity (may be shorter than the world).
    void setMesh(const tessera::MeshShape& mesh, int gpus, int gpusPerNode, const std::vector<bool>& over);
    // The cell rectangle of GPU g (g = node * gpusPerNode + local index).
    QRect cellRect(int gpu) const;
    QString cellToolTip(int gpu) const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override { return {200, 60}; }

protected:
    void paintEvent(QPaintEvent*) override;
    bool event(QEvent*) override;

private:
    int cellW() const;
    tessera::MeshShape m_mesh;
    int m_gpus = 1, m_perNode = 8;
    std::vector<bool> m_over;
};

}  // namespace tessera::studio
