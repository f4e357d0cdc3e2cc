// Preflight checks (preflight.h). Per host: the name and key file, the host key against
// known_hosts, ssh itself, the remote tessera and its version, then `tessera _probe` on the host
// (working directory, GPUs or cores versus slots, data files); across hosts: the rendezvous port
// on the first host, listened on there and connected to from every host. And the JSON codec.
#include "engine/launch/preflight.h"

#include <filesystem>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/json_text.h"
#include "engine/core/str_join.h"
#include "engine/launch/cluster.h"
#include "engine/launch/ssh.h"

namespace tessera {

namespace {

using std::chrono::seconds;

PreflightCheck check(std::string name, std::string status, std::string detail,
                     std::string fix = "") {
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
    std::vector<std::string> a = {
        c.tessera,       "_probe",
        "--slots",       std::to_string(slots),
        "--device",      cfg.runtime.device,
        "--config-name", std::filesystem::path(cfg.source_path).filename().string(),
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
    const std::string fps = str_join(scan.fingerprints, ", ");
    switch (scan.state) {
        case HostKeyScan::State::known:
            h.checks.push_back(check("host key", "ok", str_cat("known: ", fps)));
            break;
        case HostKeyScan::State::unknown:
            h.checks.push_back(
                check("host key", "fail", str_cat("unknown: ", fps),
                      str_cat("compare the fingerprint with the host's own "
                              "(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), "
                              "then `tessera hosts CONFIG trust ",
                              t.port == 22 ? t.host : str_cat(t.host, ":", t.port), "`")));
            return false;
        case HostKeyScan::State::changed:
            h.checks.push_back(
                check("host key", "fail", scan.message + str_cat(" (now: ", fps, ")"),
                      str_cat("if the host was reinstalled: ssh-keygen -R '",
                              t.port == 22 ? t.host : str_cat("[", t.host, "]:", t.port), "' -f ",
                              ssh_known_hosts_file(t))));
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
        h.checks.push_back(
            check("tessera", "fail",
                  str_cat("'", exe, "' is not found or not executable on the host (",
                          first_line(v.err), ")"),
                  "install tessera there, or set cluster.tessera to its absolute path "
                  "(non-interactive ssh shells do not read ~/.bashrc)"));
        return false;
    }
    std::string got = first_line(v.out);
    if (v.exit_code != 0 || got != want) {
        h.checks.push_back(
            check("tessera", "fail",
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
        try {  // lines that are not a check (a login banner) are skipped
            h.checks.push_back(
                preflight_check_from_json(nlohmann::json::parse(line), "probe line"));
            any = true;
        } catch (const std::exception&) {
        }
    }
    if (!any || (p.exit_code != 0 && p.exit_code != 1))
        h.checks.push_back(
            check("probe", "fail",
                  str_cat("`tessera _probe` ",
                          p.exit_code == 255 ? ssh_failure_message(t, p) : first_line(p.err)),
                  "run it by hand on the host"));
    std::string env;
    for (const auto& [k, val] : cfg.cluster.env)
        env += str_cat(env.empty() ? "" : " ", k, "=", val);
    h.checks.push_back(check("environment", "ok",
                             env.empty() ? "nothing extra (cluster.env is empty)"
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
            h.checks.push_back(
                check("rendezvous", "warn", str_cat(where, " not tested (the first host failed)")));
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
                return ssh_run(targets[i],
                               {c.tessera, "_probe", "--connect", where, "--seconds", "15"},
                               seconds(targets[i].connect_timeout + 25));
            });
    SshResult l = listener.get();
    bool bind_failed = l.out.find("bind failed") != std::string::npos;
    for (size_t i = 0; i < targets.size(); ++i) {
        if (!usable[i]) continue;
        SshResult r = connects[i].get();
        if (bind_failed && i == 0)
            hosts[i].checks.push_back(
                check("rendezvous", "fail",
                      str_cat("port ", c.rendezvous_port, " cannot be served here: ",
                              first_line(l.out.substr(l.out.find("bind failed")))),
                      "pick a free port: cluster.rendezvous_port"));
        else if (r.exit_code == 0)
            hosts[i].checks.push_back(check("rendezvous", "ok", str_cat(where, " reachable")));
        else
            hosts[i].checks.push_back(
                check("rendezvous", "fail",
                      str_cat(where, " not reachable from this host: ", first_line(r.out + r.err)),
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
            o << "  " << mark << "  " << c.name
              << std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ') << c.detail << "\n";
            if (!c.fix.empty() && c.status != "ok") o << "                    -> " << c.fix << "\n";
        }
    }
    o << (ok() ? "preflight: every host is ready\n" : "preflight: FAILED (see the FAIL lines)\n");
    return o.str();
}

std::vector<std::string> PreflightCheck::unknown_fingerprints() const {
    static const std::string kUnknown = "unknown:";  // check_host's detail for an unknown key
    if (name != "host key" || status != "fail" || detail.rfind(kUnknown, 0) != 0) return {};
    std::vector<std::string> out;
    std::istringstream in(detail.substr(kUnknown.size()));
    std::string f;
    while (std::getline(in, f, ',')) {
        const size_t b = f.find_first_not_of(' '), e = f.find_last_not_of(' ');
        if (b != std::string::npos) out.push_back(f.substr(b, e - b + 1));
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// JSON

nlohmann::json preflight_check_to_json(const PreflightCheck& c) {
    return {{"name", c.name}, {"status", c.status}, {"detail", c.detail}, {"fix", c.fix}};
}

namespace {

[[noreturn]] void json_bad(const std::string& where, const std::string& expected,
                           const nlohmann::json* found) {
    throw InputError(
        str_cat(where, ": expected ", expected, ", found ", found ? json_kind(*found) : "nothing"));
}

const nlohmann::json& json_member(const nlohmann::json& j, const std::string& where,
                                  const char* key, nlohmann::json::value_t type,
                                  const char* expected) {
    const std::string at = str_cat(where, where.empty() ? "" : ".", key);
    if (!j.contains(key)) json_bad(at, expected, nullptr);
    const nlohmann::json& v = j[key];
    const bool ok =
        type == nlohmann::json::value_t::number_integer ? v.is_number_integer() : v.type() == type;
    if (!ok) json_bad(at, expected, &v);
    return v;
}

std::string json_string(const nlohmann::json& j, const std::string& where, const char* key) {
    return json_member(j, where, key, nlohmann::json::value_t::string, "a string")
        .get<std::string>();
}

}  // namespace

PreflightCheck preflight_check_from_json(const nlohmann::json& j, const std::string& where) {
    if (!j.is_object()) json_bad(where, "an object {name, status, detail, fix}", &j);
    PreflightCheck c{json_string(j, where, "name"), json_string(j, where, "status"),
                     json_string(j, where, "detail"), ""};
    if (j.contains("fix")) c.fix = json_string(j, where, "fix");
    return c;
}

PreflightReport preflight_report_from_json(const std::string& text) {
    const nlohmann::json j = json_parse_text(text, "the preflight report", "an object {ok, hosts}");
    if (!j.is_object()) json_bad("the preflight report", "an object {ok, hosts}", &j);
    const nlohmann::json& hosts =
        json_member(j, "", "hosts", nlohmann::json::value_t::array, "a list of hosts");
    PreflightReport rep;
    for (size_t i = 0; i < hosts.size(); ++i) {
        const std::string at = str_cat("hosts[", i, "]");
        const nlohmann::json& h = hosts[i];
        if (!h.is_object()) json_bad(at, "an object {host, first_rank, ranks, checks}", &h);
        PreflightHost host;
        host.label = json_string(h, at, "host");
        if (host.label.empty()) json_bad(at + ".host", "a host name", &h["host"]);
        host.first_rank =
            json_member(h, at, "first_rank", nlohmann::json::value_t::number_integer, "an integer")
                .get<int>();
        host.ranks =
            json_member(h, at, "ranks", nlohmann::json::value_t::number_integer, "an integer")
                .get<int>();
        const nlohmann::json& checks =
            json_member(h, at, "checks", nlohmann::json::value_t::array, "a list of checks");
        for (size_t k = 0; k < checks.size(); ++k)
            host.checks.push_back(
                preflight_check_from_json(checks[k], str_cat(at, ".checks[", k, "]")));
        rep.hosts.push_back(std::move(host));
    }
    return rep;
}

std::string PreflightReport::to_json() const {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& h : hosts) {
        nlohmann::json checks = nlohmann::json::array();
        for (const auto& c : h.checks) checks.push_back(preflight_check_to_json(c));
        j.push_back({{"host", h.label},
                     {"first_rank", h.first_rank},
                     {"ranks", h.ranks},
                     {"ok", h.ok()},
                     {"checks", checks}});
    }
    return nlohmann::json{{"ok", ok()}, {"hosts", j}}.dump(2);
}

PreflightReport preflight_run(const RunConfig& cfg, std::ostream* progress) {
    PreflightReport rep;
    if (cfg.cluster.hosts.empty())
        throw InputError(str_cat(cfg.source_path,
                                 ": cluster: no hosts (add cluster.hosts or "
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
                *progress << "preflight: " << rep.hosts[i].label
                          << (rep.hosts[i].ok() ? " ok" : " has problems") << std::endl;
            }
            return ok;
        }));
    std::vector<bool> usable;
    usable.reserve(jobs.size());
    for (auto& j : jobs) usable.push_back(j.get());
    check_rendezvous(cfg, targets, rep.hosts, usable);
    return rep;
}

}  // namespace tessera
