// The launcher: one per job, the only writer of runs.db. It serves the rendezvous store, starts
// one process per rank, prefixes each rank's output with its mesh coordinates, ingests the ranks'
// telemetry (JSON lines on a pipe) into the run store, and tears the whole job down within
// seconds when any rank dies. With `restarts: N` it relaunches from the last complete checkpoint.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/parallel/mesh.h"
#include "engine/telemetry/telemetry.h"

namespace tessera {

class RunStore;

// A remote node of a multi-host job: `tessera _node` started over ssh runs its ranks
// [first_rank, first_rank + ranks) and streams their output and telemetry back on ssh's stdout.
struct LaunchNode {
    std::string label;  // "alice@gpu-a:2222", used in messages
    int first_rank = 0, ranks = 0;
};

struct LaunchSpec {
    MeshShape mesh;
    // argv of one rank process (argv[0] is the executable path); the launcher adds the
    // environment below. `resume_argv` is appended on a restart after a failure once the run
    // has recorded a checkpoint (before that, a restart starts afresh).
    std::vector<std::string> argv;
    std::vector<std::string> resume_argv;
    std::vector<std::pair<std::string, std::string>> env;  // extra environment for every rank
    int restarts = 0;
    std::chrono::milliseconds kill_grace{3000};  // SIGTERM -> SIGKILL
    RunStartRecord run;                          // what the store records for the run
    std::string db_path;
    // Multi-host: the nodes (empty = every rank runs here) and the command line that starts a
    // node's launcher for an attempt (the ssh argv); `argv`/`env` above are then unused here.
    std::vector<LaunchNode> nodes;
    // `resume`: the node's ranks get resume_argv (a restart of a run that saved a checkpoint).
    std::function<std::vector<std::string>(int node, int attempt, bool resume, int64_t run_id)>
        node_argv;
    // Turns a node command's failure (exit code, everything it wrote on stderr) into one
    // sentence (ssh_failure_message); "" = use the launcher's generic wording.
    std::function<std::string(int node, int exit_code, const std::string& err)> node_failure;
};

// Every rank process gets: TESSERA_RANK, TESSERA_WORLD_SIZE, TESSERA_LOCAL_RANK,
// TESSERA_MASTER_ADDR, TESSERA_MASTER_PORT (the launcher's rendezvous store),
// TESSERA_TELEMETRY_FD (write end of the telemetry pipe), TESSERA_RUN_ID, TESSERA_ATTEMPT.
struct LaunchResult {
    int64_t run_id = 0;
    std::string status;  // completed | failed | stopped
    std::string
        message;  // for failures: "rank 3 (dp1.tp1.pp0) killed by signal 9 (SIGKILL) at step 12"
    int attempts = 1;
    int64_t last_step = 0;
};

LaunchResult launch_job(const LaunchSpec& spec, std::ostream& out);

// Ctrl-C in the launcher: forward SIGINT to the ranks (they stop after the current step).
void launch_request_stop();

// `tessera _node`: one host's share of a multi-host job, started by launch_job over ssh. Spawns
// ranks [first_rank, first_rank + ranks) like the single-host launcher and writes, on stdout, one
// line per event (docs/launch.md "Node protocol"). Reading "stop" on stdin forwards SIGINT to the
// ranks; end of stdin (the ssh connection is gone) kills them. Returns the exit code.
struct NodeSpec {
    MeshShape mesh;
    int first_rank = 0, ranks = 0;
    std::vector<std::string> argv;  // one rank's command line
    std::vector<std::pair<std::string, std::string>> env;
    std::string master_addr;  // the rendezvous store (on node 0)
    int master_port = 0;
    bool serve_store = false;  // node 0: serve it on 0.0.0.0:master_port
    std::string gloo_host;     // address this node's ranks listen on ("" = default)
    int64_t run_id = 0;
    int attempt = 1;
    std::chrono::milliseconds kill_grace{3000};
};
int launch_node(const NodeSpec& spec);

}  // namespace tessera
