// Welcome page: the studio's first page. Opens an example project (from the install's
// share/tessera/projects or the source tree's projects/), creates a new project from the
// quickstart template in a chosen folder, lists recent projects, and fetches the data sets on
// demand by running the fetch-data script (tessera-fetch-data, or scripts/fetch-data.sh in a
// source tree) through QProcess, with a progress bar, its output, and a clear message offline.
#pragma once
#include <QString>
#include <QStringList>
#include <QWidget>

class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QProcess;
class QProgressBar;
class QPushButton;

namespace tessera::studio {

class MainWindow;
class ProjectDocument;

// Where the example projects are: $TESSERA_PROJECTS_DIR, else <app>/../share/tessera/projects,
// else the first projects/ with a quickstart/project.yaml above the app's folder. "" if none.
QString welcome_find_examples_dir(const QString& app_dir);
// The fetch-data script: <app>/tessera-fetch-data, else scripts/fetch-data.sh above the app's
// folder, else tessera-fetch-data on PATH. "" if none.
QString welcome_find_fetch_script(const QString& app_dir);
// The data cache, as the engine computes it: $TESSERA_DATA_DIR, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/tessera.
QString welcome_data_cache_dir();
// Copies template_dir/project.yaml into dest_dir (created; must hold no project.yaml yet) and
// names the project after dest_dir's folder. Returns "" on success, else the error.
QString welcome_create_project(const QString& template_dir, const QString& dest_dir);

class WelcomePage : public QWidget {
    Q_OBJECT
  public:
    explicit WelcomePage(MainWindow* window, ProjectDocument* doc, QWidget* parent = nullptr);

    QStringList exampleProjects() const;  // folders listed under "Examples"
    QString dataMessage() const;          // the data section's status line

    // Starts the fetch script (no-op while it runs); fetchFinished(ok) when it exits.
    void fetchData();

  Q_SIGNALS:
    void fetchFinished(bool ok);

  protected:
    void showEvent(QShowEvent* e) override;

  private:
    void refreshRecent();
    void openPath(const QString& dir);
    void createProject();
    void onFetchOutput();
    void onFetchDone(int exit_code);

    MainWindow* m_window;
    QString m_examplesDir;
    QString m_fetchScript;
    QListWidget* m_examples;
    QListWidget* m_recent;
    QLineEdit* m_newDir;
    QLabel* m_newStatus;
    QLabel* m_cacheLabel;
    QLabel* m_dataStatus;
    QPushButton* m_fetchButton;
    QProgressBar* m_progress;
    QPlainTextEdit* m_log;
    QProcess* m_process = nullptr;
    QString m_output;
};

}  // namespace tessera::studio
