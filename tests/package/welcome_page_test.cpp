// The Welcome page (offscreen): where it finds the example projects, creating a new project from
// the quickstart template (named after its folder; refused with a reason when the folder already
// holds a project or the template is missing), and the page listing the source tree's examples.
#include "ui/welcome/welcome_page.h"

#include <gtest/gtest.h>

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QStandardPaths>
#include <QTemporaryDir>

#include "tests/support/paths.h"
#include "ui/common/project_document.h"
#include "ui/shell/main_window.h"

using namespace tessera::studio;

namespace {

const QString kSourceProjects = QDir::cleanPath(QString(TESSERA_TESTS_DIR) + "/../projects");

class WelcomeTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        static int argc = 1;
        static char arg0[] = "welcome_page_test";
        static char* argv[] = {arg0, nullptr};
        qputenv("QT_QPA_PLATFORM", "offscreen");
        QStandardPaths::setTestModeEnabled(true);
        if (!QApplication::instance()) new QApplication(argc, argv);
    }
};

TEST_F(WelcomeTest, FindsTheSourceTreesExamplesAboveTheBinary) {
    qunsetenv("TESSERA_PROJECTS_DIR");
    // <source>/build*/bin -> walks up to the source tree's projects/
    EXPECT_EQ(welcome_find_examples_dir(QString(TESSERA_TESTS_DIR) + "/../build-x/bin"),
              kSourceProjects);
    EXPECT_EQ(welcome_find_examples_dir(QString(TESSERA_BIN_DIR)), kSourceProjects);
    QTemporaryDir nowhere;
    EXPECT_TRUE(welcome_find_examples_dir(nowhere.path()).isEmpty());
    // an install: <prefix>/bin next to <prefix>/share/tessera/projects
    QTemporaryDir prefix;
    QDir().mkpath(prefix.filePath("share/tessera/projects"));
    QDir().mkpath(prefix.filePath("bin"));
    EXPECT_EQ(welcome_find_examples_dir(prefix.filePath("bin")),
              prefix.filePath("share/tessera/projects"));
}

TEST_F(WelcomeTest, CreatesAProjectFromTheQuickstartTemplate) {
    QTemporaryDir tmp;
    const QString dest = tmp.filePath("my model");
    EXPECT_EQ(welcome_create_project(kSourceProjects + "/quickstart", dest), QString());
    QFile f(dest + "/project.yaml");
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(f.readAll());
    EXPECT_TRUE(text.contains("\nname: my-model\n")) << text.toStdString();
    EXPECT_TRUE(text.contains("preset: gpt-tiny")) << text.toStdString();
    // a second time: the folder already holds a project
    const QString err = welcome_create_project(kSourceProjects + "/quickstart", dest);
    EXPECT_TRUE(err.contains("already exists")) << err.toStdString();
    // no template
    const QString err2 = welcome_create_project(tmp.filePath("none"), tmp.filePath("other"));
    EXPECT_TRUE(err2.contains("template not found")) << err2.toStdString();
    EXPECT_FALSE(QFile::exists(tmp.filePath("other/project.yaml")));
}

TEST_F(WelcomeTest, PageListsExamplesAndTheDataCache) {
    qputenv("TESSERA_PROJECTS_DIR", kSourceProjects.toUtf8());
    qputenv("TESSERA_DATA_DIR", "/tmp/tessera-welcome-cache");
    ProjectDocument doc;
    MainWindow win(&doc);
    auto* page = new WelcomePage(&win, &doc, &win);
    win.addPage("Welcome", page);
    const QStringList examples = page->exampleProjects();
    EXPECT_TRUE(examples.contains(kSourceProjects + "/quickstart"))
        << examples.join(", ").toStdString();
    EXPECT_EQ(welcome_data_cache_dir(), "/tmp/tessera-welcome-cache");
    qunsetenv("TESSERA_PROJECTS_DIR");
    qunsetenv("TESSERA_DATA_DIR");
}

}  // namespace
