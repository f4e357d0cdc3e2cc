// The cluster section's rules (cluster_rules.h).
#include "engine/config/cluster_rules.h"

#include <cctype>
#include <map>
#include <set>

#include "engine/core/error.h"

namespace tessera {

namespace {

std::string host_key(size_t i, const char* field) {
    return str_cat("cluster.hosts[", i, "].", field);
}

// A name ssh will see (host, user, addr): cluster_name_problem's rule.
void check_name(std::vector<ConfigProblem>& out, const std::string& key, const std::string& v,
                bool is_user) {
    const std::string p = cluster_name_problem(v, is_user);
    if (p.empty()) return;
    out.push_back(
        {key,
         is_user ? "a user name (letters, digits, '.', '_', '-'; refused before ssh ever sees it)"
                 : "a host name or address (letters, digits, '.', '-', '_', ':'; refused before "
                   "ssh ever sees it)",
         str_cat("'", v, "', which ", p)});
}

void check_port(std::vector<ConfigProblem>& out, const std::string& key, int port) {
    if (port < 1 || port > kClusterMaxPort)
        out.push_back({key, str_cat("a port in [1, ", kClusterMaxPort, "]"), str_cat(port)});
}

void check_hosts(const RunConfig& cfg, std::vector<ConfigProblem>& out) {
    const auto& hosts = cfg.cluster.hosts;
    std::map<std::pair<std::string, int>, size_t> seen;  // (host, port) -> first row
    for (size_t i = 0; i < hosts.size(); ++i) {
        const ClusterHost& h = hosts[i];
        if (h.host.empty())
            out.push_back({host_key(i, "host"), "a host name", "nothing"});
        else
            check_name(out, host_key(i, "host"), h.host, false);
        if (!h.user.empty()) check_name(out, host_key(i, "user"), h.user, true);
        check_port(out, host_key(i, "port"), h.port);
        if (h.slots < 1 || h.slots > kClusterMaxSlots)
            out.push_back({host_key(i, "slots"),
                           str_cat("a positive integer up to ", kClusterMaxSlots,
                                   " (the ranks this host runs)"),
                           str_cat(h.slots)});
        if (h.identity.find('\n') != std::string::npos)
            out.push_back({host_key(i, "identity"), "a key file name on one line", "a line break"});
        if (!h.addr.empty()) check_name(out, host_key(i, "addr"), h.addr, false);
        auto [it, fresh] = seen.emplace(std::make_pair(h.host, h.port), i);
        if (!fresh && !h.host.empty())
            out.push_back({host_key(i, "host"),
                           str_cat("one row per machine (raise the slots of cluster.hosts[",
                                   it->second, "])"),
                           str_cat(h.host, " port ", h.port, " again")});
    }
    const auto& p = cfg.parallel;
    const int world = p.dp * p.tp * p.pp, slots = cluster_total_slots(cfg.cluster);
    if (!hosts.empty() && slots < world)
        out.push_back({"cluster.slots",
                       str_cat("at least dp x tp x pp = ", p.dp, " x ", p.tp, " x ", p.pp, " = ",
                               world, " slots (add slots, or lower the plan)"),
                       str_cat(slots, " slot", slots == 1 ? "" : "s", " on ", hosts.size(), " host",
                               hosts.size() == 1 ? "" : "s")});
}

void check_settings(const ClusterConfig& c, std::vector<ConfigProblem>& out) {
    if (c.tessera.empty())
        out.push_back({"cluster.tessera", "a path, or a name on the remote PATH", "nothing"});
    check_port(out, "cluster.rendezvous_port", c.rendezvous_port);
    if (c.connect_timeout < 1 || c.connect_timeout > kClusterMaxConnectTimeout)
        out.push_back({"cluster.connect_timeout",
                       str_cat("seconds in [1, ", kClusterMaxConnectTimeout, "]"),
                       str_cat(c.connect_timeout)});
    std::map<std::string, size_t> names;  // name -> first index
    for (size_t i = 0; i < c.env.size(); ++i) {
        const std::string& n = c.env[i].first;
        const std::string key = str_cat("cluster.env[", i, "]");
        if (!cluster_env_name_ok(n)) {
            out.push_back({key, "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                           str_cat("'", n, "'")});
            continue;
        }
        auto [it, fresh] = names.emplace(n, i);
        if (!fresh)
            out.push_back({key, "each variable once",
                           str_cat(n, " set twice (first at cluster.env[", it->second, "])")});
    }
}

}  // namespace

bool cluster_env_name_ok(const std::string& name) {
    bool ok = !name.empty() && !std::isdigit((unsigned char)name[0]);
    for (char ch : name) ok = ok && (std::isalnum((unsigned char)ch) || ch == '_');
    return ok;
}

int cluster_total_slots(const ClusterConfig& cluster) {
    int n = 0;
    for (const auto& h : cluster.hosts) n += h.slots;
    return n;
}

std::vector<ConfigProblem> cluster_problems(const RunConfig& cfg) {
    std::vector<ConfigProblem> out;
    check_hosts(cfg, out);
    check_settings(cfg.cluster, out);
    return out;
}

std::string cluster_problems_at(const std::vector<ConfigProblem>& problems,
                                const std::string& key) {
    std::string s;
    for (const auto& p : problems) {
        const bool below = p.key.size() > key.size() && p.key.compare(0, key.size(), key) == 0 &&
                           (p.key[key.size()] == '[' || p.key[key.size()] == '.');
        if (p.key != key && !below) continue;
        if (!s.empty()) s += '\n';
        s += p.text();
    }
    return s;
}

std::string cluster_new_problem(const RunConfig& before, const RunConfig& after) {
    std::set<std::string> old;
    for (const auto& p : cluster_problems(before))
        old.insert(p.key == "cluster.slots" ? p.key : p.expected + "\n" + p.found);
    const bool fewer = cluster_total_slots(after.cluster) < cluster_total_slots(before.cluster);
    for (const auto& p : cluster_problems(after)) {
        const bool added = p.key == "cluster.slots" ? (!old.count(p.key) || fewer)
                                                    : !old.count(p.expected + "\n" + p.found);
        if (added) return p.text();
    }
    return "";
}

}  // namespace tessera
