// The GPU grid: nodes x GPUs per node, each GPU coloured by the (stage, TP rank) of the rank it
// runs in engine/parallel/mesh.h order (global rank = tp + TP (dp + DP pp), filled node by node),
// labelled with its rank and DP replica; GPUs beyond the world are idle (grey), GPUs over memory
// capacity get a red frame. Tooltips give the global rank and coordinates. A project with
// cluster hosts shows one row per host instead (its name, its slots), ranks filling the hosts in
// order as engine/launch/cluster.h cluster_place() places them.
#pragma once
#include <QStringList>
#include <QWidget>
#include <vector>

#include "engine/parallel/mesh.h"

namespace tessera::studio {

class GpuGrid : public QWidget {
    Q_OBJECT
  public:
    explicit GpuGrid(QWidget* parent = nullptr);

    // gpus: devices shown; over[r]: rank r is over capacity (may be shorter than the world).
    void setMesh(const tessera::MeshShape& mesh, int gpus, int gpusPerNode,
                 const std::vector<bool>& over);
    // Rows are the cluster's hosts (label, slots each) instead of nodes of gpusPerNode; the GPUs
    // shown are then the hosts' slots. Empty lists go back to nodes.
    void setHosts(const QStringList& labels, const std::vector<int>& slots);
    // CPU ranks: rows are hosts of ranks ("host 0", "host 0 rank 3"), not nodes of GPUs.
    void setCpuRanks(bool cpu);
    int rowCount() const { return int(m_rowStart.size()); }
    int gpuCount() const { return m_gpus; }  // cells drawn
    QString rowLabel(int row) const;
    int rowOf(int gpu) const;  // the node or host row GPU g is drawn in
    // The cell rectangle of GPU g (g = global rank: row by row, left to right).
    QRect cellRect(int gpu) const;
    QString cellToolTip(int gpu) const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;  // every row, at its smallest

  protected:
    void paintEvent(QPaintEvent*) override;
    bool event(QEvent*) override;

  private:
    void layoutRows();  // m_rowStart / m_gpus from the nodes or the hosts
    int cellW() const;
    int cellH() const;
    int labelW() const;
    int rowLength(int row) const;
    tessera::MeshShape m_mesh;
    int m_gpus = 1, m_perNode = 8;
    int m_nodeGpus = 1;  // setMesh's count (the rows when there are no hosts)
    std::vector<bool> m_over;
    QStringList m_hostLabels;  // empty: rows are nodes
    bool m_cpu = false;        // setCpuRanks
    std::vector<int> m_hostSlots;
    std::vector<int> m_rowStart;  // first GPU of each row
};

}  // namespace tessera::studio
