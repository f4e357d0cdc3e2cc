// The cluster rules (engine/config/cluster_rules.h): every problem at once, each with its key path
// and what was expected versus found; one test per rule, the whole text pinned where a user reads
// it. And the edit rule the Hosts page refuses by: only a problem the edit adds counts.
#include "engine/config/cluster_rules.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace tessera;

namespace {

// Two good hosts for dp 2.
RunConfig good() {
    RunConfig c;
    c.parallel.dp = 2;
    c.cluster.hosts = {{"gpu-a", "alice", 22, "", 1, ""},
                       {"gpu-b", "", 2222, "~/.ssh/id", 1, "10.0.0.2"}};
    c.cluster.env = {{"OMP_NUM_THREADS", "4"}};
    return c;
}

std::vector<std::string> texts(const RunConfig& c) {
    std::vector<std::string> out;
    for (const auto& p : cluster_problems(c)) out.push_back(p.text());
    return out;
}

}  // namespace

TEST(ClusterRules, AGoodClusterAndNoClusterHaveNoProblems) {
    EXPECT_TRUE(cluster_problems(good()).empty());
    EXPECT_TRUE(cluster_problems(RunConfig{}).empty());  // no hosts: this machine
}

TEST(ClusterRules, HostName) {
    RunConfig c = good();
    c.cluster.hosts[1].host = "";
    EXPECT_EQ(texts(c), std::vector<std::string>{
                            "cluster.hosts[1].host: expected a host name, found nothing"});
    c.cluster.hosts[1].host = "a;id";
    EXPECT_EQ(
        texts(c),
        std::vector<std::string>{
            "cluster.hosts[1].host: expected a host name or address (letters, digits, '.', '-', "
            "'_', ':'; refused before ssh ever sees it), found 'a;id', which contains ';'"});
    c.cluster.hosts[1].host = "-oProxyCommand=x";
    ASSERT_EQ(cluster_problems(c).size(), 1u);
    EXPECT_EQ(cluster_problems(c)[0].found, "'-oProxyCommand=x', which starts with '-'");
}

TEST(ClusterRules, UserAndAddr) {
    RunConfig c = good();
    c.cluster.hosts[0].user = "root$(reboot)";
    c.cluster.hosts[1].addr = "10.0.0.2 x";
    const auto p = cluster_problems(c);
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[0].key, "cluster.hosts[0].user");
    EXPECT_EQ(p[0].expected,
              "a user name (letters, digits, '.', '_', '-'; refused before ssh ever sees it)");
    EXPECT_EQ(p[0].found, "'root$(reboot)', which contains '$'");
    EXPECT_EQ(p[1].key, "cluster.hosts[1].addr");
    EXPECT_EQ(p[1].found, "'10.0.0.2 x', which contains ' '");
}

TEST(ClusterRules, PortsAndTimeout) {
    RunConfig c = good();
    c.cluster.hosts[0].port = 0;
    c.cluster.rendezvous_port = 70000;
    c.cluster.connect_timeout = 0;
    EXPECT_EQ(texts(c), (std::vector<std::string>{
                            "cluster.hosts[0].port: expected a port in [1, 65535], found 0",
                            "cluster.rendezvous_port: expected a port in [1, 65535], found 70000",
                            "cluster.connect_timeout: expected seconds in [1, 600], found 0"}));
}

TEST(ClusterRules, SlotsPerHost) {
    RunConfig c = good();
    c.parallel.dp = 1;
    c.cluster.hosts[1].slots = 0;
    EXPECT_EQ(texts(c), std::vector<std::string>{
                            "cluster.hosts[1].slots: expected a positive integer up to 4096 "
                            "(the ranks this host runs), found 0"});
    c.cluster.hosts[1].slots = kClusterMaxSlots + 1;
    ASSERT_EQ(cluster_problems(c).size(), 1u);
    EXPECT_EQ(cluster_problems(c)[0].found, "4097");
}

TEST(ClusterRules, TooFewSlotsForThePlan) {
    RunConfig c = good();
    c.parallel.tp = 2;  // 4 ranks, 2 slots
    EXPECT_EQ(texts(c), std::vector<std::string>{
                            "cluster.slots: expected at least dp x tp x pp = 2 x 2 x 1 = 4 "
                            "slots (add slots, or lower the plan), found 2 slots on 2 hosts"});
}

TEST(ClusterRules, OneRowPerMachine) {
    RunConfig c = good();
    c.cluster.hosts.push_back({"gpu-a", "", 22, "", 1, ""});  // gpu-a port 22 again
    EXPECT_EQ(texts(c), std::vector<std::string>{
                            "cluster.hosts[2].host: expected one row per machine (raise the "
                            "slots of cluster.hosts[0]), found gpu-a port 22 again"});
    c.cluster.hosts[2].port = 2200;  // another sshd on the same name: another machine to ssh
    EXPECT_TRUE(cluster_problems(c).empty());
}

TEST(ClusterRules, IdentityOnOneLine) {
    RunConfig c = good();
    c.cluster.hosts[1].identity = "key\nProxyCommand x";
    EXPECT_EQ(
        texts(c),
        std::vector<std::string>{
            "cluster.hosts[1].identity: expected a key file name on one line, found a line break"});
}

TEST(ClusterRules, TesseraAndEnv) {
    RunConfig c = good();
    c.cluster.tessera = "";
    c.cluster.env = {{"1BAD", "x"}, {"A", "1"}, {"A", "2"}};
    EXPECT_EQ(
        texts(c),
        (std::vector<std::string>{
            "cluster.tessera: expected a path, or a name on the remote PATH, found nothing",
            "cluster.env[0]: expected an environment variable name ([A-Za-z_][A-Za-z0-9_]*), found "
            "'1BAD'",
            "cluster.env[2]: expected each variable once, found A set twice (first at "
            "cluster.env[1])"}));
    EXPECT_TRUE(cluster_env_name_ok("_A1"));
    EXPECT_FALSE(cluster_env_name_ok(""));
    EXPECT_FALSE(cluster_env_name_ok("A-B"));
}

TEST(ClusterRules, EveryProblemAtOnceInKeyOrder) {
    RunConfig c = good();
    c.cluster.hosts[0].host = "";
    c.cluster.hosts[0].slots = 0;
    c.cluster.hosts[1].port = -1;
    c.cluster.env = {{"9", "x"}};
    std::vector<std::string> keys;
    for (const auto& p : cluster_problems(c)) keys.push_back(p.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"cluster.hosts[0].host", "cluster.hosts[0].slots",
                                              "cluster.hosts[1].port", "cluster.slots",
                                              "cluster.env[0]"}));
}

TEST(ClusterRules, ProblemsAtAKeyAndBelowIt) {
    RunConfig c = good();
    c.cluster.hosts[1].port = 0;
    c.cluster.hosts[1].user = "a b";
    const auto p = cluster_problems(c);
    EXPECT_EQ(cluster_problems_at(p, "cluster.hosts[1].port"), p[1].text());
    EXPECT_EQ(cluster_problems_at(p, "cluster.hosts"), p[0].text() + "\n" + p[1].text());
    EXPECT_EQ(cluster_problems_at(p, "cluster.hosts[0]"), "");
    EXPECT_EQ(cluster_problems_at(p, "cluster.host"), "");  // a prefix of a key is not its parent
}

// The Hosts page refuses an edit that adds a problem; one that was already there (dp raised on
// the Plan page) does not block fixing something else.
TEST(ClusterRules, AnEditIsRefusedOnlyForAProblemItAdds) {
    const RunConfig before = good();
    RunConfig after = before;
    after.cluster.hosts[0].host = "x y";
    EXPECT_EQ(cluster_new_problem(before, after), cluster_problems(after)[0].text());
    EXPECT_EQ(cluster_new_problem(after, after), "");

    RunConfig short_ = before;
    short_.parallel.dp = 4;  // 2 slots for 4 ranks: already a problem
    RunConfig other = short_;
    other.cluster.hosts[1].user = "bob";
    EXPECT_EQ(cluster_new_problem(short_, other), "");  // unrelated edit: allowed
    RunConfig more = short_;
    more.cluster.hosts[1].slots = 2;  // towards enough: allowed
    EXPECT_EQ(cluster_new_problem(short_, more), "");
    RunConfig fewer = short_;
    fewer.cluster.hosts.pop_back();  // fewer slots: refused
    EXPECT_NE(cluster_new_problem(short_, fewer).find("cluster.slots: expected at least"),
              std::string::npos);

    // removing a row does not make a later row's old problem new
    RunConfig three = before;
    three.cluster.hosts.push_back({"gpu-c", "a b", 22, "", 1, ""});
    RunConfig removed = three;
    removed.cluster.hosts.erase(removed.cluster.hosts.begin());
    removed.parallel.dp = 1;
    EXPECT_EQ(cluster_new_problem(three, removed), "");
}

// The reader refuses what the rules refuse (the same limits), one at a time with file:line:col.
TEST(ClusterRules, TheReaderUsesTheSameLimits) {
    const std::string head =
        "model: {preset: gpt-tiny}\ndata: {dataset: brown}\nparallel: {dp: 1}\n"
        "cluster:\n  hosts:\n";
    try {
        config_parse(head + "    - {host: a, slots: 4097}\n", "p.yaml");
        ADD_FAILURE() << "expected an InputError";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("cluster.hosts[0].slots"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("4096"), std::string::npos) << e.what();
    }
    try {
        config_parse(head + "    - {host: a}\n  env: {1BAD: x}\n", "p.yaml");
        ADD_FAILURE() << "expected an InputError";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("cluster.env.1BAD"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(config_parse(head + "    - {host: a, slots: 4096}\n", "p.yaml"));
}
