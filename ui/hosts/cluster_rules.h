// What the Hosts page checks before an edit of `cluster:` reaches the document: every problem of a
// ClusterConfig at once (the config parser stops at the first), each tied to the key path of the
// control that shows it. Qt-free, like engine/plan/plan_validate.h, so it is tested without a
// display; the rules are the parser's (config_rules.cpp read_cluster / config_check_rules), plus
// duplicates, which ssh would silently treat as one machine.
#pragma once
#include <string>
#include <vector>

#include "engine/config/config.h"

namespace tessera::studio {

struct ClusterIssue {
    // "cluster.hosts[1].host", "cluster.hosts[0].slots", "cluster.slots" (the total),
    // "cluster.env[2]", "cluster.tessera", ...
    std::string key;
    std::string message;  // what is wrong, with what was found and what is expected
};

// All issues of cfg.cluster against cfg's plan (dp x tp x pp ranks need as many slots).
std::vector<ClusterIssue> cluster_validate(const RunConfig& cfg);

// The issues whose key is `key`, or starts with `key` + '[' / '.', joined by newlines.
std::string cluster_issues_for_key(const std::vector<ClusterIssue>& issues, const std::string& key);

// The first issue of `after` that `before` does not have ("" = the edit adds no problem). An edit
// is refused when it adds one; a problem that was already there (dp raised on the Plan page past
// the slots) does not block fixing something else.
std::string cluster_new_issue(const RunConfig& before, const RunConfig& after);

int cluster_total_slots(const ClusterConfig& cluster);

// The ranks each host runs, in host order: engine/launch/cluster.h cluster_place() (a host's
// slots, then the next host) with `first` = -1 and `count` = 0 for a host left unused. When the
// slots are short, the ranks that fit are placed (the rest is cluster.slots' issue).
struct HostRanks {
    int first = -1, count = 0;
};
std::vector<HostRanks> cluster_host_ranks(const RunConfig& cfg);

// The host table's columns, in order.
enum class HostColumn { host, user, port, slots, ranks, identity, addr };
constexpr int kHostColumnCount = 7;
const char* cluster_host_column_name(HostColumn c);

}  // namespace tessera::studio
