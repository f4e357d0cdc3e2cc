// Multi-host placement and command lines (cluster.h).
#include "engine/launch/cluster.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "engine/config/cluster_rules.h"
#include "engine/core/error.h"
#include "engine/core/str_join.h"
#include "engine/launch/ssh.h"

namespace tessera {

namespace {

// A word a shell reads back unchanged without quotes; others are quoted.
std::string shell_word(const std::string& w) {
    bool plain = !w.empty();
    for (unsigned char c : w)
        plain = plain && (std::isalnum(c) ||
                          std::string_view("_@%+=:,./-").find(char(c)) != std::string_view::npos);
    return plain ? w : shell_quote(w);
}

std::string shell_line(const std::vector<std::string>& words) {
    return str_join(words, " ", shell_word);
}

int world_of(const RunConfig& cfg) {
    return cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp;
}

std::string config_name(const RunConfig& cfg) {
    std::string n = std::filesystem::path(cfg.source_path).filename().string();
    return n.empty() ? "project.yaml" : n;
}

}  // namespace

std::vector<NodePlacement> cluster_place(const ClusterConfig& cluster, int world) {
    std::vector<NodePlacement> nodes;
    int next = 0;
    for (size_t h = 0; h < cluster.hosts.size() && next < world; ++h) {
        int n = std::min(cluster.hosts[h].slots, world - next);
        nodes.push_back({int(h), next, n});
        next += n;
    }
    if (next < world)
        throw InputError(str_cat("cluster: the hosts have ", next, " slots but the plan needs ",
                                 world, " ranks (dp x tp x pp)"));
    return nodes;
}

std::vector<HostRanks> cluster_host_ranks(const RunConfig& cfg) {
    std::vector<HostRanks> out(cfg.cluster.hosts.size());
    const int world = cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp;
    for (const auto& n :
         cluster_place(cfg.cluster, std::min(world, cluster_total_slots(cfg.cluster))))
        out[size_t(n.host)] = {n.first_rank, n.ranks};
    return out;
}

std::string cluster_host_addr(const ClusterHost& h) {
    return h.addr.empty() ? h.host : h.addr;
}

std::string cluster_remote_config_text(const RunConfig& cfg) {
    YAML::Node root = YAML::Load(cfg.source_text);
    if (root.IsMap()) root.remove("cluster");
    YAML::Emitter e;
    e << root;
    return str_cat(e.c_str(), "\n");
}

std::vector<std::string> cluster_node_remote_argv(const RunConfig& cfg, const NodePlacement& node,
                                                  int attempt, int64_t run_id,
                                                  const std::vector<std::string>& rank_args) {
    const ClusterConfig& c = cfg.cluster;
    const ClusterHost& h = c.hosts[size_t(node.host)];
    std::vector<std::string> a = {
        c.tessera,       "_node",
        "--first",       std::to_string(node.first_rank),
        "--ranks",       std::to_string(node.ranks),
        "--mesh",        str_cat(cfg.parallel.dp, ",", cfg.parallel.tp, ",", cfg.parallel.pp),
        "--master",      cluster_host_addr(c.hosts[0]),
        "--port",        std::to_string(c.rendezvous_port),
        "--gloo-host",   cluster_host_addr(h),
        "--run-id",      std::to_string(run_id),
        "--attempt",     std::to_string(attempt),
        "--config-name", config_name(cfg),
        "--config-text", cluster_remote_config_text(cfg)};
    if (node.first_rank == 0) a.push_back("--serve-store");
    if (!c.workdir.empty()) {
        a.push_back("--workdir");
        a.push_back(c.workdir);
    }
    for (const auto& [k, v] : c.env) {
        a.push_back("--env");
        a.push_back(k + "=" + v);
    }
    a.push_back("--");
    a.insert(a.end(), rank_args.begin(), rank_args.end());
    return a;
}

void cluster_fill_launch_spec(const RunConfig& cfg, const std::vector<std::string>& rank_args,
                              const std::vector<std::string>& resume_args, LaunchSpec& spec) {
    std::vector<NodePlacement> place = cluster_place(cfg.cluster, world_of(cfg));
    std::vector<SshTarget> targets;
    spec.nodes.clear();
    for (const auto& p : place) {
        SshTarget t = ssh_target(cfg.cluster, cfg.cluster.hosts[size_t(p.host)]);
        ssh_check_target(t);  // refuse bad names and keys before any ssh runs
        targets.push_back(t);
        spec.nodes.push_back({t.label(), p.first_rank, p.ranks});
    }
    spec.node_argv = [cfg, place, targets, rank_args, resume_args](int node, int attempt,
                                                                   bool resume, int64_t run_id) {
        std::vector<std::string> ra = rank_args;
        if (resume) ra.insert(ra.end(), resume_args.begin(), resume_args.end());
        return ssh_argv(targets[size_t(node)],
                        cluster_node_remote_argv(cfg, place[size_t(node)], attempt, run_id, ra),
                        /*keep_stdin=*/true);
    };
    spec.node_failure = [targets](int node, int exit_code, const std::string& err) {
        SshResult r;
        r.exit_code = exit_code;
        r.err = err;
        return ssh_failure_message(targets[size_t(node)], r);
    };
}

std::string cluster_sbatch_script(const RunConfig& cfg, const std::string& config_path) {
    const ClusterConfig& c = cfg.cluster;
    int world = world_of(cfg);
    std::vector<NodePlacement> place =
        c.hosts.empty() ? std::vector<NodePlacement>{{0, 0, world}} : cluster_place(c, world);
    int per_node = 0;
    for (const auto& p : place) per_node = std::max(per_node, p.ranks);
    bool gpu = cfg.runtime.device == "cuda";
    std::string s = "#!/bin/bash\n";
    s += str_cat("# Generated by tessera ", TESSERA_VERSION, " for ", config_name(cfg), ": dp",
                 cfg.parallel.dp, " x tp", cfg.parallel.tp, " x pp", cfg.parallel.pp, " = ", world,
                 " ranks on ", place.size(), " node", place.size() == 1 ? "" : "s", ".\n");
    s += str_cat("#SBATCH --job-name=", shell_word(cfg.name), "\n");
    s += str_cat("#SBATCH --nodes=", place.size(), "\n");
    s += str_cat("#SBATCH --ntasks=", world, "\n");
    s += str_cat("#SBATCH --ntasks-per-node=", per_node, "\n");
    if (gpu) s += str_cat("#SBATCH --gpus-per-node=", per_node, "\n");
    s += "#SBATCH --output=tessera-%j.out\n";
    s += "set -euo pipefail\n";
    if (!c.workdir.empty())
        s += str_cat("mkdir -p ", shell_word(c.workdir), " && cd ", shell_word(c.workdir), "\n");
    s += "# Rank 0 serves the rendezvous store on the first node of the allocation.\n";
    s += "export MASTER_ADDR=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\"\n";
    s += str_cat("export MASTER_PORT=", c.rendezvous_port, "\n");
    if (gpu) s += "export NCCL_NVLS_ENABLE=\"${NCCL_NVLS_ENABLE:-0}\"\n";
    for (const auto& [k, v] : c.env) s += str_cat("export ", k, "=", shell_quote(v), "\n");
    s += str_cat("srun --ntasks=", world, " --ntasks-per-node=", per_node, " --distribution=block ",
                 shell_line({c.tessera, "train", config_path}), "\n");
    return s;
}

std::string cluster_mpirun_command(const RunConfig& cfg, const std::string& config_path) {
    const ClusterConfig& c = cfg.cluster;
    int world = world_of(cfg);
    std::vector<std::string> w = {"mpirun", "-np", std::to_string(world)};
    std::string master = "127.0.0.1";
    if (!c.hosts.empty()) {
        std::string hosts;
        for (const auto& p : cluster_place(c, world)) {
            const ClusterHost& h = c.hosts[size_t(p.host)];
            hosts += str_cat(hosts.empty() ? "" : ",", h.host, ":", p.ranks);
        }
        w.insert(w.end(), {"-H", hosts, "--map-by", "slot"});
        master = cluster_host_addr(c.hosts[0]);
    }
    w.insert(w.end(),
             {"-x", "MASTER_ADDR=" + master, "-x", str_cat("MASTER_PORT=", c.rendezvous_port)});
    if (cfg.runtime.device == "cuda") w.insert(w.end(), {"-x", "NCCL_NVLS_ENABLE=0"});
    for (const auto& [k, v] : c.env) w.insert(w.end(), {"-x", k + "=" + v});
    if (!c.workdir.empty()) w.insert(w.end(), {"--wdir", c.workdir});
    w.insert(w.end(), {c.tessera, "train", config_path});
    return shell_line(w);
}

}  // namespace tessera
