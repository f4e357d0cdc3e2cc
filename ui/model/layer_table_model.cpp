// LayerTableModel: formats LayerSpec rows plus a totals row (see layer_table_model.h).
#include "ui/model/layer_table_model.h"

#include <QFont>

#include "ui/model/model_facts.h"

namespace tessera::studio {

LayerTableModel::LayerTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void LayerTableModel::setSpecs(std::vector<tessera::LayerSpec> specs,
                               std::vector<tessera::LayerStructure> structure) {
    beginResetModel();
    m_specs = std::move(specs);
    m_structure = std::move(structure);
    m_structure.resize(m_specs.size());
    const tessera::LayerTotals t = tessera::model_layer_totals(m_specs);
    m_totals = {};
    m_totals.name = "total";
    m_totals.params = t.params;
    m_totals.activation_bytes = t.activation_bytes;
    m_totals.flops_per_token = t.flops_per_token;
    endResetModel();
}

int LayerTableModel::rowCount(const QModelIndex& parent) const {
    if (parent.isValid() || m_specs.empty()) return 0;
    return (int)m_specs.size() + 1;
}

int LayerTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant LayerTableModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const bool totals = isTotalsRow(index.row());
    const tessera::LayerSpec& s = totals ? m_totals : m_specs[index.row()];
    const tessera::LayerStructure none;
    const tessera::LayerStructure& st = totals ? none : m_structure[index.row()];
    switch (role) {
        case Qt::DisplayRole:
            switch (index.column()) {
                case Name:
                    return QString::fromStdString(s.name);
                case Kind:
                    return QString::fromStdString(s.kind);
                case Structure:
                    return QString::fromStdString(st.text);
                case Params:
                    return QString::fromStdString(tessera::format_count((double)s.params));
                case ActivationBytes:
                    return QString::fromStdString(
                        tessera::format_bytes((double)s.activation_bytes));
                case Flops:
                    return QString::fromStdString(tessera::format_flops(s.flops_per_token));
            }
            return {};
        case Qt::UserRole:
            switch (index.column()) {
                case Name:
                    return QString::fromStdString(s.name);
                case Kind:
                    return QString::fromStdString(s.kind);
                case Structure:
                    return QString::fromStdString(st.text);
                case Params:
                    return QVariant::fromValue<qlonglong>(s.params);
                case ActivationBytes:
                    return QVariant::fromValue<qlonglong>(s.activation_bytes);
                case Flops:
                    return s.flops_per_token;
            }
            return {};
        case Qt::ToolTipRole:
            if (index.column() == Structure && !st.detail.empty())
                return QString::fromStdString(st.detail);
            if (index.column() == Params) return QString::number(s.params) + tr(" parameters");
            if (index.column() == ActivationBytes)
                return tr("%1 bytes saved for backward per sample (fp32, no recompute)")
                    .arg(s.activation_bytes);
            return {};
        case Qt::TextAlignmentRole:
            if (index.column() >= Params) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
            return QVariant(Qt::AlignLeft | Qt::AlignVCenter);
        case Qt::FontRole:
            if (totals) {
                QFont f;
                f.setBold(true);
                return f;
            }
            return {};
    }
    return {};
}

QVariant LayerTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, o, role);
    switch (section) {
        case Name:
            return tr("Layer");
        case Kind:
            return tr("Kind");
        case Structure:
            return tr("Structure");
        case Params:
            return tr("Parameters");
        case ActivationBytes:
            return tr("Activations / sample");
        case Flops:
            return tr("Forward FLOPs / token");
    }
    return {};
}

}  // namespace tessera::studio
