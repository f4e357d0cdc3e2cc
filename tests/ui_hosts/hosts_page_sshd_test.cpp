// The Hosts page against a real sshd (tests/ssh/loopback_sshd.h: 127.0.0.1 and 127.0.0.2 as two
// hosts) and the real `tessera`, the way a user meets a new cluster: the first preflight finds both
// host keys unknown and offers "Trust host key…" with their fingerprints; after trusting both, the
// checklist is all ready; then the run starts as the Monitor page starts it (RunController) and
// both hosts' ranks report into the project's runs.db. Renders the page to a PNG for a look.
#include <gtest/gtest.h>

#include <QApplication>
#include <QDir>
#include <QSignalSpy>
#include <QTreeWidget>
#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "engine/launch/run_control.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "tests/ssh/loopback_sshd.h"
#include "tests/support/paths.h"
#include "ui/common/project_document.h"
#include "ui/hosts/hosts_page.h"

using namespace tessera;
using namespace tessera::studio;
namespace fs = std::filesystem;

namespace {

const std::string kTessera = std::string(TESSERA_BIN_DIR) + "/tessera";

// Waits for the page's current preflight (and the re-check a trust starts) to finish.
bool wait_done(HostsPage& page, QSignalSpy& spy, int count) {
    for (int i = 0; i < 120 && spy.count() < count; ++i) spy.wait(1000);
    return spy.count() >= count;
}

QStringList host_states(HostsPage& page) {
    QStringList s;
    for (int i = 0; i < page.checklist()->topLevelItemCount(); ++i)
        s << page.checklist()->topLevelItem(i)->text(1);
    return s;
}

TEST(HostsPageRealSshd, TrustBothHostsThenPreflightPassesAndTheRunUsesBoth) {
    test_support::LoopbackSshd sshd;
    std::string why = sshd.start("hosts_page");
    ASSERT_EQ(why, "");
    std::ofstream(sshd.known_hosts()) << "";  // a new cluster: nothing trusted yet
    fs::path proj = sshd.dir / "project";
    fs::create_directories(proj);
    std::ofstream(proj / "project.yaml")
        << R"(name: two-hosts
model: {preset: gpt-tiny, n_layer: 2, n_head: 2, d_model: 32, seq_len: 32}
data: {dataset: brown}
train: {steps: 6, micro_batch: 2, eval_every: 0, threads: 1}
parallel: {dp: 2}
log: {db: runs.db, every: 1}
cluster:
  hosts:
    - {host: 127.0.0.1, port: )"
        << sshd.port << ", identity: " << sshd.user_key << R"(, slots: 1}
    - {host: 127.0.0.2, port: )"
        << sshd.port << ", identity: " << sshd.user_key << R"(, slots: 1}
  workdir: )"
        << (sshd.dir / "work").string() << "\n  tessera: " << kTessera
        << "\n  known_hosts: " << sshd.known_hosts()
        << "\n  rendezvous_port: " << test_support::free_port() << "\n";
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(proj.string()), &err)) << err.toStdString();
    HostsPage page(&doc);
    page.setTesseraBinary(QString::fromStdString(kTessera));
    page.resize(1130, 760);
    page.show();
    QSignalSpy done(&page, &HostsPage::preflightDone);

    page.runPreflight();
    ASSERT_TRUE(wait_done(page, done, 1)) << page.preflightStatus().toStdString();
    const QString p = QString::number(sshd.port);
    EXPECT_EQ(page.trustableHosts(), (QStringList{"127.0.0.1:" + p, "127.0.0.2:" + p}))
        << page.bannerText().toStdString();
    EXPECT_EQ(host_states(page), (QStringList{"not ready", "not ready"}));

    QStringList asked;
    page.setTrustConfirm([&](const QString& host, const QStringList& fps) {
        asked << host;
        EXPECT_EQ(fps.size(), 1);
        EXPECT_TRUE(fps.value(0).startsWith("ED25519 SHA256:")) << fps.value(0).toStdString();
        return true;
    });
    ASSERT_TRUE(page.trustHostKey("127.0.0.1:" + p));
    ASSERT_TRUE(wait_done(page, done, 2));
    EXPECT_EQ(page.trustableHosts(), QStringList{"127.0.0.2:" + p});
    ASSERT_TRUE(page.trustHostKey("127.0.0.2:" + p));
    ASSERT_TRUE(wait_done(page, done, 3));
    EXPECT_EQ(asked, (QStringList{"127.0.0.1:" + p, "127.0.0.2:" + p}));
    EXPECT_TRUE(page.trustableHosts().isEmpty());
    EXPECT_EQ(host_states(page), (QStringList{"ready", "ready"}))
        << page.preflightStatus().toStdString();
    EXPECT_NE(
        test_support::slurp(sshd.known_hosts()).find("[127.0.0.2]:" + std::to_string(sshd.port)),
        std::string::npos);
    page.grab().save(QString(TESSERA_BIN_DIR) + "/../hosts_page_real_sshd.png");

    // the run, started as the Monitor page starts it
    RunController rc;
    std::string db = (proj / "runs.db").string();
    rc.start(kTessera, (proj / "project.yaml").string(), db);
    for (int i = 0; i < 600 && rc.state() != RunState::finished && rc.state() != RunState::failed;
         ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(rc.state(), RunState::finished) << rc.exit_code();
    RunStore store = RunStore::open(db, true);
    auto runs = store.runs_list();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, tessera::run_status::completed) << runs[0].message;
    std::map<int, int> rows;
    for (const auto& m : store.metrics(runs[0].id)) rows[m.rank]++;
    EXPECT_GT(rows[0], 0);
    EXPECT_GT(rows[1], 0) << "no metrics from the second host";
    sshd.stop();
    if (!::testing::Test::HasFailure()) fs::remove_all(sshd.dir);
}

}  // namespace

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
