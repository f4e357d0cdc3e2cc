// Multi-host commands:
//   tessera preflight CONFIG [--json] [--set k=v]...        the per-host checklist
//   tessera hosts CONFIG [scan | trust HOST [--yes]]        host keys of the cluster's hosts
//   tessera launch-script CONFIG --format sbatch|mpirun [--config-path PATH]
// and the two internal ones started over ssh:
//   tessera _node ...    one host's share of a job (engine/launch/launcher.h launch_node)
//   tessera _probe ...   the remote half of preflight (engine/launch/preflight_probe.cpp: the
//                        host's checks as JSON lines, the port listener / connector)
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "engine/cli/cli.h"
#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/launch/cluster.h"
#include "engine/launch/launcher.h"
#include "engine/launch/preflight.h"
#include "engine/launch/ssh.h"

namespace fs = std::filesystem;

namespace tessera {

namespace {

// "--opt VALUE" reader shared by the commands here.
struct ArgReader {
    const CliArgs& args;
    const char* cmd;
    size_t i = 0;
    bool done() const { return i >= args.size(); }
    const std::string& next() { return args[i++]; }
    const std::string& value(const std::string& opt) {
        if (i >= args.size()) throw InputError(str_cat(cmd, ": ", opt, " needs a value"));
        return args[i++];
    }
    int int_value(const std::string& opt, int lo, int hi) {
        const std::string& v = value(opt);
        char* end = nullptr;
        long x = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || x < lo || x > hi)
            throw InputError(str_cat(cmd, ": ", opt, ": expected an integer in [", lo, ", ", hi,
                                     "], found '", v, "'"));
        return int(x);
    }
};

std::pair<std::string, std::string> split_env(const std::string& kv, const char* cmd) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
        throw InputError(str_cat(cmd, ": --env: expected NAME=VALUE, found '", kv, "'"));
    return {kv.substr(0, eq), kv.substr(eq + 1)};
}

// CONFIG plus --set overrides, the common head of the user-facing commands here.
struct ConfigArgs {
    std::string path;
    std::vector<std::string> sets;
    bool json = false, yes = false;
    std::string format, config_path;
    std::vector<std::string> rest;  // positional words after CONFIG
};

ConfigArgs parse_config_args(const CliArgs& args, const char* cmd, const char* usage) {
    ConfigArgs c;
    ArgReader r{args, cmd};
    while (!r.done()) {
        const std::string& a = r.next();
        if (a == "--help" || a == "-h") {
            std::cout << usage;
            std::exit(0);
        } else if (a == "--set")
            c.sets.push_back(r.value(a));
        else if (a == "--json")
            c.json = true;
        else if (a == "--yes")
            c.yes = true;
        else if (a == "--format")
            c.format = r.value(a);
        else if (a == "--config-path")
            c.config_path = r.value(a);
        else if (!a.empty() && a[0] == '-')
            throw InputError(str_cat(cmd, ": unknown option '", a, "'\n", usage));
        else if (c.path.empty())
            c.path = a;
        else
            c.rest.push_back(a);
    }
    if (c.path.empty()) throw InputError(str_cat(cmd, ": missing CONFIG\n", usage));
    return c;
}

const char* kPreflightUsage =
    "usage: tessera preflight CONFIG [--json] [--set k=v]...\n"
    "  Checks every host of the config's cluster: host key, ssh, tessera and its version,\n"
    "  working directory, GPUs (or cores) versus slots, data files, the rendezvous port, and\n"
    "  lists the environment passed to the ranks. Exit 0 when every host is ready.\n";
const char* kHostsUsage =
    "usage: tessera hosts CONFIG [scan]              host keys of the cluster's hosts\n"
    "       tessera hosts CONFIG trust HOST[:PORT] [--yes]  show HOST's key fingerprint, trust it "
    "on\n"
    "                                                confirmation (--yes: without asking)\n";
const char* kScriptUsage =
    "usage: tessera launch-script CONFIG --format sbatch|mpirun [--config-path PATH]\n"
    "  Prints a Slurm batch script or an Open MPI command line that runs the same plan.\n"
    "  PATH: the config as the cluster sees it (default: CONFIG as given).\n";

}  // namespace

int cli_preflight(const CliArgs& args) {
    ConfigArgs a = parse_config_args(args, "preflight", kPreflightUsage);
    RunConfig cfg = config_load(a.path, a.sets);
    PreflightReport rep = preflight_run(cfg, a.json ? nullptr : &std::cerr);
    std::cout << (a.json ? rep.to_json() + "\n" : rep.to_text());
    return rep.ok() ? 0 : 1;
}

int cli_hosts(const CliArgs& args) {
    ConfigArgs a = parse_config_args(args, "hosts", kHostsUsage);
    RunConfig cfg = config_load(a.path, a.sets);
    if (cfg.cluster.hosts.empty()) throw InputError(str_cat(a.path, ": cluster: no hosts"));
    std::string verb = a.rest.empty() ? "scan" : a.rest[0];
    if (verb == "scan") {
        int bad = 0;
        for (const auto& h : cfg.cluster.hosts) {
            SshTarget t = ssh_target(cfg.cluster, h);
            HostKeyScan s = ssh_scan_host_key(t);
            const char* st[] = {"known", "UNKNOWN", "CHANGED", "unreachable"};
            std::cout << t.label() << ": " << st[int(s.state)];
            for (const auto& f : s.fingerprints) std::cout << "  " << f;
            if (!s.message.empty()) std::cout << "  (" << s.message << ")";
            std::cout << "\n";
            bad += s.state != HostKeyScan::State::known;
        }
        return bad ? 1 : 0;
    }
    if (verb != "trust" || a.rest.size() != 2)
        throw InputError(str_cat("hosts: expected `scan` or `trust HOST`\n", kHostsUsage));
    // HOST or HOST:PORT (the same host name may appear with two ports)
    const std::string& want = a.rest[1];
    std::vector<const ClusterHost*> found;
    for (const auto& h : cfg.cluster.hosts)
        if (h.host == want || str_cat(h.host, ":", h.port) == want) found.push_back(&h);
    if (found.empty()) throw InputError(str_cat("hosts: '", want, "' is not a host of ", a.path));
    if (found.size() > 1)
        throw InputError(str_cat("hosts: '", want, "' names ", found.size(),
                                 " hosts (several ports): say HOST:PORT"));
    const ClusterHost* host = found[0];
    SshTarget t = ssh_target(cfg.cluster, *host);
    HostKeyScan s = ssh_scan_host_key(t);
    if (s.state == HostKeyScan::State::known) {
        std::cout << t.label() << ": already trusted\n";
        return 0;
    }
    if (s.state != HostKeyScan::State::unknown) throw Error(s.message);
    std::cout << "The host key of " << t.label() << " is not known (" << ssh_known_hosts_file(t)
              << ").\n";
    for (const auto& f : s.fingerprints) std::cout << "  " << f << "\n";
    if (!a.yes) {
        if (!::isatty(0))
            throw InputError(
                "hosts trust: not confirmed (no terminal; pass --yes after checking the "
                "fingerprint)");
        std::cout << "Trust it? Compare with the host's own fingerprint first. [y/N] "
                  << std::flush;
        std::string answer;
        std::getline(std::cin, answer);
        if (answer != "y" && answer != "Y" && answer != "yes") {
            std::cout << "not trusted\n";
            return 1;
        }
    }
    ssh_trust_host_key(t, s);
    std::cout << t.label() << ": trusted (added to " << ssh_known_hosts_file(t) << ")\n";
    return 0;
}

int cli_launch_script(const CliArgs& args) {
    ConfigArgs a = parse_config_args(args, "launch-script", kScriptUsage);
    RunConfig cfg = config_load(a.path, a.sets);
    std::string path = a.config_path.empty() ? a.path : a.config_path;
    if (a.format == "sbatch")
        std::cout << cluster_sbatch_script(cfg, path);
    else if (a.format == "mpirun")
        std::cout << cluster_mpirun_command(cfg, path) << "\n";
    else
        throw InputError(
            str_cat("launch-script: --format: expected sbatch or mpirun, found '", a.format, "'"));
    return 0;
}

int cli_node(const CliArgs& args) {
    NodeSpec ns;
    ArgReader r{args, "_node"};
    std::string workdir, config_name = "project.yaml", config_text;
    bool has_text = false;
    while (!r.done()) {
        const std::string& a = r.next();
        if (a == "--first")
            ns.first_rank = r.int_value(a, 0, 1 << 20);
        else if (a == "--ranks")
            ns.ranks = r.int_value(a, 1, 1 << 20);
        else if (a == "--mesh") {
            const std::string& v = r.value(a);
            if (std::sscanf(v.c_str(), "%d,%d,%d", &ns.mesh.dp, &ns.mesh.tp, &ns.mesh.pp) != 3)
                throw InputError(str_cat("_node: --mesh: expected DP,TP,PP, found '", v, "'"));
        } else if (a == "--master")
            ns.master_addr = r.value(a);
        else if (a == "--port")
            ns.master_port = r.int_value(a, 1, 65535);
        else if (a == "--serve-store")
            ns.serve_store = true;
        else if (a == "--gloo-host")
            ns.gloo_host = r.value(a);
        else if (a == "--run-id")
            ns.run_id = r.int_value(a, 0, 1 << 30);
        else if (a == "--attempt")
            ns.attempt = r.int_value(a, 1, 1 << 20);
        else if (a == "--workdir")
            workdir = r.value(a);
        else if (a == "--config-name")
            config_name = r.value(a);
        else if (a == "--config-text")
            config_text = r.value(a), has_text = true;
        else if (a == "--env")
            ns.env.push_back(split_env(r.value(a), "_node"));
        else if (a == "--")
            break;
        else
            throw InputError(str_cat("_node: unknown option '", a, "'"));
    }
    if (!has_text) throw InputError("_node: --config-text is required");
    if (!workdir.empty()) {
        std::error_code ec;
        fs::create_directories(workdir, ec);
        if (ec || ::chdir(workdir.c_str()) != 0)
            throw InputError(str_cat("_node: working directory ", workdir, ": ",
                                     ec ? ec.message() : std::strerror(errno)));
    }
    std::string config_path = (fs::current_path() / config_name).string();
    ns.argv = {cli_self_exe(), "_rank", config_path};
    while (!r.done()) ns.argv.push_back(r.next());
    ns.env.push_back({"TESSERA_CONFIG_TEXT", config_text});
    return launch_node(ns);
}

int cli_probe(const CliArgs& args) {
    ArgReader r{args, "_probe"};
    PreflightProbe probe;
    std::string connect;
    int listen = 0, seconds = 15, expect = 1;
    while (!r.done()) {
        const std::string& a = r.next();
        if (a == "--workdir")
            probe.workdir = r.value(a);
        else if (a == "--slots")
            probe.slots = r.int_value(a, 1, 4096);
        else if (a == "--device")
            probe.device = r.value(a);
        else if (a == "--config-name")
            probe.config_name = r.value(a);
        else if (a == "--config-text")
            probe.config_text = r.value(a), probe.has_config = true;
        else if (a == "--env") {
            auto [k, v] = split_env(r.value(a), "_probe");
            ::setenv(k.c_str(), v.c_str(), 1);
        } else if (a == "--listen")
            listen = r.int_value(a, 1, 65535);
        else if (a == "--connect")
            connect = r.value(a);
        else if (a == "--seconds")
            seconds = r.int_value(a, 1, 600);
        else if (a == "--expect")
            expect = r.int_value(a, 1, 1 << 20);
        else
            throw InputError(str_cat("_probe: unknown option '", a, "'"));
    }
    if (listen) return preflight_probe_listen(listen, seconds, expect, std::cout);
    if (!connect.empty()) return preflight_probe_connect(connect, seconds, std::cout);
    for (const PreflightCheck& c : preflight_probe_host(probe))
        std::cout << preflight_check_to_json(c).dump() << std::endl;
    return 0;
}

}  // namespace tessera
