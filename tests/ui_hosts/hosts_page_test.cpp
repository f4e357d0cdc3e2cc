// The Hosts page offscreen, on a copy of projects/cluster-example: a host edit is one undoable
// edit; a host name with shell metacharacters (and the other refused edits) shows its reason and
// leaves the document as it was; hostfiles import (good) or leave the hosts alone with the reason
// in the banner (bad); the cluster survives save and load; the Plan page's GPU grid has one row per
// host; and preflight runs a fake `tessera` (a shell script that records its argv and prints a
// canned report) on the unsaved text, shows the checklist, offers "Trust host key…" for the
// unknown key only, runs `hosts CONFIG trust HOST --yes` on confirmation and checks again.
// Renders the page to PNGs in the build dir for a look.
#include "ui/hosts/hosts_page.h"

#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeWidget>
#include <QUndoStack>

#include "engine/config/cluster_rules.h"
#include "engine/config/config.h"
#include "tests/support/paths.h"
#include "ui/common/project_document.h"
#include "ui/hosts/cluster_tables.h"
#include "ui/hosts/preflight_runner.h"
#include "ui/plan/gpu_grid.h"
#include "ui/plan/plan_page.h"

using namespace tessera;
using namespace tessera::studio;

namespace {

QByteArray read_all(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void write_all(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly)) << path.toStdString();
    f.write(bytes);
}

// The config without where it was read from: what must survive a save.
RunConfig content(RunConfig c) {
    c.source_path.clear(), c.source_text.clear(), c.base_dir.clear();
    return c;
}

QModelIndex cell(HostTableModel* m, int row, HostColumn c) {
    return m->index(row, int(c));
}

// A copy of projects/cluster-example (two hosts on port 2222, dp 2) opened in a HostsPage.
struct Fixture {
    QTemporaryDir tmp;
    QString dir;
    ProjectDocument doc;
    std::unique_ptr<HostsPage> page;
    Fixture() {
        dir = tmp.filePath("cluster");
        QDir().mkpath(dir);
        const QString src = QString(TESSERA_TESTS_DIR) + "/../projects/cluster-example/";
        write_all(dir + "/project.yaml", read_all(src + "project.yaml"));
        write_all(dir + "/hosts.txt", read_all(src + "hosts.txt"));
        QString err;
        EXPECT_TRUE(doc.open(dir, &err)) << err.toStdString();
        page = std::make_unique<HostsPage>(&doc);
        page->resize(1130, 760);
        page->show();
    }
};

// ----------------------------------------------------------------------------
// the fake tessera: argv to argv.log (one line per run, words ended by '|'), the config it was
// given to seen.yaml; prints the report named by the file `mode` (default: one unknown key, or
// all ok once `hosts ... trust` has run)

const char* kFakeTessera = R"SH(#!/bin/sh
d="$(dirname "$0")"
for a in "$@"; do printf '%s|' "$a" >> "$d/argv.log"; done
echo >> "$d/argv.log"
mode=$(cat "$d/mode" 2>/dev/null)
case "$1" in
hosts) touch "$d/trusted"; echo "127.0.0.2:2222: trusted (added to $d/known_hosts)"; exit 0 ;;
preflight)
  cp "$2" "$d/seen.yaml"
  case "$mode" in
  sleep) exec sleep 30 ;;
  error) echo "$2:44:7: cluster.hosts[0].host: expected a host name, found 'a;id'" >&2; exit 2 ;;
  changed) cat "$d/changed.json"; exit 1 ;;
  garbled) cat "$d/garbled.json"; exit 1 ;;
  esac
  if [ -f "$d/trusted" ]; then cat "$d/ok.json"; exit 0; fi
  cat "$d/unknown.json"; exit 1 ;;
esac
exit 3
)SH";

QByteArray report_json(const char* second_key_status, const char* second_key_detail,
                       const char* fix) {
    return QByteArray(R"J({"ok": false, "hosts": [
  {"host": "127.0.0.1:2222", "first_rank": 0, "ranks": 1, "ok": true, "checks": [
    {"name": "host key", "status": "ok", "detail": "known: ED25519 SHA256:AAAAfirsthostkey", "fix": ""},
    {"name": "ssh", "status": "ok", "detail": "connected as alice", "fix": ""},
    {"name": "tessera", "status": "ok", "detail": "tessera 0.1.0 (same as here)", "fix": ""},
    {"name": "gpus", "status": "warn", "detail": "no GPU: 2 cores for 1 CPU rank", "fix": "runtime.device: cpu runs"}]},
  {"host": "127.0.0.2:2222", "first_rank": 1, "ranks": 1, "ok": false, "checks": [
    {"name": "host key", "status": ")J") +
           second_key_status + R"J(", "detail": ")J" + second_key_detail + R"J(", "fix": ")J" +
           fix + R"J("}]}]})J";
}

struct FakeTessera {
    QString dir, bin;
    explicit FakeTessera(const QTemporaryDir& tmp) : dir(tmp.filePath("fake")) {
        QDir().mkpath(dir);
        bin = dir + "/tessera";
        write_all(bin, kFakeTessera);
        QFile::setPermissions(bin, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
        write_all(
            dir + "/unknown.json",
            report_json("fail", "unknown: ED25519 SHA256:BBBBsecondhostkey, RSA SHA256:CCCCrsa",
                        "compare the fingerprint with the host's own, then trust it"));
        write_all(dir + "/changed.json",
                  report_json("fail",
                              "host 127.0.0.2:2222: its host key has CHANGED since it was trusted "
                              "(now: ED25519 SHA256:DDDD)",
                              "if the host was reinstalled: ssh-keygen -R '[127.0.0.2]:2222'"));
        QByteArray ok = report_json("ok", "known: ED25519 SHA256:BBBBsecondhostkey", "");
        ok.replace(R"J("ok": false, "checks")J", R"J("ok": true, "checks")J")
            .replace(R"J({"ok": false)J", R"J({"ok": true)J");
        write_all(dir + "/ok.json", ok);
        write_all(dir + "/garbled.json",
                  R"J({"ok": false, "hosts": [{"host": "h", "first_rank": 0, "ranks": 1,
                                         "checks": [{"name": "ssh", "status": 3, "detail": ""}]}]})J");
    }
    void setMode(const QByteArray& m) { write_all(dir + "/mode", m); }
    QStringList runs() const {  // one entry per invocation: "preflight|CONFIG|--json|"
        return QString::fromUtf8(read_all(dir + "/argv.log")).split('\n', Qt::SkipEmptyParts);
    }
};

bool wait_done(HostsPage& page) {
    QSignalSpy done(&page, &HostsPage::preflightDone);
    return done.wait(15000);
}

}  // namespace

// ----------------------------------------------------------------------------
// editing

TEST(HostsPage, LoadsTheClusterAndAHostEditIsOneUndoableStep) {
    Fixture f;
    HostTableModel* m = f.page->hostModel();
    QAbstractItemModelTester hostTester(m, QAbstractItemModelTester::FailureReportingMode::Fatal);
    QAbstractItemModelTester envTester(f.page->envModel(),
                                       QAbstractItemModelTester::FailureReportingMode::Fatal);
    ASSERT_EQ(m->rowCount(), 2);
    EXPECT_EQ(cell(m, 0, HostColumn::host).data().toString(), "127.0.0.1");
    EXPECT_EQ(cell(m, 1, HostColumn::port).data().toInt(), 2222);
    EXPECT_EQ(cell(m, 0, HostColumn::ranks).data().toString(), "0");
    EXPECT_EQ(cell(m, 1, HostColumn::ranks).data().toString(), "1");
    EXPECT_EQ(f.page->envModel()->rowCount(), 1);

    const int undo0 = f.doc.undoStack()->count();
    ASSERT_TRUE(m->setData(cell(m, 1, HostColumn::host), "gpu-b.example.org"));
    EXPECT_EQ(f.doc.config().cluster.hosts[1].host, "gpu-b.example.org");
    EXPECT_EQ(cell(m, 1, HostColumn::host).data().toString(), "gpu-b.example.org");
    EXPECT_EQ(f.doc.undoStack()->count(), undo0 + 1);
    ASSERT_TRUE(m->setData(cell(m, 0, HostColumn::slots), 3));
    EXPECT_EQ(cell(m, 1, HostColumn::ranks).data().toString(), "unused");  // dp 2 fits on host 1
    EXPECT_EQ(cell(m, 0, HostColumn::ranks).data().toString(), "0–1");

    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config().cluster.hosts[0].slots, 1);
    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config().cluster.hosts[1].host, "127.0.0.2");
    EXPECT_EQ(cell(m, 1, HostColumn::host).data().toString(), "127.0.0.2");
    EXPECT_FALSE(f.doc.isModified());
    f.doc.undoStack()->redo();
    EXPECT_EQ(f.doc.config().cluster.hosts[1].host, "gpu-b.example.org");

    // add, move, remove: each one step
    ASSERT_TRUE(m->addHost());
    ASSERT_EQ(m->rowCount(), 3);
    EXPECT_EQ(f.doc.config().cluster.hosts[2].host, "node3");
    ASSERT_TRUE(m->moveHost(2, -2));
    EXPECT_EQ(f.doc.config().cluster.hosts[0].host, "node3");
    EXPECT_EQ(cell(m, 0, HostColumn::ranks).data().toString(), "0");
    EXPECT_EQ(cell(m, 2, HostColumn::ranks).data().toString(), "unused");
    ASSERT_TRUE(m->removeHost(0));
    EXPECT_EQ(f.doc.config().cluster.hosts[0].host, "127.0.0.1");
    f.doc.undoStack()->undo();
    f.doc.undoStack()->undo();
    f.doc.undoStack()->undo();
    EXPECT_EQ(m->rowCount(), 2);
    EXPECT_EQ(f.doc.config().cluster.hosts[1].host, "gpu-b.example.org");

    // the remote side's fields are undoable edits too
    auto* workdir = f.page->findChild<QLineEdit*>("workdir");
    ASSERT_NE(workdir, nullptr);
    workdir->setText("/scratch/run");
    Q_EMIT workdir->editingFinished();
    EXPECT_EQ(f.doc.config().cluster.workdir, "/scratch/run");
    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config().cluster.workdir, "/tmp/tessera-cluster-example");
    EXPECT_EQ(workdir->text(), "/tmp/tessera-cluster-example");
}

TEST(HostsPage, RefusedEditsShowTheirReasonAndLeaveTheDocumentAlone) {
    Fixture f;
    HostTableModel* m = f.page->hostModel();
    const RunConfig before = f.doc.config();
    const int undo0 = f.doc.undoStack()->count();
    auto unchanged = [&] {
        EXPECT_TRUE(f.doc.config() == before);
        EXPECT_EQ(f.doc.undoStack()->count(), undo0);
        EXPECT_FALSE(f.doc.isModified());
    };

    EXPECT_FALSE(m->setData(cell(m, 0, HostColumn::host), "a;id"));
    unchanged();
    const QString issue = f.page->issueText("cluster.hosts");
    EXPECT_TRUE(
        issue.contains("Not applied — cluster.hosts[0].host: expected a host name or address"))
        << issue.toStdString();
    EXPECT_TRUE(issue.contains("found 'a;id', which contains ';'")) << issue.toStdString();
    EXPECT_EQ(cell(m, 0, HostColumn::host).data().toString(), "127.0.0.1");
    EXPECT_TRUE(f.page->findChild<QLabel*>("issue:cluster.hosts")->isVisible());

    EXPECT_FALSE(m->setData(cell(m, 0, HostColumn::host), ""));
    EXPECT_TRUE(f.page->issueText("cluster.hosts")
                    .contains("cluster.hosts[0].host: expected a host name, found nothing"))
        << f.page->issueText("cluster.hosts").toStdString();
    EXPECT_FALSE(
        m->setData(cell(m, 1, HostColumn::host), "127.0.0.1"));  // same host and port as row 1
    EXPECT_TRUE(f.page->issueText("cluster.hosts")
                    .contains("cluster.hosts[1].host: expected one row per machine"))
        << f.page->issueText("cluster.hosts").toStdString();
    EXPECT_FALSE(m->setData(cell(m, 0, HostColumn::user), "root$(reboot)"));
    EXPECT_FALSE(m->setData(cell(m, 0, HostColumn::slots), 0));
    EXPECT_TRUE(f.page->issueText("cluster.hosts")
                    .contains("cluster.hosts[0].slots: expected a positive integer up to 4096 (the "
                              "ranks this host runs), found 0"))
        << f.page->issueText("cluster.hosts").toStdString();
    EXPECT_FALSE(m->setData(cell(m, 0, HostColumn::port), "ssh"));
    EXPECT_TRUE(f.page->issueText("cluster.hosts")
                    .contains("cluster.hosts[0].port: expected a whole number, found 'ssh'"))
        << f.page->issueText("cluster.hosts").toStdString();
    EXPECT_FALSE(m->removeHost(1));  // 1 slot left for dp 2
    EXPECT_TRUE(f.page->issueText("cluster.hosts")
                    .contains("cluster.slots: expected at least dp x tp x pp = 2 x 1 x 1 = 2 slots "
                              "(add slots, or lower the plan), found "
                              "1 slot on 1 host"))
        << f.page->issueText("cluster.hosts").toStdString();
    EXPECT_FALSE(f.page->envModel()->setData(f.page->envModel()->index(0, 0), "1BAD"));
    EXPECT_TRUE(f.page->issueText("cluster.env")
                    .contains("cluster.env[0]: expected an environment variable name"))
        << f.page->issueText("cluster.env").toStdString();
    EXPECT_TRUE(f.page->issueText("cluster.env").contains("found '1BAD'"));
    auto* tessera = f.page->findChild<QLineEdit*>("tesseraPath");
    tessera->setText("  ");
    Q_EMIT tessera->editingFinished();
    EXPECT_TRUE(
        f.page->issueText("cluster.tessera")
            .contains(
                "cluster.tessera: expected a path, or a name on the remote PATH, found nothing"))
        << f.page->issueText("cluster.tessera").toStdString();
    EXPECT_EQ(tessera->text(), "tessera");
    unchanged();

    // a good edit clears what was refused
    ASSERT_TRUE(m->setData(cell(m, 0, HostColumn::user), "alice"));
    EXPECT_TRUE(f.page->issueText("cluster.hosts").isEmpty());

    // a shortage made elsewhere (dp raised on the Plan page) shows, and does not block other edits
    f.doc.edit("Set dp", [](RunConfig& c) { c.parallel.dp = 4; });
    EXPECT_TRUE(
        f.page->issueText("cluster.slots")
            .contains("cluster.slots: expected at least dp x tp x pp = 4 x 1 x 1 = 4 slots"))
        << f.page->issueText("cluster.slots").toStdString();
    EXPECT_TRUE(m->setData(cell(m, 1, HostColumn::user), "bob"));
    EXPECT_TRUE(m->setData(cell(m, 1, HostColumn::slots), 3));  // enough again
    EXPECT_TRUE(f.page->issueText("cluster.slots").isEmpty());
}

TEST(HostsPage, ImportsAHostfileOrShowsWhyNot) {
    Fixture f;
    HostTableModel* m = f.page->hostModel();
    const RunConfig before = f.doc.config();
    const QString good = f.tmp.filePath("good-hosts");
    write_all(good,
              "# three nodes\ngpu-a slots=4 user=alice port=2200\n"
              "gpu-b slots=4 max_slots=8 identity=~/.ssh/tessera addr=10.0.0.2\ngpu-c slots=2\n");
    ASSERT_TRUE(f.page->importHostfile(good)) << f.page->bannerText().toStdString();
    EXPECT_TRUE(f.page->bannerText().isEmpty());
    ASSERT_EQ(m->rowCount(), 3);
    const auto& h = f.doc.config().cluster.hosts;
    EXPECT_EQ(h[0].user, "alice");
    EXPECT_EQ(h[0].port, 2200);
    EXPECT_EQ(h[1].identity, "~/.ssh/tessera");
    EXPECT_EQ(h[1].addr, "10.0.0.2");
    EXPECT_EQ(h[2].slots, 2);
    EXPECT_EQ(f.doc.config().cluster.workdir, before.cluster.workdir);  // only the hosts
    f.doc.undoStack()->undo();                                          // one step
    EXPECT_TRUE(f.doc.config() == before);

    const QString bad = f.tmp.filePath("hosts.txt");
    write_all(bad, "gpu-a slots=2\n\na;b slots=1\n");
    EXPECT_FALSE(f.page->importHostfile(bad));
    EXPECT_TRUE(f.page->bannerText().contains("hosts.txt:3")) << f.page->bannerText().toStdString();
    EXPECT_TRUE(f.page->bannerText().contains("contains ';'"))
        << f.page->bannerText().toStdString();
    EXPECT_TRUE(f.doc.config() == before);
    EXPECT_TRUE(f.page->findChild<QLabel*>("hostsBanner")->isVisible());

    write_all(bad, "gpu-a slots=zero\n");
    EXPECT_FALSE(f.page->importHostfile(bad));
    EXPECT_TRUE(f.page->bannerText().contains("slots=zero")) << f.page->bannerText().toStdString();
    write_all(bad, "gpu-a slots=1\n");  // parses, but 1 slot cannot run dp 2
    EXPECT_FALSE(f.page->importHostfile(bad));
    EXPECT_TRUE(f.page->bannerText().contains(
        "cluster.slots: expected at least dp x tp x pp = 2 x 1 x 1 = 2 slots"))
        << f.page->bannerText().toStdString();
    write_all(bad, "# nothing\n");
    EXPECT_FALSE(f.page->importHostfile(bad));
    EXPECT_FALSE(f.page->importHostfile(f.tmp.filePath("no-such-file")));
    EXPECT_TRUE(f.page->bannerText().contains("cannot read"));
    EXPECT_TRUE(f.doc.config() == before);

    ASSERT_TRUE(f.page->importHostfile(f.dir + "/hosts.txt"));  // the example's own file
    EXPECT_TRUE(f.page->bannerText().isEmpty());
    EXPECT_TRUE(f.doc.config().cluster.hosts == before.cluster.hosts);
}

TEST(HostsPage, TheClusterSurvivesSaveAndLoad) {
    Fixture f;
    HostTableModel* m = f.page->hostModel();
    ASSERT_TRUE(m->setData(cell(m, 0, HostColumn::user), "alice"));
    ASSERT_TRUE(m->setData(cell(m, 1, HostColumn::identity), "~/.ssh/id_tessera"));
    ASSERT_TRUE(m->setData(cell(m, 1, HostColumn::addr), "10.1.0.2"));
    ASSERT_TRUE(f.page->envModel()->addVariable());
    ASSERT_TRUE(f.page->envModel()->setData(f.page->envModel()->index(1, 0), "NCCL_SOCKET_IFNAME"));
    ASSERT_TRUE(
        f.page->envModel()->setData(f.page->envModel()->index(1, 1), "eth0 # not a comment"));
    auto* port = f.page->findChild<QSpinBox*>("rendezvousPort");
    port->setValue(29555);
    EXPECT_EQ(f.doc.config().cluster.rendezvous_port, 29555);
    QString err;
    ASSERT_TRUE(f.doc.save(&err)) << err.toStdString();
    const RunConfig saved = tessera::config_load((f.dir + "/project.yaml").toStdString());
    EXPECT_TRUE(content(saved) == content(f.doc.config())) << tessera::config_to_yaml(saved);
    EXPECT_EQ(saved.cluster.env.at(1).second, "eth0 # not a comment");
    ProjectDocument again;
    ASSERT_TRUE(again.open(f.dir, &err)) << err.toStdString();
    EXPECT_TRUE(content(again.config()) == content(f.doc.config()));

    // a project whose hosts come from `hostfile:` shows them; an edit writes them inline
    QByteArray yaml = read_all(f.dir + "/project.yaml");
    const int from = yaml.indexOf("  hosts:"), to = yaml.indexOf("  workdir:");
    ASSERT_TRUE(from > 0 && to > from) << yaml.toStdString();
    yaml.replace(from, to - from, "  hostfile: hosts.txt\n");
    write_all(f.dir + "/project.yaml", yaml);
    ASSERT_TRUE(f.doc.open(f.dir, &err)) << err.toStdString();
    EXPECT_EQ(m->rowCount(), 2);
    EXPECT_TRUE(f.page->findChild<QLabel*>("hostfileNote")->isVisible());
    ASSERT_TRUE(m->setData(cell(m, 1, HostColumn::slots), 2));
    EXPECT_TRUE(f.doc.config().cluster.hostfile.empty());
    EXPECT_FALSE(f.page->findChild<QLabel*>("hostfileNote")->isVisible());
    ASSERT_TRUE(f.doc.save(&err)) << err.toStdString();
    const RunConfig inl = tessera::config_load((f.dir + "/project.yaml").toStdString());
    ASSERT_EQ(inl.cluster.hosts.size(), 2u);
    EXPECT_EQ(inl.cluster.hosts[1].slots, 2);
    EXPECT_TRUE(inl.cluster.hostfile.empty());
    f.doc.undoStack()->undo();  // back to the hostfile
    EXPECT_EQ(f.doc.config().cluster.hostfile, "hosts.txt");
}

TEST(HostsPage, ThePlanGridHasOneRowPerHost) {
    Fixture f;
    PlanPage plan(&f.doc);
    plan.resize(1400, 980);
    plan.show();
    GpuGrid* g = plan.gpuGrid();
    ASSERT_EQ(g->rowCount(), 2);
    EXPECT_EQ(g->gpuCount(), 2);
    EXPECT_EQ(g->rowLabel(0), "127.0.0.1:2222");
    EXPECT_EQ(g->rowLabel(1), "127.0.0.2:2222");
    EXPECT_EQ(g->rowOf(0), 0);
    EXPECT_EQ(g->rowOf(1), 1);
    EXPECT_GT(g->cellRect(1).top(), g->cellRect(0).bottom());
    EXPECT_TRUE(g->cellToolTip(1).startsWith("host 127.0.0.2:2222 slot 0\nglobal rank 1"))
        << g->cellToolTip(1).toStdString();
    EXPECT_TRUE(plan.issueText("parallel.dp").isEmpty())
        << plan.issueText("parallel.dp").toStdString();

    // three slots on the first host: ranks 0 and 1 there, the second host idle
    HostTableModel* m = f.page->hostModel();
    ASSERT_TRUE(m->setData(cell(m, 0, HostColumn::slots), 3));
    EXPECT_EQ(g->rowOf(1), 0);
    EXPECT_EQ(g->rowOf(3), 1);
    EXPECT_EQ(g->cellRect(1).top(), g->cellRect(0).top());
    EXPECT_TRUE(g->cellToolTip(3).contains("idle")) << g->cellToolTip(3).toStdString();
    EXPECT_TRUE(plan.issueText("parallel.dp").isEmpty());  // spare slots are fine
    // more ranks than slots: the Plan page says so
    f.doc.edit("Set dp", [](RunConfig& c) { c.parallel.dp = 8; });
    EXPECT_FALSE(plan.issueText("parallel.dp").isEmpty());
    // no hosts: this host again (a CPU project: its ranks on host 0)
    f.doc.edit("Local", [](RunConfig& c) { c.cluster.hosts.clear(); });
    EXPECT_EQ(g->rowLabel(0), "host 0");
    EXPECT_EQ(g->rowCount(), 1);
    EXPECT_EQ(g->gpuCount(), 8);  // the plan's 8 ranks on one host, not the hosts' 4 slots
    EXPECT_TRUE(g->cellToolTip(7).startsWith("host 0 rank 7")) << g->cellToolTip(7).toStdString();
    f.doc.undoStack()->undo();
    f.doc.undoStack()->undo();
    QApplication::processEvents();
    EXPECT_TRUE(plan.grab().save(QString(TESSERA_BIN_DIR) + "/../plan_page_cluster.png"));
}

// ----------------------------------------------------------------------------
// preflight and host keys, against a fake tessera

TEST(HostsPage, PreflightRunsOnTheUnsavedTextAndTrustsAnUnknownKeyOnConfirmation) {
    Fixture f;
    FakeTessera fake(f.tmp);
    f.page->setTesseraBinary(fake.bin);
    const QByteArray on_disk = read_all(f.dir + "/project.yaml");
    auto* workdir = f.page->findChild<QLineEdit*>("workdir");
    workdir->setText("/scratch/unsaved");
    Q_EMIT workdir->editingFinished();
    ASSERT_TRUE(f.doc.isModified());

    f.page->runPreflight();
    EXPECT_TRUE(f.page->runner()->isRunning());
    EXPECT_FALSE(f.page->findChild<QPushButton*>("runPreflight")->isEnabled());
    EXPECT_TRUE(f.page->findChild<QPushButton*>("cancelPreflight")->isEnabled());
    ASSERT_TRUE(wait_done(*f.page));
    ASSERT_TRUE(f.page->bannerText().isEmpty()) << f.page->bannerText().toStdString();

    // it ran on the document's text, written beside the project and removed after
    const QString temp = f.dir + "/" + PreflightRunner::tempConfigName();
    ASSERT_EQ(fake.runs().size(), 1);
    EXPECT_EQ(fake.runs()[0], "preflight|" + temp + "|--json|");
    EXPECT_FALSE(QFile::exists(temp));
    EXPECT_TRUE(read_all(fake.dir + "/seen.yaml").contains("workdir: /scratch/unsaved"));
    EXPECT_EQ(read_all(f.dir + "/project.yaml"), on_disk);  // nothing saved
    EXPECT_TRUE(f.doc.isModified());

    // the checklist: two hosts, their checks with status and fix
    QTreeWidget* t = f.page->checklist();
    ASSERT_EQ(t->topLevelItemCount(), 2);
    EXPECT_EQ(t->topLevelItem(0)->text(0), "127.0.0.1:2222");
    EXPECT_EQ(t->topLevelItem(0)->text(1), "ready");
    ASSERT_EQ(t->topLevelItem(0)->childCount(), 4);
    EXPECT_EQ(t->topLevelItem(0)->child(3)->text(0), "gpus");
    EXPECT_EQ(t->topLevelItem(0)->child(3)->text(1), "warn");
    EXPECT_FALSE(t->topLevelItem(0)->child(3)->icon(0).isNull());
    QTreeWidgetItem* second = t->topLevelItem(1);
    EXPECT_EQ(second->text(1), "not ready");
    EXPECT_EQ(second->text(2), "rank 1");
    EXPECT_EQ(second->child(0)->text(0), "host key");
    EXPECT_EQ(second->child(0)->text(1), "fail");
    EXPECT_TRUE(second->child(0)->text(3).startsWith("compare the fingerprint"));
    EXPECT_TRUE(f.page->preflightStatus().contains("not ready"));

    // trust is offered for the unknown key only
    EXPECT_EQ(f.page->trustableHosts(), QStringList{"127.0.0.2:2222"});
    EXPECT_TRUE(f.page->changedKeyHosts().isEmpty());
    EXPECT_NE(f.page->findChild<QPushButton*>("trust:127.0.0.2:2222"), nullptr);
    EXPECT_EQ(f.page->findChild<QPushButton*>("trust:127.0.0.1:2222"), nullptr);
    EXPECT_FALSE(f.page->trustHostKey("127.0.0.1:2222"));
    QApplication::processEvents();
    EXPECT_TRUE(f.page->grab().save(QString(TESSERA_BIN_DIR) + "/../hosts_page_unknown_key.png"));

    // declined: nothing runs
    QString askedHost;
    QStringList askedFps;
    f.page->setTrustConfirm([&](const QString& h, const QStringList& fps) {
        askedHost = h, askedFps = fps;
        return false;
    });
    EXPECT_FALSE(f.page->trustHostKey("127.0.0.2:2222"));
    EXPECT_EQ(askedHost, "127.0.0.2:2222");
    EXPECT_EQ(askedFps, (QStringList{"ED25519 SHA256:BBBBsecondhostkey", "RSA SHA256:CCCCrsa"}));
    EXPECT_EQ(fake.runs().size(), 1);

    // confirmed: `hosts CONFIG trust HOST --yes`, then preflight again, now all ready
    f.page->setTrustConfirm([](const QString&, const QStringList&) { return true; });
    QSignalSpy done(f.page.get(), &HostsPage::preflightDone);
    f.page->findChild<QPushButton*>("trust:127.0.0.2:2222")->click();
    ASSERT_TRUE(done.wait(15000));
    const QStringList runs = fake.runs();
    ASSERT_EQ(runs.size(), 3) << runs.join("\n").toStdString();
    EXPECT_EQ(runs[1], "hosts|" + temp + "|trust|127.0.0.2:2222|--yes|");
    EXPECT_EQ(runs[2], "preflight|" + temp + "|--json|");
    EXPECT_TRUE(f.page->preflightStatus().contains("every host is ready"))
        << f.page->preflightStatus().toStdString();
    EXPECT_EQ(t->topLevelItem(1)->text(1), "ready");
    EXPECT_TRUE(f.page->trustableHosts().isEmpty());
    EXPECT_FALSE(QFile::exists(temp));

    // saved: it runs on project.yaml itself
    QString err;
    ASSERT_TRUE(f.doc.save(&err));
    f.page->runPreflight();
    ASSERT_TRUE(wait_done(*f.page));
    EXPECT_EQ(fake.runs().last(), "preflight|" + f.dir + "/project.yaml|--json|");

    QApplication::processEvents();
    EXPECT_TRUE(f.page->grab().save(QString(TESSERA_BIN_DIR) + "/../hosts_page_ready.png"));
}

TEST(HostsPage, AChangedKeyIsRefusedAndAConfigErrorIsShown) {
    Fixture f;
    FakeTessera fake(f.tmp);
    f.page->setTesseraBinary(fake.bin);
    fake.setMode("changed");
    f.page->runPreflight();
    ASSERT_TRUE(wait_done(*f.page));
    EXPECT_EQ(f.page->changedKeyHosts(), QStringList{"127.0.0.2:2222"});
    EXPECT_TRUE(f.page->trustableHosts().isEmpty());
    EXPECT_EQ(f.page->findChild<QPushButton*>("trust:127.0.0.2:2222"), nullptr);
    EXPECT_FALSE(f.page->trustHostKey("127.0.0.2:2222"));
    QTreeWidgetItem* second = f.page->checklist()->topLevelItem(1);
    EXPECT_TRUE(second->text(3).contains("CHANGED: refused"));
    EXPECT_TRUE(second->child(0)->text(3).contains("ssh-keygen -R"));
    EXPECT_EQ(fake.runs().size(), 1);
    QApplication::processEvents();
    EXPECT_TRUE(f.page->grab().save(QString(TESSERA_BIN_DIR) + "/../hosts_page_changed_key.png"));

    fake.setMode("error");  // exit 2: the config error text
    f.page->runPreflight();
    ASSERT_TRUE(wait_done(*f.page));
    EXPECT_TRUE(f.page->bannerText().contains("Preflight could not run"))
        << f.page->bannerText().toStdString();
    EXPECT_TRUE(f.page->bannerText().contains("project.yaml:44:7: cluster.hosts[0].host"))
        << f.page->bannerText().toStdString();
    EXPECT_TRUE(f.page->findChild<QPushButton*>("runPreflight")->isEnabled());

    // a report the engine's codec refuses: its key path reaches the banner
    fake.setMode("garbled");
    f.page->runPreflight();
    ASSERT_TRUE(wait_done(*f.page));
    EXPECT_TRUE(f.page->bannerText().contains(
        "hosts[0].checks[0].status: expected a string, found number 3"))
        << f.page->bannerText().toStdString();

    f.page->setTesseraBinary(fake.dir + "/no-such-tessera");
    f.page->runPreflight();
    ASSERT_TRUE(wait_done(*f.page));
    EXPECT_TRUE(f.page->bannerText().contains("cannot start"))
        << f.page->bannerText().toStdString();
}

TEST(HostsPage, CancelKillsTheRunningPreflight) {
    Fixture f;
    FakeTessera fake(f.tmp);
    f.page->setTesseraBinary(fake.bin);
    fake.setMode("sleep");
    f.doc.edit("dirty", [](RunConfig& c) { c.cluster.workdir = "/scratch/x"; });
    f.page->runPreflight();
    const QString temp = f.dir + "/" + PreflightRunner::tempConfigName();
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(fake.dir + "/seen.yaml"), 10000);  // it is running
    EXPECT_TRUE(QFile::exists(temp));
    QSignalSpy done(f.page.get(), &HostsPage::preflightDone);
    f.page->findChild<QPushButton*>("cancelPreflight")->click();
    ASSERT_TRUE(done.wait(5000));  // well before the fake's 30 s sleep
    EXPECT_EQ(f.page->preflightStatus(), "Cancelled.");
    EXPECT_FALSE(f.page->runner()->isRunning());
    EXPECT_FALSE(QFile::exists(temp));
    EXPECT_TRUE(f.page->findChild<QPushButton*>("runPreflight")->isEnabled());
    EXPECT_EQ(f.page->checklist()->topLevelItemCount(), 0);
}

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
