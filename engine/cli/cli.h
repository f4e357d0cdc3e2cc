// The `tessera` command's subcommands. Each takes its arguments after the subcommand name and
// returns the process exit code (0 ok, 1 failure, 2 bad input). app/tessera_main.cpp dispatches.
#pragma once
#include <string>
#include <vector>

namespace tessera {

struct Checkpoint;
struct RunConfig;

using CliArgs = std::vector<std::string>;

// This executable's path (/proc/self/exe): what the launchers start for each rank.
std::string cli_self_exe();
// The run config checkpoint `ck` was saved with (its manifest's config_text), relative paths
// resolved against the run's config folder where the checkpoint root tells it (the root less the
// config's relative checkpoint.dir), else against the checkpoint (checkpoint_config.cpp).
RunConfig cli_checkpoint_config(const Checkpoint& ck);

int cli_train(const CliArgs& args);   // tessera train CONFIG [--steps N] [--db FILE] [--set k=v]...
int cli_check(const CliArgs& args);   // tessera check CONFIG [--set k=v]...
int cli_plan(const CliArgs& args);    // tessera plan CONFIG [--device H200] [--json] [--set k=v]...
int cli_runs(const CliArgs& args);    // tessera runs list|show|export --db FILE [--run ID] [--csv]
int cli_data(const CliArgs& args);    // tessera data prepare|where ...
int cli_sample(const CliArgs& args);  // tessera sample --checkpoint DIR --prompt TEXT ...
int cli_export(const CliArgs& args);  // tessera export --hf CHECKPOINT OUT_DIR [--force]
int cli_rank(const CliArgs& args);    // tessera _rank CONFIG ... (started by the launcher)
int cli_preflight(const CliArgs& args);      // tessera preflight CONFIG [--json]
int cli_hosts(const CliArgs& args);          // tessera hosts CONFIG [scan | trust HOST [--yes]]
int cli_launch_script(const CliArgs& args);  // tessera launch-script CONFIG --format sbatch|mpirun
int cli_node(const CliArgs& args);           // tessera _node ... (started over ssh)
int cli_probe(const CliArgs& args);          // tessera _probe ... (started over ssh by preflight)

}  // namespace tessera
