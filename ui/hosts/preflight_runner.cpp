// PreflightRunner: QProcess around `tessera preflight` / `tessera hosts ... trust`
// (preflight_runner.h).
#include "ui/hosts/preflight_runner.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include "engine/core/error.h"
#include "ui/common/project_document.h"
#include "ui/common/tessera_binary.h"

namespace tessera::studio {

// ----------------------------------------------------------------------------
// running

PreflightRunner::PreflightRunner(QObject* parent)
    : QObject(parent), m_bin(studio_tessera_binary()) {}

PreflightRunner::~PreflightRunner() {
    if (m_proc) {
        m_proc->disconnect(this);
        m_proc->kill();
        m_proc->waitForFinished(2000);
    }
    cleanUp();
}

bool PreflightRunner::isRunning() const {
    return m_job != Job::none;
}

bool PreflightRunner::startPreflight(const ProjectDocument& doc) {
    return start(doc, Job::preflight, {"--json"});
}

bool PreflightRunner::startTrust(const ProjectDocument& doc, const QString& host) {
    m_host = host;
    return start(doc, Job::trust, {"trust", host, "--yes"});
}

bool PreflightRunner::start(const ProjectDocument& doc, Job job,
                            const QStringList& argsAfterConfig) {
    if (isRunning()) {
        Q_EMIT failed(tr("a preflight command is already running"));
        return false;
    }
    if (!doc.isOpen()) {
        Q_EMIT failed(tr("no project is open"));
        return false;
    }
    // the saved file when it is what the user sees, else the current text beside it
    QString config = doc.yamlPath();
    if (doc.isModified() || !QFileInfo::exists(config)) {
        m_temp = QDir(doc.projectDir()).filePath(tempConfigName());
        QSaveFile f(m_temp);
        const std::string text = tessera::config_to_yaml(doc.config());
        if (!QDir().mkpath(doc.projectDir()) || !f.open(QIODevice::WriteOnly | QIODevice::Text) ||
            f.write(QByteArray::fromStdString(text)) < 0 || !f.commit()) {
            const QString why = tr("%1: cannot write the unsaved project for the checks: %2")
                                    .arg(m_temp, f.errorString());
            m_temp.clear();
            Q_EMIT failed(why);
            return false;
        }
        config = m_temp;
    }
    const QStringList args =
        QStringList{job == Job::preflight ? "preflight" : "hosts", config} + argsAfterConfig;
    m_job = job;
    m_cancelling = false;
    m_proc = new QProcess(this);
    m_proc->setWorkingDirectory(doc.projectDir());
    connect(m_proc, &QProcess::finished, this, &PreflightRunner::onFinished);
    connect(m_proc, &QProcess::errorOccurred, this, &PreflightRunner::onError);
    m_proc->start(m_bin, args);
    return true;
}

void PreflightRunner::cancel() {
    if (!m_proc || m_job == Job::none) return;
    m_cancelling = true;
    m_proc->kill();  // onFinished reports cancelled()
}

void PreflightRunner::cleanUp() {
    if (!m_temp.isEmpty()) QFile::remove(m_temp);
    m_temp.clear();
}

void PreflightRunner::onError(QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;  // the others end in finished()
    const QString why = tr("cannot start %1: %2").arg(m_bin, m_proc->errorString());
    m_proc->deleteLater();
    m_proc = nullptr;
    m_job = Job::none;
    cleanUp();
    Q_EMIT failed(why);
}

void PreflightRunner::onFinished(int code, QProcess::ExitStatus status) {
    const QByteArray out = m_proc->readAllStandardOutput();
    const QString err = QString::fromUtf8(m_proc->readAllStandardError()).trimmed();
    const Job job = m_job;
    m_proc->deleteLater();
    m_proc = nullptr;
    m_job = Job::none;
    cleanUp();
    if (m_cancelling) {
        m_cancelling = false;
        Q_EMIT cancelled();
        return;
    }
    const QString what = job == Job::preflight ? "tessera preflight" : "tessera hosts trust";
    if (status != QProcess::NormalExit) {
        Q_EMIT failed(tr("%1 crashed%2").arg(what, err.isEmpty() ? QString() : ": " + err));
        return;
    }
    if (job == Job::trust) {
        if (code == 0)
            Q_EMIT trustFinished(m_host, QString::fromUtf8(out).trimmed());
        else
            Q_EMIT failed(tr("%1 %2 failed (exit %3): %4")
                              .arg(what, m_host)
                              .arg(code)
                              .arg(err.isEmpty() ? QString::fromUtf8(out).trimmed() : err));
        return;
    }
    // preflight: 0 = every host ready, 1 = a report with failures, 2 = the config is wrong
    if (code != 0 && code != 1) {
        Q_EMIT failed(err.isEmpty() ? tr("%1 exited with code %2").arg(what).arg(code) : err);
        return;
    }
    try {
        m_report = tessera::preflight_report_from_json(out.toStdString());
    } catch (const tessera::Error& e) {
        Q_EMIT failed(QString::fromStdString(e.what()) + (err.isEmpty() ? QString() : "\n" + err));
        return;
    }
    Q_EMIT preflightFinished(m_report.ok());
}

}  // namespace tessera::studio
