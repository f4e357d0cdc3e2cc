// The Hosts page: where a multi-host run's machines are set up (the project's `cluster:` section,
// docs/launch.md). A host table (host, user, port, slots, the ranks each gets, identity file,
// address) with add / remove / move and "Import hostfile…"; the remote working directory, tessera
// path, rendezvous port, known_hosts file and connect timeout; the environment passed to remote
// ranks. Each change is one ProjectDocument::edit; an edit that would add a problem (a host name
// with shell metacharacters, a duplicate host, too few slots for dp x tp x pp, ...) is refused and
// the reason shown next to its control, as the Plan page shows its issues.
// "Run preflight" checks every host through `tessera preflight --json` (PreflightRunner) and shows
// the checklist per host; a host whose key is unknown gets "Trust host key…" (after the user has
// compared the fingerprint), a CHANGED key is refused with the engine's fix.
#pragma once
#include <QMap>
#include <QWidget>
#include <functional>

#include "engine/config/config.h"

class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableView;
class QTreeWidget;
class QGroupBox;

namespace tessera::studio {

class ProjectDocument;
class HostTableModel;
class EnvTableModel;
class PreflightRunner;

class HostsPage : public QWidget {
    Q_OBJECT
  public:
    explicit HostsPage(ProjectDocument* doc, QWidget* parent = nullptr);

    HostTableModel* hostModel() const { return m_hostModel; }
    EnvTableModel* envModel() const { return m_envModel; }
    QTableView* hostTable() const { return m_hostTable; }
    QTreeWidget* checklist() const { return m_checklist; }
    PreflightRunner* runner() const { return m_runner; }

    // What the control for `key` shows ("" = fine): cluster.hosts, cluster.slots, cluster.env,
    // cluster.workdir, cluster.tessera, cluster.rendezvous_port, cluster.known_hosts,
    // cluster.connect_timeout.
    QString issueText(const QString& key) const;
    QString bannerText() const;  // the page's error banner ("" when hidden)
    QString preflightStatus() const;

    // Reads an OpenMPI/DeepSpeed hostfile into the host table (one undoable edit). A file that
    // does not parse, or hosts that would not run the plan, leave the project as it was and put
    // the reason in the banner.
    bool importHostfile(const QString& path);

    void setTesseraBinary(const QString& path);
    // How "Trust host key…" asks (default: a QMessageBox with the host and its fingerprints).
    using TrustConfirm = std::function<bool(const QString& host, const QStringList& fingerprints)>;
    void setTrustConfirm(TrustConfirm confirm) { m_confirm = std::move(confirm); }

    // Hosts of the last report whose key is unknown (trust offered) / CHANGED (refused).
    QStringList trustableHosts() const;
    QStringList changedKeyHosts() const;

  public Q_SLOTS:
    void runPreflight();
    void cancelPreflight();
    bool trustHostKey(
        const QString& host);  // asks, then runs `tessera hosts CONFIG trust HOST --yes`

  Q_SIGNALS:
    void preflightDone();  // a checklist, an error or a cancel: the buttons are back

  private:
    struct ReportHost {  // one host of the last report and what the page offers for it
        QString host;    // the cluster's HOST:PORT (what `hosts trust` takes)
        QStringList unknownFingerprints;
        bool keyChanged = false;
    };

    void buildUi();
    QWidget* buildHostsBox();
    QWidget* buildSettingsBox();
    QWidget* buildEnvBox();
    QWidget* buildPreflightBox();
    QLabel* issueLabel(const QString& key);
    void refresh();  // config -> fields, issue labels, summary
    void showRejected(const QString& key, const QString& message);
    void showBanner(const QString& title, const QString& message);
    void clearBanner();
    void editSetting(const QString& key, const QString& text,
                     const std::function<void(tessera::RunConfig&)>& change);
    void showReport();
    void setRunning(bool running, const QString& status);
    QString chooseFile(const QString& title, const QString& start);

    ProjectDocument* m_doc;
    HostTableModel* m_hostModel;
    EnvTableModel* m_envModel;
    PreflightRunner* m_runner;
    TrustConfirm m_confirm;
    tessera::RunConfig m_checked;  // the config the last preflight ran on
    std::vector<ReportHost> m_reportHosts;
    QMap<QString, QLabel*> m_issues;
    QMap<QString, QString> m_rejected;  // key group -> the last refused edit's reason
    bool m_updating = false;

    QLabel *m_banner, *m_hostfileNote, *m_summary, *m_settingsHint, *m_status;
    QTableView *m_hostTable, *m_envTable;
    QPushButton *m_add, *m_remove, *m_up, *m_down, *m_identity, *m_import;
    QPushButton *m_addEnv, *m_removeEnv, *m_run, *m_cancel, *m_knownHostsBrowse;
    QLineEdit *m_workdir, *m_tessera, *m_knownHosts;
    QSpinBox *m_port, *m_timeout;
    QGroupBox *m_settingsBox, *m_envBox;
    QTreeWidget* m_checklist;
};

}  // namespace tessera::studio
