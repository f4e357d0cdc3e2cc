// ProjectDocument: loads project.yaml through the engine's strict parser, keeps the RunConfig the
// pages edit behind a QUndoStack, and writes the canonical YAML back with QSaveFile.
#include "ui/common/project_document.h"

#include <QDir>
#include <QFileInfo>
#include <QSaveFile>
#include <QUndoCommand>
#include <exception>

#include "engine/core/error.h"

namespace tessera::studio {

// ----------------------------------------------------------------------------
// one undoable config change: the config before and after

namespace {

class EditCommand : public QUndoCommand {
  public:
    EditCommand(ProjectDocument* doc, tessera::RunConfig before, tessera::RunConfig after,
                const QString& text, int mergeId)
        : QUndoCommand(text),
          m_doc(doc),
          m_before(std::move(before)),
          m_after(std::move(after)),
          m_id(mergeId) {}

    void undo() override { m_doc->setConfig(m_before); }
    void redo() override { m_doc->setConfig(m_after); }
    int id() const override { return m_id; }
    bool mergeWith(const QUndoCommand* other) override {
        if (other->id() != m_id || m_id < 0) return false;
        m_after = static_cast<const EditCommand*>(other)->m_after;
        if (m_after == m_before) setObsolete(true);  // dragged back to where it started
        return true;
    }

  private:
    ProjectDocument* m_doc;
    tessera::RunConfig m_before, m_after;
    int m_id;
};

const char* kYamlName = "project.yaml";

}  // namespace

// ----------------------------------------------------------------------------
// lifecycle

ProjectDocument::ProjectDocument(QObject* parent) : QObject(parent) {
    connect(&m_undo, &QUndoStack::cleanChanged, this,
            [this](bool) { Q_EMIT modifiedChanged(isModified()); });
}

QString ProjectDocument::yamlPath() const {
    return m_dir.isEmpty() ? QString() : QDir(m_dir).filePath(kYamlName);
}

QString ProjectDocument::dbPath() const {
    if (m_dir.isEmpty()) return {};
    return QDir(m_dir).absoluteFilePath(QString::fromStdString(m_config.log.db));
}

QString ProjectDocument::projectName() const {
    if (!m_config.name.empty() && m_config.name != "run")
        return QString::fromStdString(m_config.name);
    return m_dir.isEmpty() ? QStringLiteral("untitled") : QFileInfo(m_dir).fileName();
}

void ProjectDocument::resetHistory(bool unsaved) {
    const bool was = isModified();
    m_undo.clear();
    m_undo.setClean();
    m_unsaved = unsaved;
    if (was != isModified()) Q_EMIT modifiedChanged(isModified());
}

bool ProjectDocument::open(const QString& path, QString* error) {
    QFileInfo info(path);
    QString yaml = info.isDir() ? QDir(path).filePath(kYamlName) : path;
    QString dir = info.isDir() ? info.absoluteFilePath() : info.absolutePath();
    tessera::RunConfig cfg;
    try {
        if (!QFileInfo::exists(yaml))
            throw tessera::InputError(
                yaml.toStdString() +
                ": expected a Tessera project (project.yaml), found no such file");
        // the data may not be prepared yet (the Data page prepares it); train checks its files
        cfg = tessera::config_load(QFileInfo(yaml).absoluteFilePath().toStdString(), {},
                                   tessera::ConfigFiles::may_be_missing);
    } catch (const std::exception& e) {
        const QString msg = QString::fromStdString(e.what());
        if (error) *error = msg;
        Q_EMIT loadFailed(msg);
        return false;
    }
    m_config = std::move(cfg);
    m_dir = dir;
    resetHistory(false);
    Q_EMIT opened(m_dir);
    Q_EMIT configChanged();
    return true;
}

void ProjectDocument::create(const QString& dir, const tessera::RunConfig& cfg) {
    m_config = cfg;
    m_dir = QFileInfo(dir).absoluteFilePath();
    m_config.base_dir = m_dir.toStdString();
    m_config.source_path = yamlPath().toStdString();
    if (m_config.name.empty() || m_config.name == "run")
        m_config.name = QFileInfo(m_dir).fileName().toStdString();
    resetHistory(true);
    Q_EMIT opened(m_dir);
    Q_EMIT configChanged();
}

// ----------------------------------------------------------------------------
// saving: validated by the engine's parser first, then written atomically

bool ProjectDocument::save(QString* error) {
    auto fail = [&](const QString& msg) {
        if (error) *error = msg;
        return false;
    };
    if (m_dir.isEmpty()) return fail(tr("No project is open."));
    const std::string text =
        "# Tessera project (written by tessera-studio; every key is documented in "
        "docs/config.md)\n" +
        tessera::config_to_yaml(m_config);
    try {
        // never write what train rejects, but for files not there yet (data not prepared)
        tessera::config_parse(text, yamlPath().toStdString(), {}, "",
                              tessera::ConfigFiles::may_be_missing);
    } catch (const std::exception& e) {
        return fail(tr("Not saved: %1").arg(QString::fromStdString(e.what())));
    }
    if (!QDir().mkpath(m_dir)) return fail(tr("Cannot create the folder %1").arg(m_dir));
    QSaveFile f(yamlPath());
    if (!f.open(QIODevice::WriteOnly | QIODevice::Text))
        return fail(tr("%1: cannot write: %2").arg(yamlPath(), f.errorString()));
    f.write(QByteArray::fromStdString(text));
    if (!f.commit()) return fail(tr("%1: cannot write: %2").arg(yamlPath(), f.errorString()));
    m_config.source_path = yamlPath().toStdString();
    m_config.base_dir = m_dir.toStdString();
    m_config.source_text = text;
    const bool was = isModified();
    m_unsaved = false;
    m_undo.setClean();
    if (was && !isModified()) Q_EMIT modifiedChanged(false);
    return true;
}

bool ProjectDocument::saveAs(const QString& dir, QString* error) {
    const QString old = m_dir;
    const bool oldUnsaved = m_unsaved;
    m_dir = QFileInfo(dir).absoluteFilePath();
    if (!save(error)) {
        m_dir = old;
        m_unsaved = oldUnsaved;
        return false;
    }
    Q_EMIT opened(m_dir);
    Q_EMIT configChanged();
    return true;
}

// ----------------------------------------------------------------------------
// editing

void ProjectDocument::edit(const QString& text,
                           const std::function<void(tessera::RunConfig&)>& change, int mergeId) {
    tessera::RunConfig after = m_config;
    change(after);
    if (after == m_config) return;
    m_undo.push(new EditCommand(this, m_config, std::move(after), text, mergeId));
}

void ProjectDocument::setConfig(const tessera::RunConfig& cfg) {
    if (cfg == m_config) return;
    m_config = cfg;
    Q_EMIT configChanged();
}

}  // namespace tessera::studio
