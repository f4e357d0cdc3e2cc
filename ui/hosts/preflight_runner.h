// Runs the engine's host checks for the Hosts page without blocking it: `tessera preflight CONFIG
// --json` and `tessera hosts CONFIG trust HOST --yes` through QProcess. CONFIG is the open
// project's project.yaml when it is saved, else the document's current YAML written beside it as
// .tessera-preflight.yaml (so relative paths such as a hostfile resolve the same) and removed when
// the command ends: nothing is saved behind the user's back. Results arrive as signals; the
// report is read by the engine's own codec (preflight_report_from_json), not a second parser.
#pragma once
#include <QObject>
#include <QProcess>
#include <QStringList>

#include "engine/launch/preflight.h"

namespace tessera::studio {

class ProjectDocument;

class PreflightRunner : public QObject {
    Q_OBJECT
  public:
    explicit PreflightRunner(QObject* parent = nullptr);
    ~PreflightRunner() override;

    // The `tessera` executable (default: the one next to tessera-studio, as the Monitor page uses).
    void setTesseraBinary(const QString& path) { m_bin = path; }
    QString tesseraBinary() const { return m_bin; }

    // Start a command; false (and failed()) when one is running or the config cannot be written.
    bool startPreflight(const ProjectDocument& doc);
    bool startTrust(const ProjectDocument& doc, const QString& host);
    void cancel();  // kills the running command (cancelled() follows)
    bool isRunning() const;
    static QString tempConfigName() { return QStringLiteral(".tessera-preflight.yaml"); }

    const tessera::PreflightReport& report() const { return m_report; }

  Q_SIGNALS:
    void preflightFinished(bool ok);  // a report arrived (exit 0: every host ready, 1: not)
    void trustFinished(const QString& host, const QString& output);
    void failed(const QString& message);  // exit 2 (the error text), a crash, no report, no start
    void cancelled();

  private:
    enum class Job { none, preflight, trust };
    bool start(const ProjectDocument& doc, Job job, const QStringList& argsAfterConfig);
    void onFinished(int code, QProcess::ExitStatus status);
    void onError(QProcess::ProcessError e);
    void cleanUp();  // removes the temporary config

    QString m_bin;
    QProcess* m_proc = nullptr;
    Job m_job = Job::none;
    bool m_cancelling = false;
    QString m_temp;  // the temporary config ("" = none)
    QString m_host;  // trust: the host
    tessera::PreflightReport m_report;
};

}  // namespace tessera::studio
