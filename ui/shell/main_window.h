// The studio's one window: a sidebar of pages (Model, Plan, ...) over a stacked widget, the
// File / Edit / View menus, an error banner for projects that fail to open, theme switching and
// the unsaved-changes prompt. Pages are added by the caller (app/tessera_studio_main.cpp) with
// addPage(), so a page never depends on another and the shell never depends on a page.
#pragma once
#include <QMainWindow>
#include <QStringList>

class QListWidget;
class QStackedWidget;
class QLabel;
class QMenu;
class QAction;

namespace tessera::studio {

class ProjectDocument;

class MainWindow : public QMainWindow {
    Q_OBJECT
  public:
    explicit MainWindow(ProjectDocument* doc, QWidget* parent = nullptr);

    // Appends a page to the sidebar; the window takes ownership. Returns its index.
    int addPage(const QString& title, QWidget* page);
    int pageCount() const;
    QString pageTitle(int index) const;
    QWidget* page(int index) const;
    void setCurrentPage(int index);
    int currentPage() const;

    // Opens a project folder (or project.yaml). On failure the banner shows the error, the
    // current project stays and no file is touched. Asks about unsaved changes first when
    // `ask` (the command line and tests pass false).
    bool openProject(const QString& path, bool ask = true);
    QString errorText() const;  // the banner's text ("" when hidden)
    bool isDarkTheme() const { return m_dark; }
    void setDarkTheme(bool dark);
    QStringList recentProjects() const { return m_recent; }

    // Renders every page to dir/<name>-<page>.png (name: the project folder's by default);
    // returns the files written.
    QStringList saveScreenshots(const QString& dir, const QString& name = {});

  Q_SIGNALS:
    void themeChanged(bool dark);

  protected:
    void closeEvent(QCloseEvent* e) override;

  private:
    void buildMenus();
    void showError(const QString& message);
    void clearError();
    void updateTitle();
    bool maybeSave();  // true = go on (saved or discarded), false = cancelled
    bool save();
    bool saveAs();
    void newProject();
    void openDialog();
    void addRecent(const QString& dir);
    void rebuildRecentMenu();

    ProjectDocument* m_doc;
    QListWidget* m_sidebar;
    QStackedWidget* m_stack;
    QLabel* m_header;  // project name and folder
    QLabel* m_banner;
    QMenu* m_recentMenu = nullptr;
    QAction* m_darkAction = nullptr;
    QStringList m_recent;
    bool m_dark = false;
};

// Applies the light or dark palette (Fusion style) to the whole application.
void studio_apply_palette(bool dark);

}  // namespace tessera::studio
