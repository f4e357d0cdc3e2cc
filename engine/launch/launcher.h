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

struct LaunchSpec {
    MeshShape mesh;
    // argv of one rank process (argv[0] is the executable path); the launcher adds the
    // environment below. `resume_argv` is appended on a restart after a failure.
    std::vector<std::string> argv;
    std::vector<std::string> resume_argv;
    std::vector<std::pair<std::string, std::string>> env;  // extra environment for every rank
    int restarts = 0;
    std::chrono::milliseconds kill_grace{3000};  // SIGTERM -> SIGKILL
    RunStartRecord run;  // what the store records for the run
    std::string db_path;
};

// Every rank process gets: TESSERA_RANK, TESSERA_WORLD_SIZE, TESSERA_LOCAL_RANK,
// TESSERA_MASTER_ADDR, TESSERA_MASTER_PORT (the launcher's rendezvous store),
// TESSERA_TELEMETRY_FD (write end of the telemetry pipe), TESSERA_RUN_ID, TESSERA_ATTEMPT.
struct LaunchResult {
    int64_t run_id = 0;
    std::string status;   // completed | failed | stopped
    std::string message;  // for failures: "rank 3 (dp1.tp1.pp0) killed by signal 9 (SIGKILL) at step 12"
    int attempts = 1;
    int64_t last_step = 0;
};

LaunchResult launch_job(const LaunchSpec& spec, std::ostream& out);

// Ctrl-C in the launcher: forward SIGINT to the ranks (they stop after the current step).
void launch_request_stop();

}  // namespace tessera
