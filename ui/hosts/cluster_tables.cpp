// The host and environment tables (cluster_tables.h).
#include "ui/hosts/cluster_tables.h"

#include <QBrush>
#include <QColor>

#include "ui/common/project_document.h"

namespace tessera::studio {

namespace {

const QColor kIssueBackground(253, 236, 234);  // the error banner's tint

std::string host_field_key(int row, HostColumn c) {
    static const char* names[] = {"host", "user", "port", "slots", "ranks", "identity", "addr"};
    return "cluster.hosts[" + std::to_string(row) + "]." + names[int(c)];
}

// The problems of one key, exactly (a cell shows its own problem only).
QString issue_of(const std::vector<tessera::ConfigProblem>& problems, const std::string& key) {
    QStringList s;
    for (const auto& p : problems)
        if (p.key == key) s << QString::fromStdString(p.text());
    return s.join('\n');
}

}  // namespace

const char* cluster_host_column_name(HostColumn c) {
    static const char* const kNames[kHostColumnCount] = {
        "Host", "User", "Port", "Slots", "Ranks", "Identity file", "Address"};
    return kNames[int(c)];
}

QString clusterTryEdit(ProjectDocument* doc, const QString& text,
                       const std::function<void(tessera::RunConfig&)>& change) {
    tessera::RunConfig after = doc->config();
    change(after);
    const std::string problem = tessera::cluster_new_problem(doc->config(), after);
    if (!problem.empty()) return QString::fromStdString(problem);
    doc->edit(text, [&after](tessera::RunConfig& c) { c.cluster = after.cluster; });
    return {};
}

// ----------------------------------------------------------------------------
// hosts

HostTableModel::HostTableModel(ProjectDocument* doc, QObject* parent)
    : QAbstractTableModel(parent), m_doc(doc) {
    connect(m_doc, &ProjectDocument::configChanged, this, &HostTableModel::reload);
    reload();
}

void HostTableModel::reload() {
    beginResetModel();
    m_hosts = m_doc->config().cluster.hosts;
    m_ranks = tessera::cluster_host_ranks(m_doc->config());
    m_problems = tessera::cluster_problems(m_doc->config());
    endResetModel();
}

int HostTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(m_hosts.size());
}

int HostTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : kHostColumnCount;
}

QVariant HostTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (role != Qt::DisplayRole) return {};
    if (o == Qt::Vertical) return section + 1;
    if (section < 0 || section >= kHostColumnCount) return {};
    return QString::fromUtf8(cluster_host_column_name(HostColumn(section)));
}

Qt::ItemFlags HostTableModel::flags(const QModelIndex& index) const {
    if (!index.isValid()) return Qt::NoItemFlags;
    Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
    if (HostColumn(index.column()) != HostColumn::ranks) f |= Qt::ItemIsEditable;
    return f;
}

QVariant HostTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= kHostColumnCount)
        return {};
    const tessera::ClusterHost& h = m_hosts[size_t(index.row())];
    const HostRanks r =
        index.row() < int(m_ranks.size()) ? m_ranks[size_t(index.row())] : HostRanks{};
    const auto col = HostColumn(index.column());
    const QString issue = issue_of(m_problems, host_field_key(index.row(), col));
    if (role == Qt::BackgroundRole) return issue.isEmpty() ? QVariant() : QBrush(kIssueBackground);
    if (role == Qt::ToolTipRole) {
        if (!issue.isEmpty()) return issue;
        if (col == HostColumn::ranks)
            return r.count ? QString("global ranks %1 to %2 run here")
                                 .arg(r.first)
                                 .arg(r.first + r.count - 1)
                           : QString("unused: the plan's ranks fit on the hosts above");
        if (col == HostColumn::addr)
            return QString("the address the other hosts reach this one at (empty = the host)");
        if (col == HostColumn::identity)
            return QString("private key file (empty = ssh's defaults and agent)");
        return {};
    }
    if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
    switch (col) {
        case HostColumn::host:
            return QString::fromStdString(h.host);
        case HostColumn::user:
            return QString::fromStdString(h.user);
        case HostColumn::port:
            return h.port;
        case HostColumn::slots:
            return h.slots;
        case HostColumn::ranks:
            if (!r.count) return QString("unused");
            return r.count == 1 ? QString::number(r.first)
                                : QString("%1–%2").arg(r.first).arg(r.first + r.count - 1);
        case HostColumn::identity:
            return QString::fromStdString(h.identity);
        case HostColumn::addr:
            return QString::fromStdString(h.addr);
    }
    return {};
}

bool HostTableModel::tryEdit(const QString& key, const QString& text,
                             const std::function<void(tessera::RunConfig&)>& change) {
    const QString problem = clusterTryEdit(m_doc, text, [&change](tessera::RunConfig& c) {
        change(c);
        c.cluster.hostfile.clear();  // the hosts now live in project.yaml
    });
    if (!problem.isEmpty()) {
        Q_EMIT editRejected(key, problem);
        return false;
    }
    Q_EMIT editApplied();
    return true;
}

bool HostTableModel::setData(const QModelIndex& index, const QVariant& value, int role) {
    if (role != Qt::EditRole || !index.isValid() || index.row() >= rowCount()) return false;
    const int row = index.row();
    const auto col = HostColumn(index.column());
    const std::string key = host_field_key(row, col);
    auto intOf = [&](int* out) {
        bool ok = false;
        *out = value.toString().trimmed().toInt(&ok);
        if (!ok)
            Q_EMIT editRejected(QString::fromStdString(key),
                                QString("%1: expected a whole number, found '%2'")
                                    .arg(QString::fromStdString(key), value.toString()));
        return ok;
    };
    const std::string s = value.toString().trimmed().toStdString();
    const QString name = QString::fromUtf8(cluster_host_column_name(col)).toLower();
    std::function<void(tessera::RunConfig&)> change;
    int n = 0;
    switch (col) {
        case HostColumn::host:
            change = [&](tessera::RunConfig& c) { c.cluster.hosts[row].host = s; };
            break;
        case HostColumn::user:
            change = [&](tessera::RunConfig& c) { c.cluster.hosts[row].user = s; };
            break;
        case HostColumn::identity:
            change = [&](tessera::RunConfig& c) { c.cluster.hosts[row].identity = s; };
            break;
        case HostColumn::addr:
            change = [&](tessera::RunConfig& c) { c.cluster.hosts[row].addr = s; };
            break;
        case HostColumn::port:
            if (!intOf(&n)) return false;
            change = [&](tessera::RunConfig& c) { c.cluster.hosts[row].port = n; };
            break;
        case HostColumn::slots:
            if (!intOf(&n)) return false;
            change = [&](tessera::RunConfig& c) { c.cluster.hosts[row].slots = n; };
            break;
        case HostColumn::ranks:
            return false;
    }
    return tryEdit(QString::fromStdString(key), QString("Set %1 of host %2").arg(name).arg(row + 1),
                   change);
}

bool HostTableModel::addHost() {
    // a placeholder the user renames: unique, valid, one slot
    int n = int(m_hosts.size()) + 1;
    auto taken = [this](const std::string& h) {
        for (const auto& x : m_hosts)
            if (x.host == h && x.port == 22) return true;
        return false;
    };
    while (taken("node" + std::to_string(n))) ++n;
    tessera::ClusterHost h;
    h.host = "node" + std::to_string(n);
    return tryEdit("cluster.hosts", "Add host",
                   [h](tessera::RunConfig& c) { c.cluster.hosts.push_back(h); });
}

bool HostTableModel::removeHost(int row) {
    if (row < 0 || row >= rowCount()) return false;
    return tryEdit(
        "cluster.hosts",
        QString("Remove host %1").arg(QString::fromStdString(m_hosts[size_t(row)].host)),
        [row](tessera::RunConfig& c) { c.cluster.hosts.erase(c.cluster.hosts.begin() + row); });
}

bool HostTableModel::moveHost(int row, int delta) {
    const int to = row + delta;
    if (row < 0 || row >= rowCount() || to < 0 || to >= rowCount() || delta == 0) return false;
    return tryEdit("cluster.hosts",
                   QString("Move host %1").arg(QString::fromStdString(m_hosts[size_t(row)].host)),
                   [row, to](tessera::RunConfig& c) {
                       auto& v = c.cluster.hosts;
                       auto h = v[size_t(row)];
                       v.erase(v.begin() + row);
                       v.insert(v.begin() + to, h);
                   });
}

bool HostTableModel::replaceHosts(const std::vector<tessera::ClusterHost>& hosts,
                                  const QString& text) {
    return tryEdit("cluster.hosts", text,
                   [hosts](tessera::RunConfig& c) { c.cluster.hosts = hosts; });
}

// ----------------------------------------------------------------------------
// environment

EnvTableModel::EnvTableModel(ProjectDocument* doc, QObject* parent)
    : QAbstractTableModel(parent), m_doc(doc) {
    connect(m_doc, &ProjectDocument::configChanged, this, &EnvTableModel::reload);
    reload();
}

void EnvTableModel::reload() {
    beginResetModel();
    m_env = m_doc->config().cluster.env;
    m_problems = tessera::cluster_problems(m_doc->config());
    endResetModel();
}

int EnvTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(m_env.size());
}
int EnvTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : 2;
}

QVariant EnvTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (role != Qt::DisplayRole) return {};
    if (o == Qt::Vertical) return section + 1;
    return section == 0 ? QString("Name") : section == 1 ? QString("Value") : QVariant();
}

Qt::ItemFlags EnvTableModel::flags(const QModelIndex& index) const {
    return index.isValid() ? Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsEditable
                           : Qt::NoItemFlags;
}

QVariant EnvTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() > 1) return {};
    const auto& [name, value] = m_env[size_t(index.row())];
    const QString issue =
        index.column() == 0
            ? issue_of(m_problems, "cluster.env[" + std::to_string(index.row()) + "]")
            : QString();
    if (role == Qt::BackgroundRole) return issue.isEmpty() ? QVariant() : QBrush(kIssueBackground);
    if (role == Qt::ToolTipRole) return issue.isEmpty() ? QVariant() : issue;
    if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
    return QString::fromStdString(index.column() == 0 ? name : value);
}

bool EnvTableModel::tryEdit(const QString& key, const QString& text,
                            const std::function<void(tessera::RunConfig&)>& change) {
    const QString problem = clusterTryEdit(m_doc, text, change);
    if (!problem.isEmpty()) {
        Q_EMIT editRejected(key, problem);
        return false;
    }
    Q_EMIT editApplied();
    return true;
}

bool EnvTableModel::setData(const QModelIndex& index, const QVariant& value, int role) {
    if (role != Qt::EditRole || !index.isValid() || index.row() >= rowCount() || index.column() > 1)
        return false;
    const int row = index.row(), col = index.column();
    // a name is trimmed (NAME = value is a common slip); a value is kept byte for byte
    const std::string s =
        col == 0 ? value.toString().trimmed().toStdString() : value.toString().toStdString();
    const QString key = QString("cluster.env[%1]").arg(row);
    return tryEdit(key,
                   col == 0
                       ? QString("Rename variable %1").arg(QString::fromStdString(s))
                       : QString("Set %1").arg(QString::fromStdString(m_env[size_t(row)].first)),
                   [row, col, s](tessera::RunConfig& c) {
                       auto& e = c.cluster.env[size_t(row)];
                       (col == 0 ? e.first : e.second) = s;
                   });
}

bool EnvTableModel::addVariable() {
    int n = 1;
    auto taken = [this](const std::string& name) {
        for (const auto& e : m_env)
            if (e.first == name) return true;
        return false;
    };
    while (taken("NAME" + std::to_string(n))) ++n;
    const std::string name = "NAME" + std::to_string(n);
    return tryEdit("cluster.env", "Add environment variable",
                   [name](tessera::RunConfig& c) { c.cluster.env.emplace_back(name, ""); });
}

bool EnvTableModel::removeVariable(int row) {
    if (row < 0 || row >= rowCount()) return false;
    return tryEdit(
        "cluster.env", QString("Remove %1").arg(QString::fromStdString(m_env[size_t(row)].first)),
        [row](tessera::RunConfig& c) { c.cluster.env.erase(c.cluster.env.begin() + row); });
}

}  // namespace tessera::studio
