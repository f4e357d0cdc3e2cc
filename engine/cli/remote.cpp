// Multi-host commands:
//   tessera preflight CONFIG [--json] [--set k=v]...        the per-host checklist
//   tessera hosts CONFIG [scan | trust HOST [--yes]]        host keys of the cluster's hosts
//   tessera launch-script CONFIG --format sbatch|mpirun [--config-path PATH]
// and the two internal ones started over ssh:
//   tessera _node ...    one host's share of a job (engine/launch/launcher.h launch_node)
//   tessera _probe ...   the remote half of preflight (and its port listener / connector)
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "engine/cli/cli.h"
#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/core/unique_fd.h"
#include "engine/data/brown.h"
#include "engine/data/cache.h"
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
        } else if (a == "--set") c.sets.push_back(r.value(a));
        else if (a == "--json") c.json = true;
        else if (a == "--yes") c.yes = true;
        else if (a == "--format") c.format = r.value(a);
        else if (a == "--config-path") c.config_path = r.value(a);
        else if (!a.empty() && a[0] == '-') throw InputError(str_cat(cmd, ": unknown option '", a, "'\n", usage));
        else if (c.path.empty()) c.path = a;
        else c.rest.push_back(a);
    }
    if (c.path.empty()) throw InputError(str_cat(cmd, ": missing CONFIG\n", usage));
    return c;
}

void print_json_line(const std::string& name, const std::string& status, const std::string& detail,
                     const std::string& fix = "") {
    std::cout << nlohmann::json{{"name", name}, {"status", status}, {"detail", detail}, {"fix", fix}}.dump()
              << std::endl;
}

// ---- _probe: checks run on the remote host -------------------------------------------------

void probe_workdir(const std::string& workdir) {
    std::error_code ec;
    std::string dir = workdir.empty() ? fs::current_path(ec).string() : workdir;
    fs::create_directories(dir, ec);
    if (ec) {
        print_json_line("workdir", "fail", str_cat(dir, ": cannot create: ", ec.message()),
                        "fix cluster.workdir or the directory's permissions");
        return;
    }
    std::string probe = (fs::path(dir) / str_cat(".tessera-probe-", ::getpid())).string();
    std::ofstream(probe) << "probe\n";
    bool ok = fs::exists(probe, ec) && fs::file_size(probe, ec) == 6;
    fs::remove(probe, ec);
    if (ok) print_json_line("workdir", "ok", str_cat(dir, " writable"));
    else print_json_line("workdir", "fail", str_cat(dir, " is not writable"), "fix its permissions or cluster.workdir");
}

void probe_devices(const std::string& device, int slots) {
    if (device != "cuda") {
        unsigned cores = std::thread::hardware_concurrency();
        if (cores >= unsigned(slots))
            print_json_line("cpus", "ok", str_cat(cores, " cores for ", slots, " rank(s)"));
        else
            print_json_line("cpus", "warn", str_cat(cores, " cores for ", slots, " ranks (oversubscribed: slower)"),
                            "fewer slots on this host");
        return;
    }
    SshResult smi = process_run({"nvidia-smi", "--query-gpu=index,memory.used,memory.total,utilization.gpu",
                                 "--format=csv,noheader,nounits"},
                                std::chrono::seconds(30));
    if (smi.exit_code != 0) {
        const std::string& why = smi.err.empty() ? smi.out : smi.err;
        print_json_line("gpus", "fail", str_cat("nvidia-smi failed: ", why.substr(0, why.find('\n'))),
                        "install the NVIDIA driver, or run this plan with runtime.device: cpu");
        return;
    }
    const std::string& out = smi.out;
    int total = 0, busy = 0;
    std::istringstream in(out);
    std::string line, busy_list;
    while (std::getline(in, line)) {
        int idx = 0;
        double used = 0, cap = 0, util = 0;
        if (std::sscanf(line.c_str(), "%d, %lf, %lf, %lf", &idx, &used, &cap, &util) < 3) continue;
        ++total;
        if (used > 1024 || util > 10) {  // MiB; an idle GPU holds a few hundred MiB at most
            ++busy;
            busy_list += str_cat(busy_list.empty() ? "" : ", ", "GPU ", idx, " (", int(used), " MiB used)");
        }
    }
    int free_gpus = total - busy;
    std::string detail = str_cat(total, " GPUs, ", free_gpus, " free, ", slots, " slots");
    if (!busy_list.empty()) detail += str_cat("; busy: ", busy_list);
    if (free_gpus >= slots) print_json_line("gpus", "ok", detail);
    else print_json_line("gpus", "fail", detail, "free the busy GPUs or lower this host's slots");
}

void probe_data(const RunConfig& cfg) {
    std::vector<std::pair<std::string, std::string>> files;  // what, path
    std::string missing_fix = data_fill_hint();
    if (cfg.data.dataset == "brown") {
        ShardPaths s = brown_shard_paths(config_tokenizer(cfg));
        std::error_code ec;
        if (fs::exists(s.train, ec) && fs::exists(s.val, ec)) {
            files = {{"train shard", s.train}, {"val shard", s.val}};
        } else {
            try {
                std::string dir = brown_corpus_dir();
                print_json_line("data", "ok", str_cat("Brown corpus at ", dir, " (", cfg.model.vocab,
                                                      " shards are prepared on first use)"));
            } catch (const Error& e) {
                print_json_line("data", "fail", e.what(), missing_fix);
            }
        }
    } else if (cfg.data.dataset == "fashion-mnist") {
        for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                              "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
            files.push_back({"Fashion-MNIST", str_cat(kFashionMnistDefaultDir, "/", f)});
        missing_fix = "install the Debian package dataset-fashion-mnist on this host";
    }
    if (!cfg.data.train.empty()) files.push_back({"data.train", config_resolve_path(cfg, cfg.data.train)});
    if (!cfg.data.val.empty()) files.push_back({"data.val", config_resolve_path(cfg, cfg.data.val)});
    if (!cfg.model.init_from.empty())
        files.push_back({"model.init_from", config_resolve_path(cfg, cfg.model.init_from)});
    std::string missing, found;
    for (const auto& [what, path] : files) {
        std::error_code ec;
        if (fs::is_regular_file(path, ec)) found += str_cat(found.empty() ? "" : ", ", path);
        else missing += str_cat(missing.empty() ? "" : ", ", what, " ", path);
    }
    if (!missing.empty()) print_json_line("data", "fail", "missing: " + missing, missing_fix);
    else if (!files.empty()) print_json_line("data", "ok", found);
}

int probe_listen(int port, int seconds, int expect) {
    UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int fd = listener.get();
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(uint16_t(port));
    if (::bind(fd, (sockaddr*)&a, sizeof a) != 0 || ::listen(fd, 64) != 0) {
        std::cout << "bind failed: port " << port << ": " << std::strerror(errno) << std::endl;
        return 1;
    }
    std::cout << "listening on " << port << std::endl;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    int accepted = 0;
    while (accepted < expect && std::chrono::steady_clock::now() < deadline) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 200) <= 0) continue;
        UniqueFd c(::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC));
        if (!c) continue;
        (void)!::write(c.get(), "tessera-probe\n", 14);
        ++accepted;
    }
    listener.reset();
    std::cout << "accepted " << accepted << std::endl;
    return 0;
}

int probe_connect(const std::string& where, int seconds) {
    auto colon = where.rfind(':');
    if (colon == std::string::npos) throw InputError("_probe: --connect HOST:PORT");
    std::string host = where.substr(0, colon), port = where.substr(colon + 1);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    std::string last = "no attempt";
    while (std::chrono::steady_clock::now() < deadline) {
        addrinfo hints{}, *raw = nullptr;
        hints.ai_socktype = SOCK_STREAM;
        int g = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &raw);
        AddrInfoPtr res(raw);
        if (g != 0) {
            std::cout << "cannot resolve " << host << ": " << gai_strerror(g) << std::endl;
            return 1;
        }
        for (addrinfo* ai = res.get(); ai; ai = ai->ai_next) {
            UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
            if (!fd) continue;
            if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
                char buf[32] = {};
                timeval tv{2, 0};
                ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
                ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
                fd.reset();
                res.reset();
                if (n > 0 && std::string(buf).rfind("tessera-probe", 0) == 0) {
                    std::cout << "connected to " << where << std::endl;
                    return 0;
                }
                std::cout << where << " answered, but not as tessera's probe (another service "
                             "holds the port?)" << std::endl;
                return 1;
            }
            last = std::strerror(errno);
        }
        res.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::cout << "cannot connect to " << where << ": " << last << std::endl;
    return 1;
}

const char* kPreflightUsage =
    "usage: tessera preflight CONFIG [--json] [--set k=v]...\n"
    "  Checks every host of the config's cluster: host key, ssh, tessera and its version,\n"
    "  working directory, GPUs (or cores) versus slots, data files, the rendezvous port, and\n"
    "  lists the environment passed to the ranks. Exit 0 when every host is ready.\n";
const char* kHostsUsage =
    "usage: tessera hosts CONFIG [scan]              host keys of the cluster's hosts\n"
    "       tessera hosts CONFIG trust HOST[:PORT] [--yes]  show HOST's key fingerprint, trust it on\n"
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
    std::cout << "The host key of " << t.label() << " is not known (" << ssh_known_hosts_file(t) << ").\n";
    for (const auto& f : s.fingerprints) std::cout << "  " << f << "\n";
    if (!a.yes) {
        if (!::isatty(0)) throw InputError("hosts trust: not confirmed (no terminal; pass --yes after checking the fingerprint)");
        std::cout << "Trust it? Compare with the host's own fingerprint first. [y/N] " << std::flush;
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
    if (a.format == "sbatch") std::cout << cluster_sbatch_script(cfg, path);
    else if (a.format == "mpirun") std::cout << cluster_mpirun_command(cfg, path) << "\n";
    else throw InputError(str_cat("launch-script: --format: expected sbatch or mpirun, found '", a.format, "'"));
    return 0;
}

int cli_node(const CliArgs& args) {
    NodeSpec ns;
    ArgReader r{args, "_node"};
    std::string workdir, config_name = "project.yaml", config_text;
    bool has_text = false;
    while (!r.done()) {
        const std::string& a = r.next();
        if (a == "--first") ns.first_rank = r.int_value(a, 0, 1 << 20);
        else if (a == "--ranks") ns.ranks = r.int_value(a, 1, 1 << 20);
        else if (a == "--mesh") {
            const std::string& v = r.value(a);
            if (std::sscanf(v.c_str(), "%d,%d,%d", &ns.mesh.dp, &ns.mesh.tp, &ns.mesh.pp) != 3)
                throw InputError(str_cat("_node: --mesh: expected DP,TP,PP, found '", v, "'"));
        } else if (a == "--master") ns.master_addr = r.value(a);
        else if (a == "--port") ns.master_port = r.int_value(a, 1, 65535);
        else if (a == "--serve-store") ns.serve_store = true;
        else if (a == "--gloo-host") ns.gloo_host = r.value(a);
        else if (a == "--run-id") ns.run_id = r.int_value(a, 0, 1 << 30);
        else if (a == "--attempt") ns.attempt = r.int_value(a, 1, 1 << 20);
        else if (a == "--workdir") workdir = r.value(a);
        else if (a == "--config-name") config_name = r.value(a);
        else if (a == "--config-text") config_text = r.value(a), has_text = true;
        else if (a == "--env") ns.env.push_back(split_env(r.value(a), "_node"));
        else if (a == "--") break;
        else throw InputError(str_cat("_node: unknown option '", a, "'"));
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
    std::string workdir, device = "cpu", config_name = "project.yaml", config_text, connect;
    int slots = 1, listen = 0, seconds = 15, expect = 1;
    bool has_text = false;
    while (!r.done()) {
        const std::string& a = r.next();
        if (a == "--workdir") workdir = r.value(a);
        else if (a == "--slots") slots = r.int_value(a, 1, 4096);
        else if (a == "--device") device = r.value(a);
        else if (a == "--config-name") config_name = r.value(a);
        else if (a == "--config-text") config_text = r.value(a), has_text = true;
        else if (a == "--env") {
            auto [k, v] = split_env(r.value(a), "_probe");
            ::setenv(k.c_str(), v.c_str(), 1);
        } else if (a == "--listen") listen = r.int_value(a, 1, 65535);
        else if (a == "--connect") connect = r.value(a);
        else if (a == "--seconds") seconds = r.int_value(a, 1, 600);
        else if (a == "--expect") expect = r.int_value(a, 1, 1 << 20);
        else throw InputError(str_cat("_probe: unknown option '", a, "'"));
    }
    if (listen) return probe_listen(listen, seconds, expect);
    if (!connect.empty()) return probe_connect(connect, seconds);
    probe_workdir(workdir);
    probe_devices(device, slots);
    if (has_text) {
        std::string dir = workdir.empty() ? fs::current_path().string() : workdir;
        try {
            RunConfig cfg = config_parse(config_text, (fs::path(dir) / config_name).string());
            probe_data(cfg);
        } catch (const Error& e) {
            // the config's own file checks (data.train, model.init_from) ran here, on the host
            bool missing = std::string(e.what()).find("expected an existing file") != std::string::npos;
            print_json_line(missing ? "data" : "config", "fail", e.what(),
                            missing ? "copy the file to this host (relative paths start at cluster.workdir)"
                                    : "fix the config");
        }
    }
    return 0;
}

}  // namespace tessera
