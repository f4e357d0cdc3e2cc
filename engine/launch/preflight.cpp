// Preflight checks (preflight.h). Per host: the name and key file, the host key against
// known_hosts, ssh itself, the remote tessera and its version, then `tessera _probe` on the host
// (working directory, GPUs or cores versus slots, data files); across hosts: the rendezvous port
// on the first host, listened on there and connected to from every host.
#include "engine/launch/preflight.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <future>
#include <mutex>
#include <sstream>

#include "engine/core/error.h"
#include "engine/launch/cluster.h"
#include "engine/launch/ssh.h"

namespace tessera {

namespace {

using std::chrono::seconds;

PreflightCheck check(std::string name, std::string status, std::string detail, std::string fix = "") {
    return {std::move(name), std::move(status), std::move(detail), std::move(fix)};
}

std::string first_line(const std::string& s) {
    std::string l = s.substr(0, s.find('\n'));
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.pop_back();
    return l;
}

// The probe's remote argv (`tessera _probe`), with the cluster's environment.
std::vector<std::string> probe_argv(const RunConfig& cfg, int slots) {
    const ClusterConfig& c = cfg.cluster;
    std::vector<std::string> a = {c.tessera, "_probe", "--slots", std::to_string(slots),
                                  "--device", cfg.runtime.device, "--config-name",
                                  std::filesystem::path(cfg.source_path).filename().string(),
                                  "--config-text", cluster_remote_config_text(cfg)};
    if (!c.workdir.empty()) a.insert(a.end(), {"--workdir", c.workdir});
    for (const auto& [k, v] : c.env) a.insert(a.end(), {"--env", k + "=" + v});
    return a;
}

// The host's own checks. Returns false when the host cannot be used at all (later cross-host
// checks skip it).
bool check_host(const RunConfig& cfg, const SshTarget& t, int slots, PreflightHost& h) {
    try {
        ssh_check_target(t);
    } catch (const Error& e) {
        h.checks.push_back(check("ssh", "fail", e.what(), "fix the host entry in cluster:"));
        return false;
    }
    HostKeyScan scan = ssh_scan_host_key(t);
    std::string fps;
    for (const auto& f : scan.fingerprints) fps += (fps.empty() ? "" : ", ") + f;
    switch (scan.state) {
        case HostKeyScan::State::known:
            h.checks.push_back(check("host key", "ok", str_cat("known: ", fps)));
            break;
        case HostKeyScan::State::unknown:
            h.checks.push_back(check("host key", "fail", str_cat("unknown: ", fps),
                                     str_cat("compare the fingerprint with the host's own "
                                             "(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), "
                                             "then `tessera hosts CONFIG trust ", t.port == 22 ? t.host : str_cat(t.host, ":", t.port), "`")));
            return false;
        case HostKeyScan::State::changed:
            h.checks.push_back(check("host key", "fail", scan.message + str_cat(" (now: ", fps, ")"),
                                     str_cat("if the host was reinstalled: ssh-keygen -R '",
                                             t.port == 22 ? t.host : str_cat("[", t.host, "]:", t.port),
                                             "' -f ", ssh_known_hosts_file(t))));
            return false;
        case HostKeyScan::State::unreachable:
            h.checks.push_back(check("ssh", "fail", scan.message,
                                     "check the host name, the port and that sshd runs there"));
            return false;
    }
    const std::string& exe = cfg.cluster.tessera;
    SshResult v = ssh_run(t, {exe, "--version"}, seconds(t.connect_timeout + 20));
    if (v.exit_code == 255 || v.timed_out) {
        h.checks.push_back(check("ssh", "fail", ssh_failure_message(t, v),
                                 "run `ssh -p PORT USER@HOST true` by hand to see why"));
        return false;
    }
    h.checks.push_back(check("ssh", "ok", "key authentication, no prompt"));
    std::string want = str_cat("tessera ", TESSERA_VERSION);
    if (v.exit_code == 127 || v.exit_code == 126) {
        h.checks.push_back(check("tessera", "fail",
                                 str_cat("'", exe, "' is not found or not executable on the host (",
                                         first_line(v.err), ")"),
                                 "install tessera there, or set cluster.tessera to its absolute path "
                                 "(non-interactive ssh shells do not read ~/.bashrc)"));
        return false;
    }
    std::string got = first_line(v.out);
    if (v.exit_code != 0 || got != want) {
        h.checks.push_back(check("tessera", "fail",
                                 str_cat("'", exe, "' says '", v.exit_code ? first_line(v.err) : got,
                                         "', this machine runs ", want),
                                 "install the same version on every host"));
        return false;
    }
    h.checks.push_back(check("tessera", "ok", str_cat(got, " (", exe, ")")));

    SshResult p = ssh_run(t, probe_argv(cfg, slots), seconds(t.connect_timeout + 60));
    std::istringstream in(p.out);
    std::string line;
    bool any = false;
    while (std::getline(in, line)) {
        try {
            auto j = nlohmann::json::parse(line);
            h.checks.push_back(check(j.at("name"), j.at("status"), j.at("detail"), j.value("fix", "")));
            any = true;
        } catch (const std::exception&) {
        }
    }
    if (!any || (p.exit_code != 0 && p.exit_code != 1))
        h.checks.push_back(check("probe", "fail",
                                 str_cat("`tessera _probe` ", p.exit_code == 255 ? ssh_failure_message(t, p)
                                                                                  : first_line(p.err)),
                                 "run it by hand on the host"));
    std::string env;
    for (const auto& [k, val] : cfg.cluster.env) env += str_cat(env.empty() ? "" : " ", k, "=", val);
    h.checks.push_back(check("environment", "ok", env.empty() ? "nothing extra (cluster.env is empty)"
                                                             : str_cat("passed to every rank: ", env)));
    return true;
}

// The rendezvous: node 0 listens on the port, every node (node 0 too) connects to it.
void check_rendezvous(const RunConfig& cfg, const std::vector<SshTarget>& targets,
                      std::vector<PreflightHost>& hosts, const std::vector<bool>& usable) {
    const ClusterConfig& c = cfg.cluster;
    std::string addr = cluster_host_addr(c.hosts[0]);
    std::string where = str_cat(addr, ":", c.rendezvous_port);
    if (!usable[0]) {
        for (auto& h : hosts)
            h.checks.push_back(check("rendezvous", "warn", str_cat(where, " not tested (the first host failed)")));
        return;
    }
    int expect = 0;
    for (bool u : usable) expect += u;
    auto listener = std::async(std::launch::async, [&] {
        return ssh_run(targets[0],
                       {c.tessera, "_probe", "--listen", std::to_string(c.rendezvous_port),
                        "--seconds", "20", "--expect", std::to_string(expect)},
                       seconds(targets[0].connect_timeout + 30));
    });
    std::vector<std::future<SshResult>> connects(targets.size());
    for (size_t i = 0; i < targets.size(); ++i)
        if (usable[i])
            connects[i] = std::async(std::launch::async, [&, i] {
                return ssh_run(targets[i], {c.tessera, "_probe", "--connect", where, "--seconds", "15"},
                               seconds(targets[i].connect_timeout + 25));
            });
    SshResult l = listener.get();
    bool bind_failed = l.out.find("bind failed") != std::string::npos;
    for (size_t i = 0; i < targets.size(); ++i) {
        if (!usable[i]) continue;
        SshResult r = connects[i].get();
        if (bind_failed && i == 0)
            hosts[i].checks.push_back(check("rendezvous", "fail",
                                            str_cat("port ", c.rendezvous_port, " cannot be served here: ",
                                                    first_line(l.out.substr(l.out.find("bind failed")))),
                                            "pick a free port: cluster.rendezvous_port"));
        else if (r.exit_code == 0)
            hosts[i].checks.push_back(check("rendezvous", "ok", str_cat(where, " reachable")));
        else
            hosts[i].checks.push_back(check("rendezvous", "fail",
                                            str_cat(where, " not reachable from this host: ",
                                                    first_line(r.out + r.err)),
                                            "open the port in the firewall, or set the first host's "
                                            "addr: to an address the others reach"));
    }
}

}  // namespace

bool PreflightHost::ok() const {
    for (const auto& c : checks)
        if (c.status == "fail") return false;
    return true;
}

bool PreflightReport::ok() const {
    for (const auto& h : hosts)
        if (!h.ok()) return false;
    return !hosts.empty();
}

std::string PreflightReport::to_text() const {
    std::ostringstream o;
    for (const auto& h : hosts) {
        o << h.label << " (ranks " << h.first_rank << ".." << h.first_rank + h.ranks - 1 << ")\n";
        for (const auto& c : h.checks) {
            std::string mark = c.status == "ok" ? "ok  " : c.status == "warn" ? "warn" : "FAIL";
            o << "  " << mark << "  " << c.name << std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ')
              << c.detail << "\n";
            if (!c.fix.empty() && c.status != "ok") o << "                    -> " << c.fix << "\n";
        }
    }
    o << (ok() ? "preflight: every host is ready\n" : "preflight: FAILED (see the FAIL lines)\n");
    return o.str();
}

std::string PreflightReport::to_json() const {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& h : hosts) {
        nlohmann::json checks = nlohmann::json::array();
        for (const auto& c : h.checks)
            checks.push_back({{"name", c.name}, {"status", c.status}, {"detail", c.detail}, {"fix", c.fix}});
        j.push_back({{"host", h.label}, {"first_rank", h.first_rank}, {"ranks", h.ranks},
                     {"ok", h.ok()}, {"checks", checks}});
    }
    return nlohmann::json{{"ok", ok()}, {"hosts", j}}.dump(2);
}

PreflightReport preflight_run(const RunConfig& cfg, std::ostream* progress) {
    PreflightReport rep;
    if (cfg.cluster.hosts.empty())
        throw InputError(str_cat(cfg.source_path, ": cluster: no hosts (add cluster.hosts or "
                                                  "cluster.hostfile); a local run needs no preflight"));
    int world = cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp;
    std::vector<NodePlacement> place = cluster_place(cfg.cluster, world);
    std::vector<SshTarget> targets;
    for (const auto& p : place) {
        const ClusterHost& ch = cfg.cluster.hosts[size_t(p.host)];
        targets.push_back(ssh_target(cfg.cluster, ch));
        rep.hosts.push_back({targets.back().label(), p.first_rank, p.ranks, {}});
    }
    std::mutex mu;
    std::vector<std::future<bool>> jobs;
    for (size_t i = 0; i < place.size(); ++i)
        jobs.push_back(std::async(std::launch::async, [&, i] {
            bool ok = check_host(cfg, targets[i], place[i].ranks, rep.hosts[i]);
            if (progress) {
                std::lock_guard<std::mutex> g(mu);
                *progress << "preflight: " << rep.hosts[i].label << (rep.hosts[i].ok() ? " ok" : " has problems")
                          << std::endl;
            }
            return ok;
        }));
    std::vector<bool> usable;
    for (auto& j : jobs) usable.push_back(j.get());
    check_rendezvous(cfg, targets, rep.hosts, usable);
    return rep;
}

}  // namespace tessera
