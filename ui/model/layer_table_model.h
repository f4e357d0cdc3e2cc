// The Model page's layer table: one row per LayerSpec (name, kind, what the layer is made of,
// parameters, activation bytes per sample, forward FLOPs per token) and a bold totals row. The
// figures and texts come from model_facts (Qt-free); this class only formats them. Qt::UserRole
// gives the raw number; the Structure column's tooltip lists each part's parameters.
#pragma once
#include <QAbstractTableModel>
#include <vector>

#include "engine/model/model.h"
#include "ui/model/model_facts.h"

namespace tessera::studio {

class LayerTableModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    enum Column { Name, Kind, Structure, Params, ActivationBytes, Flops, ColumnCount };

    explicit LayerTableModel(QObject* parent = nullptr);
    // `structure`: one per spec (model_layer_structure), or none (the column stays empty)
    void setSpecs(std::vector<tessera::LayerSpec> specs,
                  std::vector<tessera::LayerStructure> structure = {});
    const std::vector<tessera::LayerSpec>& specs() const { return m_specs; }
    bool isTotalsRow(int row) const { return !m_specs.empty() && row == (int)m_specs.size(); }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  private:
    std::vector<tessera::LayerSpec> m_specs;
    std::vector<tessera::LayerStructure> m_structure;
    tessera::LayerSpec m_totals;
};

}  // namespace tessera::studio
