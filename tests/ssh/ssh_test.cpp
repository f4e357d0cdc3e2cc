// Multi-host runs over SSH, against a real sshd: each test starts OpenSSH's sshd on loopback (an
// unprivileged port, generated host and user keys, listening on 127.0.0.1 and 127.0.0.2, which
// act as two hosts) and drives the real `tessera` the way a user does.
#include "engine/launch/ssh.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/launch/cluster.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "tests/ssh/loopback_sshd.h"
#include "tests/support/paths.h"

namespace fs = std::filesystem;
using namespace tessera;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kBin = TESSERA_BIN_DIR;
const std::string kTessera = kBin + "/tessera";

using tessera::test_support::free_port;
using tessera::test_support::slurp;

SshResult run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = 120s) {
    return process_run(argv, timeout);
}

// sshd on 127.0.0.1 and 127.0.0.2 with keys generated in a temp dir, both hosts trusted.
class SshTest : public ::testing::Test {
  protected:
    tessera::test_support::LoopbackSshd sshd;
    fs::path dir;
    int port = 0;
    std::string user_key, host_key;

    void SetUp() override {
        std::string why = sshd.start("ssh");
        ASSERT_EQ(why, "");
        dir = sshd.dir, port = sshd.port, user_key = sshd.user_key, host_key = sshd.host_key;
        trust_all();
    }

    void TearDown() override {
        sshd.stop();
        if (!HasFailure()) fs::remove_all(dir);
    }

    std::string known_hosts() const { return (dir / "known_hosts").string(); }

    void trust_all() { sshd.trust_all(); }

    // A project on two hosts (slots each) or locally (no cluster section).
    fs::path project(const std::string& name, int steps, bool cluster,
                     const std::string& identity = "", const std::string& parallel = "{dp: 2}",
                     const std::string& extra_cluster = "") {
        fs::path p = dir / name;
        fs::create_directories(p);
        std::ofstream y(p / "project.yaml");
        y << "# a test project: \"quotes\", $(id), `backticks` and ; && survive the trip\nname: "
          << name << R"(
model: {preset: gpt-tiny, n_layer: 2, n_head: 2, d_model: 32, seq_len: 32}
data: {dataset: brown}
train: {steps: )"
          << steps << R"(, micro_batch: 2, eval_every: 0, threads: 1, lr: 1.0e-3, warmup_steps: 2}
parallel: )"
          << parallel << R"(
log: {db: runs.db, every: 1}
)";
        if (cluster) {
            std::string id = identity.empty() ? user_key : identity;
            y << "cluster:\n  hosts:\n";
            for (const char* h : {"127.0.0.1", "127.0.0.2"})
                y << "    - {host: " << h << ", port: " << port << ", identity: " << id
                  << ", slots: 1}\n";
            y << "  workdir: " << (dir / "work" / name).string() << "\n  tessera: " << kTessera
              << "\n  known_hosts: " << known_hosts()
              << "\n  connect_timeout: 5\n  rendezvous_port: " << free_port() << "\n"
              << extra_cluster;
        }
        return p / "project.yaml";
    }

    // train/loss by step for rank 0 of the last run in db.
    static std::map<int64_t, double> losses(const fs::path& db) {
        RunStore s = RunStore::open(db.string(), true);
        auto runs = s.runs_list();
        std::map<int64_t, double> out;
        for (const auto& m : s.metrics(runs.back().id, metric::train_loss)) out[m.step] = m.value;
        return out;
    }
};

TEST_F(SshTest, TwoNodeRunReproducesTheLocalRunAndStoresBothNodesMetrics) {
    fs::path remote = project("remote", 8, true), local = project("local", 8, false);
    SshResult r = run({kTessera, "train", remote.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("[launcher] run 1 completed"), std::string::npos) << r.out;
    SshResult l = run({kTessera, "train", local.string()});
    ASSERT_EQ(l.exit_code, 0) << l.out << l.err;

    auto a = losses(remote.parent_path() / "runs.db"), b = losses(local.parent_path() / "runs.db");
    ASSERT_EQ(a.size(), 8u);
    ASSERT_EQ(b.size(), 8u);
    for (auto& [step, v] : b) EXPECT_EQ(a.at(step), v) << "step " << step;  // exactly

    // both nodes' ranks reported through their ssh channels into the local runs.db
    RunStore s = RunStore::open((remote.parent_path() / "runs.db").string(), true);
    auto run0 = s.runs_list().back();
    EXPECT_EQ(run0.status, run_status::completed);
    EXPECT_EQ(run0.world_size, 2);
    std::map<int, int> rows_by_rank;
    for (const auto& m : s.metrics(run0.id)) rows_by_rank[m.rank]++;
    EXPECT_GT(rows_by_rank[0], 8);
    EXPECT_GT(rows_by_rank[1], 8) << "no metrics from the second node";
    EXPECT_EQ(s.integrity_check(), "ok");
    // the ranks ran in the remote working directory, with the config passed as text
    EXPECT_TRUE(fs::is_directory(dir / "work" / "remote"));
}

// Two network namespaces joined by a veth pair act as two hosts with their own addresses: an
// sshd in each, the job launched from the first. Skipped (saying why) where namespaces cannot be
// created (no root / CAP_NET_ADMIN).
class NetnsHosts {
  public:
    std::string a, b, addr_a, addr_b;
    bool ok = false;
    std::string why;

    explicit NetnsHosts(int tag) {
        a = str_cat("tsA", tag);
        b = str_cat("tsB", tag);
        int net = 100 + tag % 100;
        addr_a = str_cat("10.88.", net, ".1");
        addr_b = str_cat("10.88.", net, ".2");
        std::string va = str_cat("tva", tag), vb = str_cat("tvb", tag);
        std::vector<std::vector<std::string>> steps = {
            {"ip", "netns", "add", a},
            {"ip", "netns", "add", b},
            {"ip", "link", "add", va, "type", "veth", "peer", "name", vb},
            {"ip", "link", "set", va, "netns", a},
            {"ip", "link", "set", vb, "netns", b},
            {"ip", "-n", a, "addr", "add", addr_a + "/24", "dev", va},
            {"ip", "-n", b, "addr", "add", addr_b + "/24", "dev", vb},
            {"ip", "-n", a, "link", "set", va, "up"},
            {"ip", "-n", b, "link", "set", vb, "up"},
            {"ip", "-n", a, "link", "set", "lo", "up"},
            {"ip", "-n", b, "link", "set", "lo", "up"}};
        for (const auto& st : steps) {
            SshResult r = process_run(st, 10s);
            if (r.exit_code != 0) {
                why = str_cat("network namespaces unavailable here (", st[0], " ", st[1], " ",
                              st[2], ": ", r.err.substr(0, r.err.find('\n')), ")");
                return;
            }
        }
        ok = true;
    }
    ~NetnsHosts() {
        process_run({"ip", "netns", "del", a}, 10s);
        process_run({"ip", "netns", "del", b}, 10s);
    }
};

TEST_F(SshTest, TwoNetworkNamespacesActAsTwoHosts) {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    NetnsHosts ns(::getpid() % 10000);
    if (!ns.ok) GTEST_SKIP() << ns.why;
    // an sshd inside each namespace, on its own address
    std::vector<pid_t> daemons;
    for (auto [name, addr] : {std::pair{ns.a, ns.addr_a}, std::pair{ns.b, ns.addr_b}}) {
        fs::path cfg = dir / str_cat("sshd_", name);
        std::string text = slurp(dir / "sshd_config");
        text.replace(text.find("ListenAddress 127.0.0.1\nListenAddress 127.0.0.2"), 47,
                     "ListenAddress " + addr);
        text.replace(text.find("PidFile"), 7, "#PidFile");
        std::ofstream(cfg) << text;
        pid_t pid = ::fork();
        if (pid == 0) {
            ::execl("/usr/sbin/ip", "ip", "netns", "exec", name.c_str(), "/usr/sbin/sshd", "-D",
                    "-f", cfg.c_str(), "-E", (cfg.string() + ".log").c_str(), (char*)nullptr);
            ::_exit(127);
        }
        daemons.push_back(pid);
    }
    auto stop = [&] {
        for (pid_t d : daemons) ::kill(d, SIGTERM), ::waitpid(d, nullptr, 0);
    };
    std::string keys;
    for (int i = 0; i < 50 && keys.find(ns.addr_b) == std::string::npos; ++i) {
        std::this_thread::sleep_for(100ms);
        keys = run({"ip", "netns", "exec", ns.a, "ssh-keyscan", "-p", std::to_string(port),
                    ns.addr_a, ns.addr_b},
                   20s)
                   .out;
    }
    std::ofstream(known_hosts()) << keys;
    fs::path remote = project("netns", 8, true), local = project("netns-local", 8, false);
    std::string text = slurp(remote);
    for (auto [from, to] : {std::pair{std::string("127.0.0.1"), ns.addr_a},
                            std::pair{std::string("127.0.0.2"), ns.addr_b}})
        text.replace(text.find("host: " + from), 6 + from.size(), "host: " + to);
    std::ofstream(remote) << text;
    SshResult r = run({"ip", "netns", "exec", ns.a, kTessera, "train", remote.string()}, 120s);
    SshResult l = run({kTessera, "train", local.string()}, 120s);
    stop();
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ASSERT_EQ(l.exit_code, 0) << l.out << l.err;
    auto x = losses(remote.parent_path() / "runs.db"), y = losses(local.parent_path() / "runs.db");
    ASSERT_EQ(x.size(), 8u);
    for (auto& [step, v] : y) EXPECT_EQ(x.at(step), v) << "step " << step;
    RunStore s = RunStore::open((remote.parent_path() / "runs.db").string(), true);
    std::map<int, int> rows;
    for (const auto& m : s.metrics(s.runs_list().back().id)) rows[m.rank]++;
    EXPECT_GT(rows[1], 8) << "no metrics from the second namespace";
}

TEST_F(SshTest, RemoteArgvIsByteIdentical) {
    std::vector<std::string> words = {"two words",
                                      "it's \"quoted\"",
                                      "$(id)",
                                      "`id`",
                                      "a;b",
                                      "x && y",
                                      "line1\nline2",
                                      R"({"json": "string", "n": [1, 2]})",
                                      "64(x2)",
                                      "-leading-dash",
                                      "--",
                                      "naïve ✓ 日本",
                                      "",
                                      "tab\there",
                                      "back\\slash",
                                      "*",
                                      "~",
                                      "$HOME",
                                      "'",
                                      "!"};
    SshTarget t;
    t.host = "127.0.0.1";
    t.port = port;
    t.identity = user_key;
    t.known_hosts = known_hosts();
    std::vector<std::string> argv = {"/usr/bin/printf", "%s\\0"};
    argv.insert(argv.end(), words.begin(), words.end());
    SshResult r = ssh_run(t, argv, 30s);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> got;
    size_t start = 0;
    for (size_t i = 0; i < r.out.size(); ++i)
        if (r.out[i] == '\0') got.push_back(r.out.substr(start, i - start)), start = i + 1;
    ASSERT_EQ(got.size(), words.size());
    for (size_t i = 0; i < words.size(); ++i) EXPECT_EQ(got[i], words[i]) << "word " << i;
}

TEST_F(SshTest, UnknownHostKeyFailsFastWithItsFingerprintAndNoPrompt) {
    std::ofstream(known_hosts()) << "";  // nothing trusted
    fs::path p = project("unknown", 4, true);
    auto t0 = Clock::now();
    SshResult r = run({kTessera, "preflight", p.string()}, 60s);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("unknown: ED25519 SHA256:"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("tessera hosts CONFIG trust 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << r.out;
    SshResult tr = run({kTessera, "train", p.string()}, 60s);
    EXPECT_EQ(tr.exit_code, 1) << tr.out << tr.err;
    EXPECT_NE(tr.out.find("host key is unknown"), std::string::npos) << tr.out;
    EXPECT_LT(Clock::now() - t0, 30s);
    EXPECT_TRUE(slurp(known_hosts()).empty()) << "nothing may be trusted without confirmation";

    // The user checks the fingerprint and trusts the host: exactly the shown key is recorded.
    SshResult no =
        run({kTessera, "hosts", p.string(), "trust", "127.0.0.1"}, 30s);  // no terminal, no --yes
    EXPECT_NE(no.exit_code, 0);
    EXPECT_TRUE(slurp(known_hosts()).empty());
    for (const char* h : {"127.0.0.1", "127.0.0.2"}) {
        SshResult yes = run({kTessera, "hosts", p.string(), "trust", h, "--yes"}, 30s);
        EXPECT_EQ(yes.exit_code, 0) << yes.out << yes.err;
    }
    SshResult scan = run({kTessera, "hosts", p.string(), "scan"}, 30s);
    EXPECT_EQ(scan.exit_code, 0) << scan.out;
    SshResult again = run({kTessera, "train", p.string()}, 120s);
    EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
}

TEST_F(SshTest, ChangedHostKeyIsRefused) {
    // known_hosts holds another key for both hosts: the host "changed" (or is an impostor)
    std::string other = (dir / "other_key").string();
    ASSERT_EQ(run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other}).exit_code, 0);
    std::string pub = slurp(other + ".pub");
    pub = pub.substr(0, pub.rfind(' '));
    std::ofstream(known_hosts()) << "[127.0.0.1]:" << port << " " << pub << "\n[127.0.0.2]:" << port
                                 << " " << pub << "\n";
    fs::path p = project("changed", 4, true);
    SshResult r = run({kTessera, "train", p.string()}, 60s);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("CHANGED"), std::string::npos) << r.out << r.err;
    SshResult pf = run({kTessera, "preflight", p.string()}, 60s);
    EXPECT_EQ(pf.exit_code, 1);
    EXPECT_NE(pf.out.find("CHANGED"), std::string::npos) << pf.out;
    SshResult trust = run({kTessera, "hosts", p.string(), "trust", "127.0.0.1", "--yes"}, 30s);
    EXPECT_NE(trust.exit_code, 0) << "a changed key must not be re-trusted in place";
}

TEST_F(SshTest, MissingAndPassphraseProtectedKeysFailBeforeAnyPrompt) {
    fs::path p = project("missing", 4, true, (dir / "no_such_key").string());
    auto t0 = Clock::now();
    SshResult r = run({kTessera, "train", p.string()}, 30s);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("identity file " + (dir / "no_such_key").string() + " does not exist"),
              std::string::npos)
        << r.err;

    std::string locked = (dir / "locked_key").string();
    ASSERT_EQ(
        run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "secret phrase", "-f", locked}).exit_code,
        0);
    std::ofstream(dir / "authorized_keys", std::ios::app) << slurp(locked + ".pub");
    fs::path q = project("locked", 4, true, locked);
    ::unsetenv("SSH_AUTH_SOCK");
    SshResult l = run({kTessera, "train", q.string()}, 30s);
    EXPECT_EQ(l.exit_code, 2) << l.out << l.err;
    EXPECT_NE(l.err.find("protected by a passphrase"), std::string::npos) << l.err;
    SshResult pf = run({kTessera, "preflight", q.string()}, 30s);
    EXPECT_EQ(pf.exit_code, 1);
    EXPECT_NE(pf.out.find("protected by a passphrase"), std::string::npos) << pf.out;

    // a key the host does not accept: ssh's refusal, reworded, no prompt
    std::string stranger = (dir / "stranger_key").string();
    ASSERT_EQ(run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", stranger}).exit_code, 0);
    fs::path s = project("stranger", 4, true, stranger);
    SshResult st = run({kTessera, "train", s.string()}, 30s);
    EXPECT_EQ(st.exit_code, 1);
    EXPECT_NE(st.out.find("key authentication failed"), std::string::npos) << st.out << st.err;
    EXPECT_LT(Clock::now() - t0, 30s);
}

TEST_F(SshTest, HostNamesWithMetacharactersAreRefusedBeforeSshRuns) {
    for (std::string bad : {"a;id", "$(id)", "-oProxyCommand=id", "h`id`", "a b"}) {
        fs::path p = dir / "bad";
        fs::create_directories(p);
        std::ofstream(p / "project.yaml")
            << "name: bad\nmodel: {preset: gpt-tiny}\ndata: {dataset: brown}\n"
            << "parallel: {dp: 2}\ncluster:\n  hosts:\n    - {host: '" << bad << "', slots: 2}\n";
        SshResult r = run({kTessera, "check", (p / "project.yaml").string()}, 30s);
        EXPECT_EQ(r.exit_code, 2) << bad;
        EXPECT_NE(r.err.find("cluster.hosts[0].host"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("refused before ssh"), std::string::npos) << r.err;
    }
    // and in a hostfile, with the file and line
    fs::path p = dir / "badfile";
    fs::create_directories(p);
    std::ofstream(p / "hosts.txt") << "# workers\nnode-a slots=2\nnode;b slots=2\n";
    std::ofstream(p / "project.yaml")
        << "name: bad\nmodel: {preset: gpt-tiny}\ndata: {dataset: brown}\n"
        << "parallel: {dp: 2}\ncluster: {hostfile: hosts.txt}\n";
    SshResult r = run({kTessera, "check", (p / "project.yaml").string()}, 30s);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("hosts.txt:3: host 'node;b' contains ';'"), std::string::npos) << r.err;
}

// Starts a long 2-host run in the background and waits until both hosts train.
struct BackgroundRun {
    pid_t pid = -1;
    fs::path out, db;
    int64_t steps = 0;
    ~BackgroundRun() {  // a failed assertion must not leave the job running
        if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

void start_long_run(BackgroundRun& b, const fs::path& p, const fs::path& out) {
    b.out = out;
    b.db = p.parent_path() / "runs.db";
    b.pid = ::fork();
    if (b.pid == 0) {
        int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::execl(kTessera.c_str(), "tessera", "train", p.c_str(), (char*)nullptr);
        ::_exit(127);
    }
    std::map<int, int64_t> by_rank;
    for (int i = 0; i < 600 && (by_rank[0] < 5 || by_rank[1] < 5); ++i) {
        std::this_thread::sleep_for(100ms);
        if (!fs::exists(b.db)) continue;
        try {
            RunStore s = RunStore::open(b.db.string(), true);
            for (const auto& m : s.metrics(1)) by_rank[m.rank] = std::max(by_rank[m.rank], m.step);
        } catch (const std::exception&) {
        }
    }
    b.steps = std::min(by_rank[0], by_rank[1]);
}

// A long run's console without its step lines: what a failure message needs (the launcher's
// lines), short enough that CI's tail of the log still shows it.
std::string console_without_steps(const fs::path& out) {
    std::istringstream in(slurp(out));
    std::string l, kept;
    while (std::getline(in, l))
        if (l.find("] step ") == std::string::npos) kept += l + "\n";
    return kept;
}

// Waits for the job; returns how long it took (or 30 s and kills it).
std::chrono::milliseconds wait_job(pid_t& pid, int& status) {
    auto t0 = Clock::now();
    pid_t w = 0;
    while ((w = ::waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() - t0 < 30s)
        std::this_thread::sleep_for(20ms);
    if (w == 0) ::kill(pid, SIGKILL), ::waitpid(pid, &status, 0);
    pid = -1;
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

// The run is failed, with the host in the message, and its rows are intact and contiguous.
void expect_failed_run_intact(const fs::path& db, const std::string& host) {
    RunStore s = RunStore::open(db.string(), true);
    auto row = s.run_get(1);
    ASSERT_TRUE(row);
    EXPECT_EQ(row->status, run_status::failed);
    EXPECT_NE(row->message.find(host), std::string::npos) << row->message;
    EXPECT_EQ(s.integrity_check(), "ok");
    std::vector<int64_t> got;
    for (const auto& m : s.metrics(1, metric::train_loss))
        if (m.rank == 0) got.push_back(m.step);
    ASSERT_GE(got.size(), 5u);
    for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], int64_t(i + 1)) << "rows not contiguous";
}

// No node launcher or rank of this test's job is left (ranks run in <dir>/work/<project>).
void expect_nothing_left(const fs::path& work) {
    std::this_thread::sleep_for(500ms);
    EXPECT_NE(process_run({"pgrep", "-f", "^" + kTessera + " _(node|rank) .*" + work.string()}, 10s)
                  .exit_code,
              0)
        << "ranks or node launchers survived";
}

// A long 2-host run; SIGKILL to the one process `pattern` finds (pgrep -f) once both hosts train;
// the job must end within 10 s as failed, naming the second host, its rows intact, nothing left.
void kill_mid_run_and_expect_failure(const fs::path& p, const fs::path& out,
                                     const std::string& pattern, const char* what) {
    BackgroundRun b;
    start_long_run(b, p, out);
    ASSERT_GE(b.steps, 5) << console_without_steps(b.out);
    SshResult pg = process_run({"pgrep", "-f", pattern}, 10s);
    ASSERT_EQ(pg.exit_code, 0) << "no " << what << " found";
    ::kill(std::stoi(pg.out), SIGKILL);
    int st = 0;
    auto took = wait_job(b.pid, st);
    std::cout << "teardown after killing the " << what << ": " << took.count() << " ms\n";
    EXPECT_LT(took, 10s);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << console_without_steps(b.out);
    EXPECT_NE(slurp(b.out).find("host 127.0.0.2"), std::string::npos)
        << console_without_steps(b.out);
    expect_failed_run_intact(b.db, "127.0.0.2");
    expect_nothing_left(p.parent_path().parent_path() /
                        "work");  // ranks and node launchers are gone
}

TEST_F(SshTest, KillingTheRemoteNodeLauncherFailsTheRunWithinTenSeconds) {
    // the node launcher of the second host: `tessera _node --first 1 ...`, started by sshd
    kill_mid_run_and_expect_failure(
        project("killed", 100000, true), dir / "killed.out",
        "^" + kTessera + " _node --first 1 .*--workdir " + (dir / "work").string(),
        "remote node launcher");
}

TEST_F(SshTest, ALostSshConnectionFailsTheRunWithinTenSeconds) {
    // the local ssh client carrying the second host's channel: the remote side notices the
    // closed channel and takes its ranks down
    kill_mid_run_and_expect_failure(
        project("lost", 100000, true), dir / "lost.out",
        "^ssh .* 127.0.0.2 '" + kTessera + "' '_node'.*" + (dir / "work").string(),
        "ssh connection");
}

TEST_F(SshTest, CtrlCStopsEveryHostAfterTheSameStep) {
    fs::path p = project("stopped", 100000, true);
    BackgroundRun b;
    start_long_run(b, p, dir / "stopped.out");
    ASSERT_GE(b.steps, 5) << console_without_steps(b.out);
    ::kill(b.pid, SIGINT);
    int st = 0;
    auto took = wait_job(b.pid, st);
    EXPECT_LT(took, 10s);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 130) << console_without_steps(b.out);
    RunStore s = RunStore::open(b.db.string(), true);
    EXPECT_EQ(s.run_get(1)->status, run_status::stopped) << console_without_steps(b.out);
    std::map<int, int64_t> last;
    for (const auto& m : s.metrics(1)) last[m.rank] = std::max(last[m.rank], m.step);
    EXPECT_EQ(last[0], last[1]) << "both hosts stop after the same step";
    expect_nothing_left(dir / "work");
}

TEST_F(SshTest, RestartsRelaunchEveryHostFromTheLastCheckpoint) {
    // rank 1 (second host) crashes after step 6; restarts: 1 resumes both hosts from step 4's
    // checkpoint, and the curve is the uninterrupted local run's
    auto write = [&](const std::string& name, bool cluster, bool fault) {
        fs::path p = dir / name;
        fs::create_directories(p);
        std::ofstream y(p / "project.yaml");
        y << "name: " << name << R"(
model: {preset: gpt-tiny, n_layer: 2, n_head: 2, d_model: 32, seq_len: 32}
data: {dataset: brown}
train: {steps: 10, micro_batch: 2, eval_every: 0, threads: 1, restarts: 1}
parallel: {dp: 2}
checkpoint: {dir: ck, every: 4}
log: {db: runs.db, every: 1}
)";
        if (cluster) {
            y << "cluster:\n  hosts:\n";
            for (const char* h : {"127.0.0.1", "127.0.0.2"})
                y << "    - {host: " << h << ", port: " << port << ", identity: " << user_key
                  << ", slots: 1}\n";
            y << "  workdir: " << (dir / "work" / name).string() << "\n  tessera: " << kTessera
              << "\n  known_hosts: " << known_hosts() << "\n  rendezvous_port: " << free_port()
              << "\n";
            if (fault) y << "  env: {TESSERA_FAULT_CRASH: \"1:6\"}\n";
        }
        return p / "project.yaml";
    };
    fs::path remote = write("restart", true, true), local = write("restart-local", false, false);
    SshResult r = run({kTessera, "train", remote.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("(2 ranks, 2 attempts)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("killed by signal 6 (SIGABRT) at step 6 on host 127.0.0.2"),
              std::string::npos)
        << r.out;
    SshResult l = run({kTessera, "train", local.string()});
    ASSERT_EQ(l.exit_code, 0) << l.out << l.err;
    auto a = losses(remote.parent_path() / "runs.db"), b = losses(local.parent_path() / "runs.db");
    ASSERT_EQ(b.size(), 10u);
    for (auto& [step, v] : b) EXPECT_EQ(a.at(step), v) << "step " << step;
}

TEST_F(SshTest, PreflightPassesOnAHealthyClusterAndNamesEachProblem) {
    fs::path p =
        project("preflight", 4, true, "", "{dp: 2}", "  env: {TESSERA_PREFLIGHT_MARK: \"a b\"}\n");
    SshResult ok = run({kTessera, "preflight", p.string(), "--json"}, 90s);
    ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
    for (const char* c : {"\"host key\"", "\"ssh\"", "\"tessera\"", "\"workdir\"", "\"cpus\"",
                          "\"data\"", "\"rendezvous\"", "\"environment\""})
        EXPECT_NE(ok.out.find(c), std::string::npos) << c << "\n" << ok.out;
    EXPECT_NE(ok.out.find("TESSERA_PREFLIGHT_MARK=a b"), std::string::npos) << ok.out;

    // a wrong remote tessera path, missing data, a port already taken
    int busy_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    ::bind(busy_fd, (sockaddr*)&a, sizeof a);
    ::listen(busy_fd, 1);
    socklen_t len = sizeof a;
    ::getsockname(busy_fd, (sockaddr*)&a, &len);
    int busy = ntohs(a.sin_port);
    RunConfig cfg = config_load(p.string());
    SshResult bad_path = run(
        {kTessera, "preflight", p.string(), "--set", "cluster.tessera=/opt/nowhere/tessera"}, 60s);
    EXPECT_EQ(bad_path.exit_code, 1);
    EXPECT_NE(bad_path.out.find("'/opt/nowhere/tessera' is not found"), std::string::npos)
        << bad_path.out;
    fs::path q = p.parent_path() / "own-data.yaml";
    std::string text = slurp(p);
    text.replace(text.find("data: {dataset: brown}"), 22,
                 "data: {train: nowhere/train.bin, val: nowhere/val.bin}");
    std::ofstream(q) << text;
    SshResult bad_data = run({kTessera, "preflight", q.string()}, 60s);
    EXPECT_EQ(bad_data.exit_code, 1) << bad_data.out << bad_data.err;
    EXPECT_NE(bad_data.out.find("FAIL  data"), std::string::npos) << bad_data.out;
    EXPECT_NE(bad_data.out.find("no file at " +
                                (dir / "work" / "preflight" / "nowhere" / "train.bin").string()),
              std::string::npos)
        << bad_data.out;
    SshResult bad_port =
        run({kTessera, "preflight", p.string(), "--set", str_cat("cluster.rendezvous_port=", busy)},
            60s);
    EXPECT_EQ(bad_port.exit_code, 1);
    EXPECT_NE(bad_port.out.find("cannot be served here"), std::string::npos) << bad_port.out;
    ::close(busy_fd);
}

TEST_F(SshTest, GeneratedSbatchScriptAndMpirunLineRunTheSamePlan) {
    fs::path p = project("scripts", 4, true, "", "{dp: 2, tp: 1, pp: 1}",
                         "  env: {NCCL_SOCKET_IFNAME: \"eth0\"}\n");
    SshResult sb = run({kTessera, "launch-script", p.string(), "--format", "sbatch",
                        "--config-path", "/shared/my proj/project.yaml"});
    ASSERT_EQ(sb.exit_code, 0) << sb.err;
    fs::path script = dir / "job.sbatch";
    std::ofstream(script) << sb.out;
    EXPECT_EQ(run({"bash", "-n", script.string()}).exit_code, 0) << sb.out;
    std::map<std::string, std::string> directives;
    std::istringstream in(sb.out);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("#SBATCH --", 0) == 0) {
            auto eq = line.find('=');
            directives[line.substr(10, eq - 10)] = line.substr(eq + 1);
        }
    EXPECT_EQ(directives["nodes"], "2");
    EXPECT_EQ(directives["ntasks"], "2");
    EXPECT_EQ(directives["ntasks-per-node"], "1");
    EXPECT_EQ(directives.count("gpus-per-node"), 0u) << "a CPU plan asks for no GPUs";

    // Run the script with stand-in scontrol/srun that record what they were given.
    fs::path shims = dir / "shims";
    fs::create_directories(shims);
    std::ofstream(shims / "scontrol") << "#!/bin/sh\nprintf 'node-a\\nnode-b\\n'\n";
    std::ofstream(shims / "srun") << "#!/bin/sh\nprintf '%s\\n' \"MASTER=$MASTER_ADDR:$MASTER_PORT "
                                     "IF=$NCCL_SOCKET_IFNAME\" \"$@\" > "
                                  << (dir / "srun.args").string() << "\n";
    fs::permissions(shims / "scontrol", fs::perms::owner_all);
    fs::permissions(shims / "srun", fs::perms::owner_all);
    std::string path = shims.string() + ":" + std::getenv("PATH");
    SshResult ran =
        run({"env", "PATH=" + path, "SLURM_JOB_NODELIST=node-[a-b]", "bash", script.string()});
    ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
    std::string args = slurp(dir / "srun.args");
    RunConfig cfg = config_load(p.string());
    EXPECT_EQ(args, str_cat("MASTER=node-a:", cfg.cluster.rendezvous_port,
                            " IF=eth0\n--ntasks=2\n--ntasks-per-node=1\n", "--distribution=block\n",
                            kTessera, "\ntrain\n/shared/my proj/project.yaml\n"));

    SshResult mp = run({kTessera, "launch-script", p.string(), "--format", "mpirun",
                        "--config-path", "/shared/my proj/project.yaml"});
    ASSERT_EQ(mp.exit_code, 0) << mp.err;
    std::ofstream(shims / "mpirun")
        << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << (dir / "mpirun.args").string() << "\n";
    fs::permissions(shims / "mpirun", fs::perms::owner_all);
    ASSERT_EQ(run({"env", "PATH=" + path, "sh", "-c", mp.out}).exit_code, 0) << mp.out;
    EXPECT_EQ(
        slurp(dir / "mpirun.args"),
        str_cat("-np\n2\n-H\n127.0.0.1:1,127.0.0.2:1\n--map-by\nslot\n-x\nMASTER_ADDR=127.0.0.1\n-"
                "x\nMASTER_PORT=",
                cfg.cluster.rendezvous_port, "\n-x\nNCCL_SOCKET_IFNAME=eth0\n--wdir\n",
                cfg.cluster.workdir, "\n", kTessera, "\ntrain\n/shared/my proj/project.yaml\n"));
}

}  // namespace
