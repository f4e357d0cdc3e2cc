// The open project: a folder holding project.yaml (exactly the run config `tessera train` runs)
// and runs.db. Qt-side owner of the RunConfig the pages edit; every edit is one QUndoCommand.
// Pages never write files or show dialogs: they call edit() and listen to configChanged().
#pragma once
#include <QObject>
#include <QString>
#include <QUndoStack>
#include <functional>

#include "engine/config/config.h"

namespace tessera::studio {

class ProjectDocument : public QObject {
    Q_OBJECT
  public:
    explicit ProjectDocument(QObject* parent = nullptr);

    // Opens a project folder (or a .yaml file). On a bad file nothing changes, the error text
    // (file:line:col, key path, expected vs found) is returned and loadFailed is emitted.
    bool open(const QString& path, QString* error);
    // A new project in `dir` from a template config (written on save).
    void create(const QString& dir, const tessera::RunConfig& cfg);
    bool save(QString* error);  // QSaveFile; clears the modified flag
    bool saveAs(const QString& dir, QString* error);

    const tessera::RunConfig& config() const { return m_config; }
    QString projectDir() const { return m_dir; }
    QString yamlPath() const;
    QString dbPath() const;  // log.db resolved against the project folder
    bool isOpen() const { return !m_dir.isEmpty(); }
    bool isModified() const { return m_unsaved || !m_undo.isClean(); }
    QString projectName() const;  // config name, else the folder's name
    QUndoStack* undoStack() { return &m_undo; }

    // Applies `change` to a copy of the config as one undoable command named `text`.
    // Consecutive edits with the same non-negative `mergeId` merge (a drag is one undo step).
    void edit(const QString& text, const std::function<void(tessera::RunConfig&)>& change,
              int mergeId = -1);
    // Replaces the whole config (used by undo/redo commands).
    void setConfig(const tessera::RunConfig& cfg);

  Q_SIGNALS:
    void configChanged();
    void modifiedChanged(bool modified);
    void opened(const QString& dir);
    void loadFailed(const QString& message);

  private:
    tessera::RunConfig m_config;
    QString m_dir;
    QUndoStack m_undo;
    bool m_unsaved = false;  // created (or saved-as failed half way) and never written

    void resetHistory(bool unsaved);
};

}  // namespace tessera::studio
