// rank_env_from_environment() for each launcher's variables, and the rendezvous store client
// against its server (no peers needed).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "engine/core/error.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/tcp_store.h"

using namespace tessera;

namespace {

// Clears every variable any launcher sets, then sets the given ones.
void env_reset(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* v :
         {"TESSERA_RANK", "TESSERA_WORLD_SIZE", "TESSERA_LOCAL_RANK", "TESSERA_MASTER_ADDR",
          "TESSERA_MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"})
        unsetenv(v);
    for (auto& [k, v] : vars) setenv(k, v, 1);
}

std::string input_error(std::initializer_list<std::pair<const char*, const char*>> vars) {
    env_reset(vars);
    try {
        rank_env_from_environment();
    } catch (const InputError& e) {
        return e.what();
    }
    return "no error";
}

TEST(RankEnv, Single) {
    env_reset({});
    RankEnv e = rank_env_from_environment();
    EXPECT_EQ(e.source, "single");
    EXPECT_EQ(e.world_size, 1);
    EXPECT_EQ(e.rank, 0);
}

TEST(RankEnv, Tessera) {
    env_reset({{"TESSERA_RANK", "3"},
               {"TESSERA_WORLD_SIZE", "4"},
               {"TESSERA_LOCAL_RANK", "1"},
               {"TESSERA_MASTER_ADDR", "10.0.0.5"},
               {"TESSERA_MASTER_PORT", "4242"},
               {"RANK", "0"},
               {"WORLD_SIZE", "2"}});  // tessera's own take precedence
    RankEnv e = rank_env_from_environment();
    EXPECT_EQ(e.source, "tessera");
    EXPECT_EQ(e.rank, 3);
    EXPECT_EQ(e.world_size, 4);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.master_addr, "10.0.0.5");
    EXPECT_EQ(e.master_port, 4242);
}

TEST(RankEnv, Torchrun) {
    env_reset({{"RANK", "1"},
               {"WORLD_SIZE", "2"},
               {"LOCAL_RANK", "1"},
               {"MASTER_ADDR", "node0"},
               {"MASTER_PORT", "29500"}});
    RankEnv e = rank_env_from_environment();
    EXPECT_EQ(e.source, "torchrun");
    EXPECT_EQ(e.rank, 1);
    EXPECT_EQ(e.world_size, 2);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.master_addr, "node0");
    EXPECT_EQ(e.master_port, 29500);
}

TEST(RankEnv, OpenMpi) {
    env_reset({{"OMPI_COMM_WORLD_RANK", "5"},
               {"OMPI_COMM_WORLD_SIZE", "8"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
               {"MASTER_ADDR", "h1"},
               {"MASTER_PORT", "1234"}});
    RankEnv e = rank_env_from_environment();
    EXPECT_EQ(e.source, "mpirun");
    EXPECT_EQ(e.rank, 5);
    EXPECT_EQ(e.world_size, 8);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.master_addr, "h1");
    EXPECT_EQ(e.master_port, 1234);
}

TEST(RankEnv, OpenMpiWithoutMasterTellsWhatToSet) {
    std::string msg = input_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
    EXPECT_NE(msg.find("mpirun started this rank but MASTER_ADDR is not set"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("MASTER_PORT"), std::string::npos) << msg;
}

TEST(RankEnv, Slurm) {
    env_reset({{"SLURM_PROCID", "2"},
               {"SLURM_NTASKS", "4"},
               {"SLURM_LOCALID", "0"},
               {"MASTER_ADDR", "n7"},
               {"MASTER_PORT", "3000"}});
    RankEnv e = rank_env_from_environment();
    EXPECT_EQ(e.source, "srun");
    EXPECT_EQ(e.rank, 2);
    EXPECT_EQ(e.world_size, 4);
    EXPECT_EQ(e.local_rank, 0);
    EXPECT_EQ(e.master_addr, "n7");
}

TEST(RankEnv, BadValuesNameTheVariable) {
    std::string m = input_error(
        {{"RANK", "x1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
    EXPECT_NE(m.find("RANK='x1' is not an integer"), std::string::npos) << m;
    m = input_error(
        {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}});
    EXPECT_NE(m.find("MASTER_PORT='70000' is not an integer in [1, 65535]"), std::string::npos)
        << m;
    m = input_error(
        {{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
    EXPECT_NE(m.find("SLURM_PROCID=4 is not below the world size 4"), std::string::npos) << m;
    m = input_error({{"TESSERA_RANK", "0"}, {"TESSERA_WORLD_SIZE", "2"}});
    EXPECT_NE(m.find("TESSERA_MASTER_ADDR is not set"), std::string::npos) << m;
    env_reset({});
}

// ------------------------------------------------------------------------------------------------

TEST(TcpStore, SetGetWaitAndTimeout) {
    TcpStoreServer server("127.0.0.1", 0);
    ASSERT_GT(server.port(), 0);
    TcpStore a("127.0.0.1", server.port(), std::chrono::milliseconds(2000));
    TcpStore b("127.0.0.1", server.port(), std::chrono::milliseconds(300));
    a.set("k", {'h', 'i'});
    EXPECT_EQ(b.get("k"), (std::vector<char>{'h', 'i'}));
    // b waits for a key that a sets a little later
    std::thread t([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        a.set("late", {});
    });
    b.wait({"late"}, std::chrono::milliseconds(2000));
    t.join();
    a.set_noreply("p", "7");
    std::vector<char> v;
    EXPECT_TRUE(a.try_get("p", &v));  // same connection: ordered after the set
    EXPECT_EQ(std::string(v.begin(), v.end()), "7");
    EXPECT_FALSE(b.try_get("missing", &v));
    auto t0 = std::chrono::steady_clock::now();
    try {
        b.get("never");
        FAIL() << "no timeout";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("key 'never' did not appear within 300 ms"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2000));
    server.clear();
    EXPECT_EQ(server.size(), 0u);
}

TEST(TcpStore, UnreachableServerNamesAddress) {
    int port;
    {
        TcpStoreServer s("127.0.0.1", 0);
        port = s.port();
    }
    try {
        TcpStore c("127.0.0.1", port, std::chrono::milliseconds(200));
        FAIL() << "connected to a closed port";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(str_cat("127.0.0.1:", port, " unreachable")),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
