// MainWindow: sidebar + pages, menus, error banner, theme, settings (see main_window.h).
#include "ui/shell/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QPalette>
#include <QRegularExpression>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QStyleFactory>
#include <QTabWidget>
#include <QThread>
#include <QUndoStack>
#include <QVBoxLayout>

#include "ui/common/latest_job.h"
#include "ui/common/project_document.h"

namespace tessera::studio {

namespace {
constexpr int kMaxRecent = 8;
}

// ----------------------------------------------------------------------------
// theme

void studio_apply_palette(bool dark) {
    QApplication::setStyle(QStyleFactory::create("Fusion"));
    if (!dark) {
        QApplication::setPalette(QApplication::style()->standardPalette());
        return;
    }
    QPalette p;
    const QColor window(45, 45, 48), base(30, 30, 32), text(225, 225, 225), accent(64, 132, 214);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, QColor(40, 40, 43));
    p.setColor(QPalette::ToolTipBase, window);
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, window);
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, Qt::red);
    p.setColor(QPalette::Link, accent.lighter(130));
    p.setColor(QPalette::Highlight, accent);
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Mid, QColor(110, 110, 115));
    p.setColor(QPalette::PlaceholderText, QColor(130, 130, 135));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, QColor(125, 125, 130));
    QApplication::setPalette(p);
}

// ----------------------------------------------------------------------------
// layout

MainWindow::MainWindow(ProjectDocument* doc, QWidget* parent) : QMainWindow(parent), m_doc(doc) {
    m_sidebar = new QListWidget;
    m_sidebar->setFixedWidth(150);
    m_sidebar->setFrameShape(QFrame::NoFrame);
    m_sidebar->setStyleSheet(
        "QListView { font-size: 11pt; padding-top: 8px; background: palette(base);"
        " border-right: 1px solid palette(mid); }"
        "QListView::item, QListView::item:!selected { padding: 8px 16px;"
        " border: none; }"
        "QListView::item:selected { padding: 8px 16px; border: none;"
        " background: palette(highlight); color: palette(highlighted-text); }");
    m_sidebar->setFocusPolicy(Qt::NoFocus);
    m_header = new QLabel;
    m_header->setTextFormat(Qt::RichText);
    m_header->setContentsMargins(4, 0, 4, 4);
    m_stack = new QStackedWidget;
    m_banner = new QLabel;
    m_banner->setObjectName("errorBanner");
    m_banner->setWordWrap(true);
    m_banner->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_banner->setStyleSheet(
        "QLabel#errorBanner { background: #fdecea; color: #8a1c1c; "
        "border: 1px solid #f5c2c0; border-radius: 4px; padding: 8px 10px; }");
    m_banner->hide();

    auto* right = new QWidget;
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(8, 8, 8, 8);
    rightLayout->addWidget(m_header);
    rightLayout->addWidget(m_banner);
    rightLayout->addWidget(m_stack, 1);
    auto* central = new QWidget;
    auto* h = new QHBoxLayout(central);
    h->setContentsMargins(0, 0, 0, 0);
    h->setSpacing(0);
    h->addWidget(m_sidebar);
    h->addWidget(right, 1);
    setCentralWidget(central);
    connect(m_sidebar, &QListWidget::currentRowChanged, m_stack, &QStackedWidget::setCurrentIndex);

    QSettings s;
    m_recent.clear();  // one entry per folder ("dir" and "dir/" are the same project)
    for (const QString& d : s.value("recentProjects").toStringList())
        if (!m_recent.contains(QDir::cleanPath(d))) m_recent.append(QDir::cleanPath(d));
    m_dark = s.value("darkTheme", false).toBool();
    buildMenus();
    if (!restoreGeometry(s.value("geometry").toByteArray())) resize(1280, 800);

    connect(m_doc, &ProjectDocument::modifiedChanged, this, [this](bool) { updateTitle(); });
    connect(m_doc, &ProjectDocument::configChanged, this, &MainWindow::updateTitle);
    connect(m_doc, &ProjectDocument::opened, this, [this](const QString& dir) {
        clearError();
        addRecent(dir);
        updateTitle();
    });
    connect(m_doc, &ProjectDocument::loadFailed, this, &MainWindow::showError);
    updateTitle();
}

int MainWindow::addPage(const QString& title, QWidget* page) {
    const int i = m_stack->addWidget(page);
    m_sidebar->addItem(title);
    if (m_sidebar->currentRow() < 0) m_sidebar->setCurrentRow(0);
    // pages with a setDarkTheme(bool) slot follow the theme (plots)
    if (page->metaObject()->indexOfSlot("setDarkTheme(bool)") >= 0) {
        connect(this, SIGNAL(themeChanged(bool)), page, SLOT(setDarkTheme(bool)));
        QMetaObject::invokeMethod(page, "setDarkTheme", Q_ARG(bool, m_dark));
    }
    return i;
}

int MainWindow::pageCount() const {
    return m_stack->count();
}
QString MainWindow::pageTitle(int i) const {
    return m_sidebar->item(i) ? m_sidebar->item(i)->text() : QString();
}
QWidget* MainWindow::page(int i) const {
    return m_stack->widget(i);
}
void MainWindow::setCurrentPage(int i) {
    m_sidebar->setCurrentRow(i);
}
int MainWindow::currentPage() const {
    return m_stack->currentIndex();
}

// ----------------------------------------------------------------------------
// menus

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* a = file->addAction(tr("&New Project…"), this, &MainWindow::newProject);
    a->setShortcut(QKeySequence::New);
    a = file->addAction(tr("&Open Project…"), this, &MainWindow::openDialog);
    a->setShortcut(QKeySequence::Open);
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    file->addSeparator();
    a = file->addAction(tr("&Save"), this, &MainWindow::save);
    a->setShortcut(QKeySequence::Save);
    a = file->addAction(tr("Save &As…"), this, &MainWindow::saveAs);
    a->setShortcut(QKeySequence::SaveAs);
    file->addSeparator();
    a = file->addAction(tr("&Quit"), this, &QWidget::close);
    a->setShortcut(QKeySequence::Quit);
    rebuildRecentMenu();

    QMenu* edit = menuBar()->addMenu(tr("&Edit"));
    QAction* undo = m_doc->undoStack()->createUndoAction(this, tr("&Undo"));
    undo->setShortcut(QKeySequence::Undo);
    QAction* redo = m_doc->undoStack()->createRedoAction(this, tr("&Redo"));
    redo->setShortcut(QKeySequence::Redo);
    edit->addAction(undo);
    edit->addAction(redo);

    QMenu* view = menuBar()->addMenu(tr("&View"));
    m_darkAction = view->addAction(tr("&Dark Theme"));
    m_darkAction->setCheckable(true);
    m_darkAction->setChecked(m_dark);
    m_darkAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_D));
    connect(m_darkAction, &QAction::toggled, this, &MainWindow::setDarkTheme);
    view->addSeparator();
    for (int i = 0; i < 9; ++i) {  // Ctrl+1.. switches pages
        auto* go = new QAction(this);
        go->setShortcut(QKeySequence(Qt::CTRL | (Qt::Key_1 + i)));
        connect(go, &QAction::triggered, this, [this, i] {
            if (i < pageCount()) setCurrentPage(i);
        });
        addAction(go);
    }
}

void MainWindow::rebuildRecentMenu() {
    m_recentMenu->clear();
    for (const QString& dir : m_recent)
        m_recentMenu->addAction(QDir::toNativeSeparators(dir), this,
                                [this, dir] { openProject(dir); });
    m_recentMenu->setEnabled(!m_recent.isEmpty());
}

void MainWindow::addRecent(const QString& path) {
    const QString dir = QDir::cleanPath(path);
    m_recent.removeAll(dir);
    m_recent.prepend(dir);
    while (m_recent.size() > kMaxRecent) m_recent.removeLast();
    QSettings().setValue("recentProjects", m_recent);
    rebuildRecentMenu();
}

// ----------------------------------------------------------------------------
// title, banner, theme

void MainWindow::updateTitle() {
    const QString name = m_doc->isOpen() ? m_doc->projectName() : tr("no project");
    setWindowTitle(tr("%1[*] — Tessera Studio").arg(name));
    setWindowModified(m_doc->isModified());
    m_header->setText(m_doc->isOpen()
                          ? tr("<span style='font-size:14pt; font-weight:600'>%1</span>%2"
                               "&nbsp;&nbsp;<span style='color:gray'>%3</span>")
                                .arg(name.toHtmlEscaped(), m_doc->isModified() ? " •" : "",
                                     QDir::toNativeSeparators(m_doc->yamlPath()).toHtmlEscaped())
                          : tr("<span style='font-size:14pt; font-weight:600'>No project</span>"
                               "&nbsp;&nbsp;<span style='color:gray'>File › Open (Ctrl+O) or "
                               "File › New (Ctrl+N)</span>"));
}

void MainWindow::showError(const QString& message) {
    m_banner->setText(tr("<b>Could not open the project.</b> Nothing was changed on disk.<br>%1")
                          .arg(message.toHtmlEscaped()));
    m_banner->show();
    statusBar()->showMessage(message.section('\n', 0, 0), 10000);
}

void MainWindow::clearError() {
    m_banner->clear();
    m_banner->hide();
}

QString MainWindow::errorText() const {
    return m_banner->isHidden() ? QString() : m_banner->text();
}

void MainWindow::setDarkTheme(bool dark) {
    m_dark = dark;
    if (m_darkAction && m_darkAction->isChecked() != dark) m_darkAction->setChecked(dark);
    studio_apply_palette(dark);
    QSettings().setValue("darkTheme", dark);
    Q_EMIT themeChanged(dark);
}

// ----------------------------------------------------------------------------
// file actions

bool MainWindow::openProject(const QString& path, bool ask) {
    if (ask && !maybeSave()) return false;
    QString error;
    return m_doc->open(path, &error);  // opened / loadFailed update the window
}

void MainWindow::openDialog() {
    const QString dir =
        QFileDialog::getExistingDirectory(this, tr("Open Tessera project"), m_doc->projectDir());
    if (!dir.isEmpty()) openProject(dir);
}

void MainWindow::newProject() {
    if (!maybeSave()) return;
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Folder for the new project"));
    if (dir.isEmpty()) return;
    if (QFileInfo::exists(QDir(dir).filePath("project.yaml"))) {
        openProject(dir, false);
        return;
    }
    tessera::RunConfig cfg;  // the engine's defaults: gpt-tiny on brown, CPU
    cfg.model.n_layer = 4, cfg.model.n_head = 4, cfg.model.d_model = 128, cfg.model.seq_len = 128;
    cfg.data.dataset = "brown";
    cfg.parallel.recompute = {"none"};
    m_doc->create(dir, cfg);
}

bool MainWindow::save() {
    if (!m_doc->isOpen()) return false;
    QString error;
    if (m_doc->save(&error)) {
        statusBar()->showMessage(tr("Saved %1").arg(m_doc->yamlPath()), 4000);
        return true;
    }
    QMessageBox::warning(this, tr("Save failed"), error);
    return false;
}

bool MainWindow::saveAs() {
    if (!m_doc->isOpen()) return false;
    const QString dir =
        QFileDialog::getExistingDirectory(this, tr("Save project to folder"), m_doc->projectDir());
    if (dir.isEmpty()) return false;
    QString error;
    if (m_doc->saveAs(dir, &error)) return true;
    QMessageBox::warning(this, tr("Save failed"), error);
    return false;
}

bool MainWindow::maybeSave() {
    if (!m_doc->isModified()) return true;
    const auto answer = QMessageBox::question(
        this, tr("Unsaved changes"),
        tr("%1 has unsaved changes. Save them?").arg(m_doc->projectName()),
        QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
    if (answer == QMessageBox::Save) return save();
    return answer == QMessageBox::Discard;
}

void MainWindow::closeEvent(QCloseEvent* e) {
    if (!maybeSave()) {
        e->ignore();
        return;
    }
    QSettings().setValue("geometry", saveGeometry());
    e->accept();
}

// ----------------------------------------------------------------------------
// screenshots

QStringList MainWindow::saveScreenshots(const QString& dir, const QString& name) {
    QDir().mkpath(dir);
    QStringList files;
    const QString project = !name.isEmpty()   ? name
                            : m_doc->isOpen() ? QFileInfo(m_doc->projectDir()).fileName()
                                              : QStringLiteral("none");
    // "System (GPU, host)" -> "system-gpu-host"
    auto slug = [](const QString& title) {
        return title.toLower()
            .replace(QRegularExpression("[^a-z0-9]+"), "-")
            .remove(QRegularExpression("^-|-$"));
    };
    auto save = [&](const QString& name) {
        QApplication::processEvents();
        // what the page works out in the background shown first (the Plan page's answers)
        QElapsedTimer waited;
        waited.start();
        auto busy = [&] {
            for (const LatestJob* j : findChildren<LatestJob*>())
                if (j->busy()) return true;
            return false;
        };
        while (busy() && waited.elapsed() < 30000) {
            QApplication::processEvents(QEventLoop::AllEvents, 20);
            QThread::msleep(5);
        }
        QApplication::processEvents();
        const QString path = QDir(dir).filePath(QStringLiteral("%1-%2.png").arg(project, name));
        if (grab().save(path)) files << path;
    };
    const int before = currentPage();
    for (int i = 0; i < pageCount(); ++i) {
        setCurrentPage(i);
        const QString name = slug(pageTitle(i));
        save(name);
        // the page's other tabs too (the Monitor's System tab): <project>-<page>-<tab>.png
        for (QTabWidget* tabs : page(i)->findChildren<QTabWidget*>()) {
            if (!tabs->isVisible()) continue;
            const int shown = tabs->currentIndex();
            for (int t = 0; t < tabs->count(); ++t) {
                if (t == shown) continue;
                tabs->setCurrentIndex(t);
                save(name + "-" + slug(tabs->tabText(t)));
            }
            tabs->setCurrentIndex(shown);
        }
    }
    setCurrentPage(before);
    return files;
}

}  // namespace tessera::studio
