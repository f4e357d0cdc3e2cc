// The rules of a `cluster:` section, in one place: the YAML reader (config_rules.cpp) refuses the
// first broken one with its file:line:col, and cluster_problems() lists every one at once with its
// key path — what the studio's Hosts page shows beside each control, and how it refuses an edit
// that would add a problem. Beyond the reader's per-key rules it catches what only the whole
// section shows: two rows for one machine (ssh would treat them as one) and too few slots for the
// plan's ranks.
#pragma once
#include <string>
#include <vector>

#include "engine/config/config.h"

namespace tessera {

// The limits the reader and cluster_problems share.
inline constexpr int kClusterMaxSlots = 4096;          // ranks on one host
inline constexpr int kClusterMaxPort = 65535;          // ssh and rendezvous ports: [1, 65535]
inline constexpr int kClusterMaxConnectTimeout = 600;  // seconds

// [A-Za-z_][A-Za-z0-9_]*: a name cluster.env may pass to the ranks.
bool cluster_env_name_ok(const std::string& name);

// One problem: "cluster.hosts[2].slots: expected a positive integer up to 4096 (the ranks this
// host runs), found 0".
struct ConfigProblem {
    std::string key;       // cluster.hosts[2].slots, cluster.env[1], cluster.slots (the total), ...
    std::string expected;  // what the rule wants
    std::string found;     // what the config holds
    std::string text() const { return key + ": expected " + expected + ", found " + found; }
};

// Every problem of cfg.cluster, in key order (hosts by row, then the total slots against the
// plan's dp x tp x pp, then the settings and env). Empty when the section is fine.
std::vector<ConfigProblem> cluster_problems(const RunConfig& cfg);

// The texts of the problems at `key` or below it (key + '[' or '.'), one per line.
std::string cluster_problems_at(const std::vector<ConfigProblem>& problems, const std::string& key);

// The first problem `after` has that `before` has not ("" when the edit adds none), as text.
// Problems compare by what they say, not by row, so removing a row does not make a later row's
// old problem new; too few slots counts as new only when the edit lowers the total.
std::string cluster_new_problem(const RunConfig& before, const RunConfig& after);

int cluster_total_slots(const ClusterConfig& cluster);

}  // namespace tessera
