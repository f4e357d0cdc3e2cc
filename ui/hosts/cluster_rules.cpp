// Cluster validation for the Hosts page (cluster_rules.h).
#include "ui/hosts/cluster_rules.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "engine/core/error.h"
#include "engine/launch/cluster.h"

namespace tessera::studio {

namespace {

std::string host_key(size_t i, const char* field) {
    return str_cat("cluster.hosts[", i, "].", field);
}

// A name ssh will see (host, user, addr): the parser's rule (cluster_name_problem).
void check_name(std::vector<ClusterIssue>& out, const std::string& key, const char* what,
                const std::string& v, bool is_user) {
    std::string p = cluster_name_problem(v, is_user);
    if (p.empty()) return;
    out.push_back({key, str_cat(what, " '", v, "' ", p, " (expected ",
                                is_user ? "letters, digits, '.', '_', '-'"
                                        : "letters, digits, '.', '-', '_', ':'",
                                "; refused before ssh ever sees it)")});
}

void check_hosts(const RunConfig& cfg, std::vector<ClusterIssue>& out) {
    const auto& hosts = cfg.cluster.hosts;
    std::map<std::pair<std::string, int>, size_t> seen;  // (host, port) -> first row
    for (size_t i = 0; i < hosts.size(); ++i) {
        const ClusterHost& h = hosts[i];
        if (h.host.empty())
            out.push_back({host_key(i, "host"), "the host name is empty"});
        else
            check_name(out, host_key(i, "host"), "host", h.host, false);
        if (!h.user.empty()) check_name(out, host_key(i, "user"), "user", h.user, true);
        if (!h.addr.empty()) check_name(out, host_key(i, "addr"), "address", h.addr, false);
        if (h.port < 1 || h.port > 65535)
            out.push_back({host_key(i, "port"), str_cat("port ", h.port, " is not in [1, 65535]")});
        if (h.slots < 1 || h.slots > 4096)
            out.push_back({host_key(i, "slots"), str_cat("slots ", h.slots, " is not in [1, 4096] ",
                                                         "(a host runs at least one rank)")});
        if (h.identity.find('\n') != std::string::npos)
            out.push_back(
                {host_key(i, "identity"), "the identity file name contains a line break"});
        auto [it, fresh] = seen.emplace(std::make_pair(h.host, h.port), i);
        if (!fresh && !h.host.empty())
            out.push_back({host_key(i, "host"),
                           str_cat("host ", h.host, " port ", h.port, " is already row ",
                                   it->second + 1, " (one row per machine: raise its slots)")});
    }
    const auto& p = cfg.parallel;
    const int world = p.dp * p.tp * p.pp, slots = cluster_total_slots(cfg.cluster);
    if (!hosts.empty() && slots < world)
        out.push_back({"cluster.slots",
                       str_cat("the hosts have ", slots, " slot", slots == 1 ? "" : "s",
                               "; dp x tp x pp = ", p.dp, " x ", p.tp, " x ", p.pp, " = ", world,
                               " ranks need at least ", world, " (add slots, or lower the plan)")});
}

void check_settings(const ClusterConfig& c, std::vector<ClusterIssue>& out) {
    if (c.tessera.empty())
        out.push_back({"cluster.tessera",
                       "the remote tessera is empty (a path, or a name on the remote PATH)"});
    if (c.rendezvous_port < 1 || c.rendezvous_port > 65535)
        out.push_back({"cluster.rendezvous_port",
                       str_cat("port ", c.rendezvous_port, " is not in [1, 65535]")});
    if (c.connect_timeout < 1 || c.connect_timeout > 600)
        out.push_back({"cluster.connect_timeout",
                       str_cat("connect timeout ", c.connect_timeout, " s is not in [1, 600]")});
    std::set<std::string> names;
    for (size_t i = 0; i < c.env.size(); ++i) {
        const std::string& n = c.env[i].first;
        bool ok = !n.empty() && !std::isdigit((unsigned char)n[0]);
        for (char ch : n) ok = ok && (std::isalnum((unsigned char)ch) || ch == '_');
        const std::string key = str_cat("cluster.env[", i, "]");
        if (!ok)
            out.push_back(
                {key, str_cat("environment name '", n, "' is not [A-Za-z_][A-Za-z0-9_]*")});
        else if (!names.insert(n).second)
            out.push_back({key, str_cat("environment variable ", n, " is set twice")});
    }
}

}  // namespace

int cluster_total_slots(const ClusterConfig& cluster) {
    int n = 0;
    for (const auto& h : cluster.hosts) n += h.slots;
    return n;
}

std::vector<HostRanks> cluster_host_ranks(const RunConfig& cfg) {
    std::vector<HostRanks> out(cfg.cluster.hosts.size());
    const int world = cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp;
    for (const auto& n :
         cluster_place(cfg.cluster, std::min(world, cluster_total_slots(cfg.cluster))))
        out[size_t(n.host)] = {n.first_rank, n.ranks};
    return out;
}

std::vector<ClusterIssue> cluster_validate(const RunConfig& cfg) {
    std::vector<ClusterIssue> out;
    check_hosts(cfg, out);
    check_settings(cfg.cluster, out);
    return out;
}

std::string cluster_issues_for_key(const std::vector<ClusterIssue>& issues,
                                   const std::string& key) {
    std::string s;
    for (const auto& i : issues) {
        bool match =
            i.key == key || (i.key.size() > key.size() && i.key.compare(0, key.size(), key) == 0 &&
                             (i.key[key.size()] == '[' || i.key[key.size()] == '.'));
        if (match) s += (s.empty() ? "" : "\n") + i.message;
    }
    return s;
}

std::string cluster_new_issue(const RunConfig& before, const RunConfig& after) {
    // Issues compare by message, except the slot shortage: its message names the count, and
    // adding slots towards enough must stay possible (only fewer slots make it worse).
    std::set<std::string> old;
    for (const auto& i : cluster_validate(before))
        old.insert(i.key == "cluster.slots" ? i.key : i.message);
    const bool fewer = cluster_total_slots(after.cluster) < cluster_total_slots(before.cluster);
    for (const auto& i : cluster_validate(after)) {
        if (i.key == "cluster.slots" ? (!old.count(i.key) || fewer) : !old.count(i.message))
            return i.message;
    }
    return "";
}

const char* cluster_host_column_name(HostColumn c) {
    switch (c) {
        case HostColumn::host:
            return "Host";
        case HostColumn::user:
            return "User";
        case HostColumn::port:
            return "Port";
        case HostColumn::slots:
            return "Slots";
        case HostColumn::ranks:
            return "Ranks";
        case HostColumn::identity:
            return "Identity file";
        case HostColumn::addr:
            return "Address";
    }
    return "";
}

}  // namespace tessera::studio
