// Config diff of the selected runs: every run's config flattened to (group, key, value) in a fixed,
// parallelism-aware order — groups model, data, train, parallel, runtime; per-stage recompute and
// the layer split spelled out, derived world size and global batch added — and a tree widget with
// one column per run and a "differences only" toggle.
#pragma once
#include <QStringList>
#include <QWidget>
#include <vector>

#include "engine/config/config.h"

class QCheckBox;
class QTreeWidget;

namespace tessera::studio {

struct ConfigEntry {
    QString group, key, value;  // key is the full path, e.g. "parallel.pp"
};

struct ConfigDiffRow {
    QString group, key;
    QStringList values;  // one per run ("" where a run has no such key)
    bool differs = false;
};

std::vector<ConfigEntry> compare_config_flatten(const tessera::RunConfig& cfg);
std::vector<ConfigDiffRow> compare_config_diff(const std::vector<tessera::RunConfig>& configs);
// The same comparison over configs already flattened (one entry list per run): the diff pane and
// the run table's columns of differing keys both come from here.
std::vector<ConfigDiffRow> compare_config_diff_flat(
    const std::vector<std::vector<ConfigEntry>>& flat);

class ConfigDiffView : public QWidget {
    Q_OBJECT
  public:
    explicit ConfigDiffView(QWidget* parent = nullptr);
    void setRuns(const QStringList& runNames, const std::vector<tessera::RunConfig>& configs);
    void setDifferencesOnly(bool on);
    bool differencesOnly() const;
    QStringList visibleKeys() const;  // keys of the rows shown now, in order
    QTreeWidget* tree() const { return m_tree; }

  private:
    QCheckBox* m_only;
    QTreeWidget* m_tree;
    void applyFilter();
};

}  // namespace tessera::studio
