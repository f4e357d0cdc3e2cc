// HostsPage: the cluster editor and the preflight checklist (hosts_page.h).
#include "ui/hosts/hosts_page.h"

#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>

#include "engine/launch/ssh.h"
#include "ui/common/project_document.h"
#include "ui/hosts/cluster_tables.h"
#include "ui/hosts/preflight_runner.h"

namespace tessera::studio {

namespace {

const char* kIssueStyle = "color: #c62828; font-size: 11px;";

QColor status_color(const std::string& status) {
    if (status == "ok") return QColor(0x2e, 0x7d, 0x32);
    if (status == "warn") return QColor(0xef, 0x8f, 0x00);
    return QColor(0xc6, 0x28, 0x28);
}

// A round status mark (✓ ! ✗ on green / amber / red), legible in both themes.
QIcon status_icon(const std::string& status) {
    QPixmap pm(16, 16);
    pm.fill(Qt::transparent);
    QPainter p(&pm);
    p.setRenderHint(QPainter::Antialiasing);
    p.setPen(Qt::NoPen);
    p.setBrush(status_color(status));
    p.drawEllipse(1, 1, 14, 14);
    p.setPen(QPen(Qt::white, 2));
    QFont f = p.font();
    f.setPixelSize(11);
    f.setBold(true);
    p.setFont(f);
    p.drawText(QRect(0, 0, 16, 16), Qt::AlignCenter,
               status == "ok"     ? QString("✓")
               : status == "warn" ? QString("!")
                                  : QString("✗"));
    return QIcon(pm);
}

// Rows as tall as their wrapped "Found" and "What to do" texts: QTreeView asks a delegate for a
// row's height without the column's width, so long details would be cut to one line.
class WrappingDelegate : public QStyledItemDelegate {
  public:
    explicit WrappingDelegate(QTreeWidget* tree) : QStyledItemDelegate(tree), m_tree(tree) {}
    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override {
        QSize base = QStyledItemDelegate::sizeHint(option, index);
        if (index.column() < 2) return base;
        QStyleOptionViewItem o = option;
        initStyleOption(&o, index);
        const int w = std::max(40, m_tree->columnWidth(index.column()) - 8);
        const QRect r = o.fontMetrics.boundingRect(QRect(0, 0, w, 1 << 20),
                                                   Qt::TextWordWrap | Qt::TextWrapAnywhere, o.text);
        return {base.width(), std::max(base.height(), r.height() + 6)};
    }

  private:
    QTreeWidget* m_tree;
};

// "cluster.hosts[2].host" -> "cluster.hosts" (the label under the table shows the whole group)
QString key_group(const QString& key) {
    const int cut = key.indexOf('[');
    return cut < 0 ? key : key.left(cut);
}

}  // namespace

HostsPage::HostsPage(ProjectDocument* doc, QWidget* parent)
    : QWidget(parent),
      m_doc(doc),
      m_hostModel(new HostTableModel(doc, this)),
      m_envModel(new EnvTableModel(doc, this)),
      m_runner(new PreflightRunner(this)) {
    setObjectName("hostsPage");
    m_confirm = [this](const QString& host, const QStringList& fps) {
        return QMessageBox::question(
                   this, tr("Trust host key"),
                   tr("<p>The host key of <b>%1</b> is not known yet. It offers:</p><pre>%2</pre>"
                      "<p>Compare this with the host's own fingerprint first (on the host: "
                      "<code>ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub</code>). "
                      "Trust it only when they match.</p><p>Trust this key?</p>")
                       .arg(host.toHtmlEscaped(), fps.join('\n').toHtmlEscaped()),
                   QMessageBox::Yes | QMessageBox::No, QMessageBox::No) == QMessageBox::Yes;
    };
    buildUi();
    connect(m_doc, &ProjectDocument::configChanged, this, [this] {
        m_rejected.clear();  // the document moved on: what was refused is history
        refresh();
    });
    connect(m_doc, &ProjectDocument::opened, this, [this] {
        m_runner->cancel();  // its checklist would be another project's
        m_reportHosts.clear();
        m_checklist->clear();
        clearBanner();
        m_status->setText(tr("Not run yet."));
    });
    connect(m_hostModel, &HostTableModel::editRejected, this, &HostsPage::showRejected);
    connect(m_envModel, &EnvTableModel::editRejected, this, &HostsPage::showRejected);
    connect(m_runner, &PreflightRunner::preflightFinished, this, [this](bool ok) {
        showReport();
        setRunning(false, ok ? tr("✓ every host is ready")
                             : tr("✗ some hosts are not ready: see the checks marked ✗"));
    });
    connect(m_runner, &PreflightRunner::trustFinished, this,
            [this](const QString& host, const QString&) {
                m_status->setText(tr("Trusted the host key of %1; checking again…").arg(host));
                runPreflight();  // the checklist shows whether it took
            });
    connect(m_runner, &PreflightRunner::failed, this, [this](const QString& message) {
        showBanner(tr("Preflight could not run."), message);
        setRunning(false, tr("✗ did not run: %1").arg(message.section('\n', 0, 0)));
    });
    connect(m_runner, &PreflightRunner::cancelled, this,
            [this] { setRunning(false, tr("Cancelled.")); });
    refresh();
}

// ----------------------------------------------------------------------------
// building

QLabel* HostsPage::issueLabel(const QString& key) {
    auto* l = new QLabel(this);
    l->setObjectName("issue:" + key);
    l->setWordWrap(true);
    l->setStyleSheet(kIssueStyle);
    l->hide();
    m_issues[key] = l;
    return l;
}

void HostsPage::buildUi() {
    m_banner = new QLabel(this);
    m_banner->setObjectName("hostsBanner");
    m_banner->setWordWrap(true);
    m_banner->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_banner->setStyleSheet(
        "QLabel#hostsBanner { background: #fdecea; color: #8a1c1c; "
        "border: 1px solid #f5c2c0; border-radius: 4px; padding: 8px 10px; }");
    m_banner->hide();

    // hosts | remote side and environment, above the checklist (which wants the full width)
    auto* side = new QVBoxLayout;
    side->setContentsMargins(0, 0, 0, 0);
    side->addWidget(buildSettingsBox());
    side->addWidget(buildEnvBox(), 1);
    auto* sideWidget = new QWidget(this);
    sideWidget->setLayout(side);
    sideWidget->setFixedWidth(400);
    auto* upper = new QHBoxLayout;
    upper->addWidget(buildHostsBox(), 1);
    upper->addWidget(sideWidget);

    auto* top = new QVBoxLayout(this);
    top->addWidget(m_banner);
    top->addLayout(upper, 1);
    top->addWidget(buildPreflightBox(), 1);
}

QWidget* HostsPage::buildHostsBox() {
    m_hostTable = new QTableView(this);
    m_hostTable->setObjectName("hostTable");
    m_hostTable->setModel(m_hostModel);
    m_hostTable->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_hostTable->setSelectionMode(QAbstractItemView::SingleSelection);
    m_hostTable->setAlternatingRowColors(true);
    m_hostTable->horizontalHeader()->setStretchLastSection(true);
    m_hostTable->setMinimumHeight(110);
    const int widths[] = {140, 80, 55, 45, 55, 160};
    for (int c = 0; c < 6; ++c) m_hostTable->setColumnWidth(c, widths[c]);

    m_add = new QPushButton(tr("Add host"), this);
    m_remove = new QPushButton(tr("Remove"), this);
    m_up = new QPushButton(tr("Move up"), this);
    m_down = new QPushButton(tr("Move down"), this);
    m_identity = new QPushButton(tr("Identity file…"), this);
    m_identity->setToolTip(tr("Choose the private key ssh uses for the selected host"));
    m_import = new QPushButton(tr("Import hostfile…"), this);
    m_import->setObjectName("importHostfile");
    m_import->setToolTip(
        tr("OpenMPI/DeepSpeed hostfile: \"host slots=N\" per line, plus Tessera's "
           "user=, port=, identity=, addr="));
    auto* buttons = new QHBoxLayout;
    for (auto* b : {m_add, m_remove, m_up, m_down, m_identity}) buttons->addWidget(b);
    buttons->addStretch(1);
    buttons->addWidget(m_import);

    m_hostfileNote = new QLabel(this);
    m_hostfileNote->setObjectName("hostfileNote");
    m_hostfileNote->setWordWrap(true);
    m_summary = new QLabel(this);
    m_summary->setObjectName("slotSummary");
    m_summary->setWordWrap(true);

    auto* box = new QGroupBox(
        tr("Hosts (ranks fill them in order: a host's slots, then the next host)"), this);
    auto* l = new QVBoxLayout(box);
    l->addWidget(m_hostfileNote);
    l->addWidget(m_hostTable, 1);
    l->addWidget(issueLabel("cluster.hosts"));
    l->addLayout(buttons);
    l->addWidget(m_summary);
    l->addWidget(issueLabel("cluster.slots"));

    auto selected = [this] {
        const QModelIndexList rows = m_hostTable->selectionModel()->selectedRows();
        return rows.isEmpty() ? m_hostTable->currentIndex().row() : rows.first().row();
    };
    auto reselect = [this](int row) {
        if (row >= 0 && row < m_hostModel->rowCount()) m_hostTable->selectRow(row);
    };
    connect(m_add, &QPushButton::clicked, this, [this, reselect] {
        if (m_hostModel->addHost()) reselect(m_hostModel->rowCount() - 1);
    });
    connect(m_remove, &QPushButton::clicked, this, [this, selected, reselect] {
        const int row = selected();
        if (m_hostModel->removeHost(row)) reselect(std::min(row, m_hostModel->rowCount() - 1));
    });
    connect(m_up, &QPushButton::clicked, this, [this, selected, reselect] {
        const int row = selected();
        if (m_hostModel->moveHost(row, -1)) reselect(row - 1);
    });
    connect(m_down, &QPushButton::clicked, this, [this, selected, reselect] {
        const int row = selected();
        if (m_hostModel->moveHost(row, +1)) reselect(row + 1);
    });
    connect(m_identity, &QPushButton::clicked, this, [this, selected, reselect] {
        const int row = selected();
        if (row < 0) return;
        const QModelIndex idx = m_hostModel->index(row, int(HostColumn::identity));
        const QString file = chooseFile(
            tr("Private key for %1").arg(m_hostModel->index(row, 0).data().toString()),
            idx.data().toString().isEmpty() ? QDir::homePath() + "/.ssh" : idx.data().toString());
        if (!file.isEmpty() && m_hostModel->setData(idx, file)) reselect(row);
    });
    connect(m_import, &QPushButton::clicked, this, [this] {
        const QString file =
            QFileDialog::getOpenFileName(this, tr("Import a hostfile"), m_doc->projectDir());
        if (!file.isEmpty()) importHostfile(file);
    });
    return box;
}

QWidget* HostsPage::buildSettingsBox() {
    m_workdir = new QLineEdit(this);
    m_workdir->setObjectName("workdir");
    m_workdir->setPlaceholderText(tr("the remote login directory"));
    m_tessera = new QLineEdit(this);
    m_tessera->setObjectName("tesseraPath");
    m_tessera->setPlaceholderText(tr("a path, or a name on the remote PATH"));
    m_port = new QSpinBox(this);
    m_port->setObjectName("rendezvousPort");
    m_port->setRange(1, 65535);
    m_port->setKeyboardTracking(false);
    m_knownHosts = new QLineEdit(this);
    m_knownHosts->setObjectName("knownHosts");
    m_knownHosts->setPlaceholderText("~/.ssh/known_hosts");
    m_knownHostsBrowse = new QPushButton(tr("…"), this);
    m_knownHostsBrowse->setFixedWidth(32);
    m_timeout = new QSpinBox(this);
    m_timeout->setObjectName("connectTimeout");
    m_timeout->setRange(1, 600);
    m_timeout->setSuffix(" s");
    m_timeout->setKeyboardTracking(false);
    m_settingsHint = new QLabel(tr("Add a host (or import a hostfile) first: without hosts the run "
                                   "stays on this machine and this section is not saved."),
                                this);
    m_settingsHint->setWordWrap(true);
    m_settingsHint->setStyleSheet("color: gray;");

    auto* kh = new QWidget(this);
    auto* khl = new QHBoxLayout(kh);
    khl->setContentsMargins(0, 0, 0, 0);
    khl->addWidget(m_knownHosts, 1);
    khl->addWidget(m_knownHostsBrowse);

    auto* form = new QFormLayout;
    auto row = [&](const QString& label, QWidget* w, const QString& key) {
        form->addRow(label, w);
        form->addRow(QString(), issueLabel(key));
    };
    row(tr("Working directory"), m_workdir, "cluster.workdir");
    row(tr("Remote tessera"), m_tessera, "cluster.tessera");
    row(tr("Rendezvous port"), m_port, "cluster.rendezvous_port");
    row(tr("known_hosts file"), kh, "cluster.known_hosts");
    row(tr("Connect timeout"), m_timeout, "cluster.connect_timeout");
    m_settingsBox = new QGroupBox(tr("Remote side"), this);
    auto* v = new QVBoxLayout(m_settingsBox);
    v->addWidget(m_settingsHint);
    v->addLayout(form);

    auto text = [this](QLineEdit* e, const QString& key, const QString& what,
                       std::function<void(tessera::RunConfig&, const std::string&)> set) {
        connect(e, &QLineEdit::editingFinished, this, [this, e, key, what, set] {
            if (m_updating) return;
            const std::string v = e->text().trimmed().toStdString();
            editSetting(key, what, [set, v](tessera::RunConfig& c) { set(c, v); });
        });
    };
    text(m_workdir, "cluster.workdir", tr("Set remote working directory"),
         [](tessera::RunConfig& c, const std::string& v) { c.cluster.workdir = v; });
    text(m_tessera, "cluster.tessera", tr("Set remote tessera"),
         [](tessera::RunConfig& c, const std::string& v) { c.cluster.tessera = v; });
    text(m_knownHosts, "cluster.known_hosts", tr("Set known_hosts file"),
         [](tessera::RunConfig& c, const std::string& v) { c.cluster.known_hosts = v; });
    connect(m_port, &QSpinBox::valueChanged, this, [this](int v) {
        if (!m_updating)
            editSetting("cluster.rendezvous_port", tr("Set rendezvous port"),
                        [v](tessera::RunConfig& c) { c.cluster.rendezvous_port = v; });
    });
    connect(m_timeout, &QSpinBox::valueChanged, this, [this](int v) {
        if (!m_updating)
            editSetting("cluster.connect_timeout", tr("Set connect timeout"),
                        [v](tessera::RunConfig& c) { c.cluster.connect_timeout = v; });
    });
    connect(m_knownHostsBrowse, &QPushButton::clicked, this, [this] {
        const QString file = chooseFile(tr("known_hosts file"), m_knownHosts->text().isEmpty()
                                                                    ? QDir::homePath() + "/.ssh"
                                                                    : m_knownHosts->text());
        if (file.isEmpty()) return;
        m_knownHosts->setText(file);
        Q_EMIT m_knownHosts->editingFinished();
    });
    return m_settingsBox;
}

QWidget* HostsPage::buildEnvBox() {
    m_envTable = new QTableView(this);
    m_envTable->setObjectName("envTable");
    m_envTable->setModel(m_envModel);
    m_envTable->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_envTable->setSelectionMode(QAbstractItemView::SingleSelection);
    m_envTable->horizontalHeader()->setStretchLastSection(true);
    m_envTable->setColumnWidth(0, 150);
    m_addEnv = new QPushButton(tr("Add variable"), this);
    m_removeEnv = new QPushButton(tr("Remove"), this);
    auto* b = new QHBoxLayout;
    b->addWidget(m_addEnv);
    b->addWidget(m_removeEnv);
    b->addStretch(1);
    m_envBox = new QGroupBox(tr("Environment of the remote ranks (NAME = value)"), this);
    auto* l = new QVBoxLayout(m_envBox);
    l->addWidget(m_envTable, 1);
    l->addWidget(issueLabel("cluster.env"));
    l->addLayout(b);
    connect(m_addEnv, &QPushButton::clicked, this, [this] {
        if (m_envModel->addVariable())
            m_envTable->edit(m_envModel->index(m_envModel->rowCount() - 1, 0));
    });
    connect(m_removeEnv, &QPushButton::clicked, this,
            [this] { m_envModel->removeVariable(m_envTable->currentIndex().row()); });
    return m_envBox;
}

QWidget* HostsPage::buildPreflightBox() {
    m_run = new QPushButton(tr("Run preflight"), this);
    m_run->setObjectName("runPreflight");
    m_run->setToolTip(
        tr("tessera preflight: host key, ssh, tessera, working directory, GPUs, data, "
           "rendezvous port and environment on every host (nothing is saved)"));
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_cancel->setObjectName("cancelPreflight");
    m_cancel->setEnabled(false);
    m_status = new QLabel(tr("Not run yet."), this);
    m_status->setObjectName("preflightStatus");
    m_status->setWordWrap(true);
    m_checklist = new QTreeWidget(this);
    m_checklist->setObjectName("preflightChecklist");
    m_checklist->setColumnCount(4);
    m_checklist->setHeaderLabels({tr("Host / check"), tr("Status"), tr("Found"), tr("What to do")});
    m_checklist->setWordWrap(true);
    m_checklist->setUniformRowHeights(false);
    m_checklist->setAlternatingRowColors(true);
    m_checklist->setColumnWidth(0, 190);
    m_checklist->setColumnWidth(1, 70);
    m_checklist->setColumnWidth(2, 400);
    m_checklist->setItemDelegate(new WrappingDelegate(m_checklist));
    m_checklist->setTextElideMode(Qt::ElideNone);
    connect(m_checklist->header(), &QHeaderView::sectionResized, m_checklist,
            [this] { m_checklist->doItemsLayout(); });
    auto* bar = new QHBoxLayout;
    bar->addWidget(m_run);
    bar->addWidget(m_cancel);
    bar->addWidget(m_status, 1);
    auto* box = new QGroupBox(tr("Preflight (checks every host over ssh)"), this);
    auto* l = new QVBoxLayout(box);
    l->addLayout(bar);
    l->addWidget(m_checklist, 1);
    connect(m_run, &QPushButton::clicked, this, &HostsPage::runPreflight);
    connect(m_cancel, &QPushButton::clicked, this, &HostsPage::cancelPreflight);
    return box;
}

QString HostsPage::chooseFile(const QString& title, const QString& start) {
    return QFileDialog::getOpenFileName(this, title, start, QString(), nullptr,
                                        QFileDialog::DontResolveSymlinks);
}

// ----------------------------------------------------------------------------
// config -> widgets

void HostsPage::refresh() {
    const tessera::RunConfig& cfg = m_doc->config();
    const tessera::ClusterConfig& c = cfg.cluster;
    m_updating = true;
    // always the document's text (a field left stale would write it into the next project)
    auto show = [](QLineEdit* e, const std::string& v) {
        if (e->text() != QString::fromStdString(v)) e->setText(QString::fromStdString(v));
    };
    show(m_workdir, c.workdir), show(m_tessera, c.tessera), show(m_knownHosts, c.known_hosts);
    m_port->setValue(c.rendezvous_port);
    m_timeout->setValue(c.connect_timeout);
    m_updating = false;

    const bool hosts = !c.hosts.empty();
    for (QWidget* w : std::initializer_list<QWidget*>{m_workdir, m_tessera, m_port, m_knownHosts,
                                                      m_knownHostsBrowse, m_timeout, m_envBox})
        w->setEnabled(hosts);
    m_settingsHint->setVisible(!hosts);
    m_remove->setEnabled(hosts), m_up->setEnabled(hosts), m_down->setEnabled(hosts),
        m_identity->setEnabled(hosts);
    m_run->setEnabled(hosts && m_doc->isOpen() && !m_runner->isRunning());
    m_hostfileNote->setText(
        tr("Hosts read from <b>%1</b> (hostfile). Editing them here writes them "
           "into project.yaml instead; the file is left as it is.")
            .arg(QString::fromStdString(c.hostfile).toHtmlEscaped()));
    m_hostfileNote->setVisible(!c.hostfile.empty());

    const auto& p = cfg.parallel;
    const int world = p.dp * p.tp * p.pp, slots = cluster_total_slots(c);
    m_summary->setText(
        hosts ? tr("%1 slot%2 on %3 host%4; the plan runs %5 rank%6 (dp %7 × tp %8 × pp %9).")
                    .arg(slots)
                    .arg(slots == 1 ? "" : "s")
                    .arg(c.hosts.size())
                    .arg(c.hosts.size() == 1 ? "" : "s")
                    .arg(world)
                    .arg(world == 1 ? "" : "s")
                    .arg(p.dp)
                    .arg(p.tp)
                    .arg(p.pp)
              : tr("No hosts: runs stay on this machine. Add hosts to run on several machines over "
                   "ssh."));

    const auto problems = cluster_problems(cfg);
    for (auto it = m_issues.begin(); it != m_issues.end(); ++it) {
        QStringList lines;
        if (m_rejected.contains(it.key())) lines << m_rejected.value(it.key());
        const QString now =
            QString::fromStdString(cluster_problems_at(problems, it.key().toStdString()));
        if (!now.isEmpty() && !lines.contains(now)) lines << now;
        it.value()->setText(lines.join('\n'));
        it.value()->setVisible(!lines.isEmpty());
    }
}

void HostsPage::showRejected(const QString& key, const QString& message) {
    // the message names its key path (cluster.hosts[0].host: expected ..., found ...)
    m_rejected[key_group(key)] = tr("Not applied — %1").arg(message);
    refresh();  // the table shows the document's value again
}

void HostsPage::editSetting(const QString& key, const QString& text,
                            const std::function<void(tessera::RunConfig&)>& change) {
    const QString problem = clusterTryEdit(m_doc, text, change);
    if (problem.isEmpty()) return;
    showRejected(key, problem);
}

QString HostsPage::issueText(const QString& key) const {
    auto it = m_issues.find(key);
    return it == m_issues.end() || it.value()->isHidden() ? QString() : it.value()->text();
}

// ----------------------------------------------------------------------------
// banner

void HostsPage::showBanner(const QString& title, const QString& message) {
    m_banner->setText(
        QString("<b>%1</b><br>%2")
            .arg(title.toHtmlEscaped(), message.toHtmlEscaped().replace('\n', "<br>")));
    m_banner->show();
}

void HostsPage::clearBanner() {
    m_banner->clear();
    m_banner->hide();
}

QString HostsPage::bannerText() const {
    return m_banner->isHidden() ? QString() : m_banner->text();
}

// ----------------------------------------------------------------------------
// hostfile

bool HostsPage::importHostfile(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        showBanner(tr("Could not import the hostfile."),
                   tr("%1: cannot read: %2").arg(path, f.errorString()));
        return false;
    }
    std::vector<tessera::ClusterHost> hosts;
    try {
        hosts = tessera::cluster_parse_hostfile(f.readAll().toStdString(),
                                                QFileInfo(path).fileName().toStdString());
    } catch (const std::exception& e) {
        showBanner(tr("Could not import the hostfile; the hosts are unchanged."),
                   QString::fromUtf8(e.what()));
        return false;
    }
    if (hosts.empty()) {
        showBanner(tr("Could not import the hostfile."),
                   tr("%1: no hosts (only comments or blank lines)").arg(path));
        return false;
    }
    QString problem;
    auto capture = connect(m_hostModel, &HostTableModel::editRejected, this,
                           [&problem](const QString&, const QString& m) { problem = m; });
    const bool ok =
        m_hostModel->replaceHosts(hosts, tr("Import hostfile %1").arg(QFileInfo(path).fileName()));
    disconnect(capture);
    if (!ok) {
        m_rejected.clear();  // the banner says it; the table keeps no stale "not applied"
        refresh();
        showBanner(tr("Could not import the hostfile; the hosts are unchanged."),
                   tr("%1: %2").arg(QFileInfo(path).fileName(), problem));
        return false;
    }
    clearBanner();
    return true;
}

// ----------------------------------------------------------------------------
// preflight

void HostsPage::setTesseraBinary(const QString& path) {
    m_runner->setTesseraBinary(path);
}

void HostsPage::setRunning(bool running, const QString& status) {
    m_run->setEnabled(!running && !m_doc->config().cluster.hosts.empty());
    m_cancel->setEnabled(running);
    m_status->setText(status);
    if (!running) Q_EMIT preflightDone();
}

QString HostsPage::preflightStatus() const {
    return m_status->text();
}

void HostsPage::runPreflight() {
    if (m_runner->isRunning()) return;
    clearBanner();
    m_checked = m_doc->config();
    if (m_runner->startPreflight(*m_doc))
        setRunning(true, m_doc->isModified() ? tr("Checking every host (on the unsaved project)…")
                                             : tr("Checking every host…"));
}

void HostsPage::cancelPreflight() {
    m_runner->cancel();
}

void HostsPage::showReport() {
    m_checklist->clear();
    m_reportHosts.clear();
    const auto& cluster = m_checked.cluster;
    for (const auto& h : m_runner->report().hosts) {
        // the report names hosts by ssh label (user@host:port): find the cluster's entry
        ReportHost rh;
        for (const auto& ch : cluster.hosts)
            if (tessera::ssh_target(cluster, ch).label() == h.label)
                rh.host = QString::fromStdString(ch.host + ":" + std::to_string(ch.port));
        auto* top = new QTreeWidgetItem(m_checklist);
        top->setText(0, QString::fromStdString(h.label));
        top->setIcon(0, status_icon(h.ok() ? "ok" : "fail"));
        top->setText(1, h.ok() ? tr("ready") : tr("not ready"));
        top->setText(2, h.ranks == 1
                            ? tr("rank %1").arg(h.first_rank)
                            : tr("ranks %1–%2").arg(h.first_rank).arg(h.first_rank + h.ranks - 1));
        QFont bold = top->font(0);
        bold.setBold(true);
        top->setFont(0, bold);
        for (const auto& c : h.checks) {
            auto* item = new QTreeWidgetItem(top);
            item->setText(0, QString::fromStdString(c.name));
            item->setIcon(0, status_icon(c.status));
            item->setText(1, QString::fromStdString(c.status));
            item->setForeground(1, status_color(c.status));
            item->setText(2, QString::fromStdString(c.detail));
            item->setText(3, QString::fromStdString(c.fix));
            item->setToolTip(2, item->text(2));
            item->setToolTip(3, item->text(3));
            QStringList fps;
            for (const std::string& f : c.unknown_fingerprints()) fps << QString::fromStdString(f);
            if (!fps.isEmpty()) rh.unknownFingerprints = fps;
            if (c.name == "host key" && c.status == "fail" &&
                c.detail.find("CHANGED") != std::string::npos)
                rh.keyChanged = true;
        }
        top->setExpanded(true);
        if (!rh.unknownFingerprints.isEmpty() && !rh.host.isEmpty()) {
            auto* trust = new QPushButton(tr("Trust host key…"), m_checklist);
            trust->setObjectName("trust:" + rh.host);
            trust->setToolTip(
                tr("Shows the fingerprint to compare, then adds the key to known_hosts"));
            const QString host = rh.host;
            connect(trust, &QPushButton::clicked, this, [this, host] { trustHostKey(host); });
            m_checklist->setItemWidget(top, 3, trust);
        } else if (rh.keyChanged) {
            top->setText(3, tr("host key CHANGED: refused (see the fix below)"));
            top->setForeground(3, status_color("fail"));
        }
        m_reportHosts.push_back(rh);
    }
    m_checklist->doItemsLayout();  // row heights for the wrapped texts
}

QStringList HostsPage::trustableHosts() const {
    QStringList out;
    for (const auto& h : m_reportHosts)
        if (!h.unknownFingerprints.isEmpty() && !h.host.isEmpty()) out << h.host;
    return out;
}

QStringList HostsPage::changedKeyHosts() const {
    QStringList out;
    for (const auto& h : m_reportHosts)
        if (h.keyChanged) out << h.host;
    return out;
}

bool HostsPage::trustHostKey(const QString& host) {
    const auto it = std::find_if(
        m_reportHosts.begin(), m_reportHosts.end(),
        [&](const ReportHost& h) { return h.host == host && !h.unknownFingerprints.isEmpty(); });
    if (it == m_reportHosts.end() || m_runner->isRunning()) return false;
    if (!m_confirm(host, it->unknownFingerprints)) {
        m_status->setText(tr("Not trusted: %1").arg(host));
        return false;
    }
    if (!m_runner->startTrust(*m_doc, host)) return false;
    setRunning(true, tr("Trusting the host key of %1…").arg(host));
    return true;
}

}  // namespace tessera::studio
