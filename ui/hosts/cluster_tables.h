// The Hosts page's two tables as item models over the open project's `cluster:` section: the
// hosts (host, user, port, slots, the ranks they get, identity file, address) and the environment
// passed to remote ranks (NAME, value). A model holds no state of its own: it reads the
// ProjectDocument and resets on configChanged(). Every change goes through clusterTryEdit(): one
// undoable edit, or refused before it reaches the document (editRejected names the key and why).
#pragma once
#include <QAbstractTableModel>
#include <functional>
#include <vector>

#include "engine/config/cluster_rules.h"
#include "engine/config/config.h"
#include "engine/launch/cluster.h"

namespace tessera::studio {

class ProjectDocument;

// The host table's columns, in order.
enum class HostColumn { host, user, port, slots, ranks, identity, addr };
constexpr int kHostColumnCount = 7;
const char* cluster_host_column_name(HostColumn c);

// Applies `change` to a copy of the document's config and validates the copy's cluster
// (the engine's rules: engine/config/cluster_rules.h). Returns "" and pushes one undoable edit
// named `text`, or returns the first problem the change would add and leaves the document as it
// was.
QString clusterTryEdit(ProjectDocument* doc, const QString& text,
                       const std::function<void(tessera::RunConfig&)>& change);

class HostTableModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    explicit HostTableModel(ProjectDocument* doc, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;

    // Each is one undoable edit, or refused (editRejected). An edit of the hosts of a project that
    // reads them from `hostfile:` writes them into project.yaml instead (the file is left alone).
    bool addHost();
    bool removeHost(int row);
    bool moveHost(int row, int delta);
    bool replaceHosts(const std::vector<tessera::ClusterHost>& hosts, const QString& text);

  Q_SIGNALS:
    void editRejected(const QString& key, const QString& message);
    void editApplied();

  private:
    bool tryEdit(const QString& key, const QString& text,
                 const std::function<void(tessera::RunConfig&)>& change);
    void reload();  // the document's hosts -> the snapshot below (a model reset)
    ProjectDocument* m_doc;
    std::vector<tessera::ClusterHost> m_hosts;
    std::vector<HostRanks> m_ranks;
    std::vector<tessera::ConfigProblem> m_problems;
};

class EnvTableModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    explicit EnvTableModel(ProjectDocument* doc, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;

    bool addVariable();  // NAME1, NAME2, ... = "" (renamed in place)
    bool removeVariable(int row);

  Q_SIGNALS:
    void editRejected(const QString& key, const QString& message);
    void editApplied();

  private:
    bool tryEdit(const QString& key, const QString& text,
                 const std::function<void(tessera::RunConfig&)>& change);
    void reload();
    ProjectDocument* m_doc;
    std::vector<std::pair<std::string, std::string>> m_env;
    std::vector<tessera::ConfigProblem> m_problems;
};

}  // namespace tessera::studio
