// A run on the hosts of `cluster:` (config.h ClusterConfig): which ranks each host runs, the
// command line that starts a host's node launcher over ssh, and the equivalent Slurm batch
// script and mpirun command line for users who launch through their scheduler.
// docs/launch.md "Several hosts over SSH".
#pragma once
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/launch/launcher.h"

namespace tessera {

struct NodePlacement {
    int host = 0;        // index in cluster.hosts
    int first_rank = 0;  // ranks [first_rank, first_rank + ranks)
    int ranks = 0;
};
// Ranks fill the hosts in order (a host's slots, then the next host); hosts left without ranks
// are not used. InputError when the slots do not cover the world.
std::vector<NodePlacement> cluster_place(const ClusterConfig& cluster, int world);

// The ranks each host runs, in host order, by cluster_place's rule; first = -1 and count = 0 for
// a host left unused. When the slots are short the ranks that fit are placed (the shortage is
// cluster_problems' cluster.slots): what the studio's host table shows.
struct HostRanks {
    int first = -1, count = 0;
};
std::vector<HostRanks> cluster_host_ranks(const RunConfig& cfg);

// The address other hosts reach a host at (addr, else host).
std::string cluster_host_addr(const ClusterHost& h);

// What a remote rank reads as its config: the run's YAML without the cluster section (the
// remote side needs no host list, and a hostfile would not be there).
std::string cluster_remote_config_text(const RunConfig& cfg);

// The remote argv of `tessera _node` for one node and attempt; `rank_args` follow the config
// name in each rank's `tessera _rank` command line (--resume, --resume-from DIR, ...).
std::vector<std::string> cluster_node_remote_argv(const RunConfig& cfg, const NodePlacement& node,
                                                  int attempt, int64_t run_id,
                                                  const std::vector<std::string>& rank_args);

// Fills spec.nodes and spec.node_argv (ssh command lines) for a multi-host run.
void cluster_fill_launch_spec(const RunConfig& cfg, const std::vector<std::string>& rank_args,
                              const std::vector<std::string>& resume_args, LaunchSpec& spec);

// A Slurm batch script (one task per rank, the first node serving the rendezvous) and an Open
// MPI command line running the same plan; `config_path` is the config as seen from the cluster.
std::string cluster_sbatch_script(const RunConfig& cfg, const std::string& config_path);
std::string cluster_mpirun_command(const RunConfig& cfg, const std::string& config_path);

}  // namespace tessera
