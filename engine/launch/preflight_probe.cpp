// The remote half of preflight (preflight.h): what `tessera _probe` checks on a host — its
// working directory, its GPUs (nvidia-smi) or cores against the host's slots, the data files the
// config names — and the rendezvous port's listener and connector. preflight.cpp runs these over
// ssh and reads their JSON lines back (preflight_check_from_json).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/core/unique_fd.h"
#include "engine/data/brown.h"
#include "engine/data/cache.h"
#include "engine/launch/preflight.h"
#include "engine/launch/ssh.h"

namespace fs = std::filesystem;

namespace tessera {

namespace {

PreflightCheck check(std::string name, std::string status, std::string detail,
                     std::string fix = "") {
    return {std::move(name), std::move(status), std::move(detail), std::move(fix)};
}

PreflightCheck probe_workdir(const std::string& workdir) {
    std::error_code ec;
    std::string dir = workdir.empty() ? fs::current_path(ec).string() : workdir;
    fs::create_directories(dir, ec);
    if (ec)
        return check("workdir", "fail", str_cat(dir, ": cannot create: ", ec.message()),
                     "fix cluster.workdir or the directory's permissions");
    std::string probe = (fs::path(dir) / str_cat(".tessera-probe-", ::getpid())).string();
    std::ofstream(probe) << "probe\n";
    bool ok = fs::exists(probe, ec) && fs::file_size(probe, ec) == 6;
    fs::remove(probe, ec);
    if (ok) return check("workdir", "ok", str_cat(dir, " writable"));
    return check("workdir", "fail", str_cat(dir, " is not writable"),
                 "fix its permissions or cluster.workdir");
}

PreflightCheck probe_devices(const std::string& device, int slots) {
    if (device != "cuda") {
        unsigned cores = std::thread::hardware_concurrency();
        if (cores >= unsigned(slots))
            return check("cpus", "ok", str_cat(cores, " cores for ", slots, " rank(s)"));
        return check("cpus", "warn",
                     str_cat(cores, " cores for ", slots, " ranks (oversubscribed: slower)"),
                     "fewer slots on this host");
    }
    SshResult smi =
        process_run({"nvidia-smi", "--query-gpu=index,memory.used,memory.total,utilization.gpu",
                     "--format=csv,noheader,nounits"},
                    std::chrono::seconds(30));
    if (smi.exit_code != 0) {
        const std::string& why = smi.err.empty() ? smi.out : smi.err;
        return check("gpus", "fail", str_cat("nvidia-smi failed: ", why.substr(0, why.find('\n'))),
                     "install the NVIDIA driver, or run this plan with runtime.device: cpu");
    }
    int total = 0, busy = 0;
    std::istringstream in(smi.out);
    std::string line, busy_list;
    while (std::getline(in, line)) {
        int idx = 0;
        double used = 0, cap = 0, util = 0;
        if (std::sscanf(line.c_str(), "%d, %lf, %lf, %lf", &idx, &used, &cap, &util) < 3) continue;
        ++total;
        if (used > 1024 || util > 10) {  // MiB; an idle GPU holds a few hundred MiB at most
            ++busy;
            busy_list +=
                str_cat(busy_list.empty() ? "" : ", ", "GPU ", idx, " (", int(used), " MiB used)");
        }
    }
    int free_gpus = total - busy;
    std::string detail = str_cat(total, " GPUs, ", free_gpus, " free, ", slots, " slots");
    if (!busy_list.empty()) detail += str_cat("; busy: ", busy_list);
    if (free_gpus >= slots) return check("gpus", "ok", detail);
    return check("gpus", "fail", detail, "free the busy GPUs or lower this host's slots");
}

std::vector<PreflightCheck> probe_data(const RunConfig& cfg) {
    std::vector<PreflightCheck> out;
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
                out.push_back(check("data", "ok",
                                    str_cat("Brown corpus at ", dir, " (", cfg.model.vocab,
                                            " shards are prepared on first use)")));
            } catch (const Error& e) {
                out.push_back(check("data", "fail", e.what(), missing_fix));
            }
        }
    } else if (cfg.data.dataset == "fashion-mnist") {
        for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                              "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
            files.push_back({"Fashion-MNIST", str_cat(kFashionMnistDefaultDir, "/", f)});
        missing_fix = "install the Debian package dataset-fashion-mnist on this host";
    }
    if (!cfg.data.train.empty())
        files.push_back({"data.train", config_resolve_path(cfg, cfg.data.train)});
    if (!cfg.data.val.empty())
        files.push_back({"data.val", config_resolve_path(cfg, cfg.data.val)});
    if (!cfg.model.init_from.empty())
        files.push_back({"model.init_from", config_resolve_path(cfg, cfg.model.init_from)});
    std::string missing, found;
    for (const auto& [what, path] : files) {
        std::error_code ec;
        if (fs::is_regular_file(path, ec))
            found += str_cat(found.empty() ? "" : ", ", path);
        else
            missing += str_cat(missing.empty() ? "" : ", ", what, " ", path);
    }
    if (!missing.empty())
        out.push_back(check("data", "fail", "missing: " + missing, missing_fix));
    else if (!files.empty())
        out.push_back(check("data", "ok", found));
    return out;
}

}  // namespace

std::vector<PreflightCheck> preflight_probe_host(const PreflightProbe& p) {
    std::vector<PreflightCheck> out;
    out.push_back(probe_workdir(p.workdir));
    out.push_back(probe_devices(p.device, p.slots));
    if (!p.has_config) return out;
    std::string dir = p.workdir.empty() ? fs::current_path().string() : p.workdir;
    try {
        RunConfig cfg = config_parse(p.config_text, (fs::path(dir) / p.config_name).string());
        for (PreflightCheck& c : probe_data(cfg)) out.push_back(std::move(c));
    } catch (const Error& e) {
        // the config's own file checks (data.train, model.init_from) ran here, on the host
        bool missing = std::string(e.what()).find("expected an existing file") != std::string::npos;
        out.push_back(
            check(missing ? "data" : "config", "fail", e.what(),
                  missing ? "copy the file to this host (relative paths start at cluster.workdir)"
                          : "fix the config"));
    }
    return out;
}

int preflight_probe_listen(int port, int seconds, int expect, std::ostream& out) {
    UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int fd = listener.get();
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(uint16_t(port));
    if (::bind(fd, (sockaddr*)&a, sizeof a) != 0 || ::listen(fd, 64) != 0) {
        out << "bind failed: port " << port << ": " << std::strerror(errno) << std::endl;
        return 1;
    }
    out << "listening on " << port << std::endl;
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
    out << "accepted " << accepted << std::endl;
    return 0;
}

int preflight_probe_connect(const std::string& where, int seconds, std::ostream& out) {
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
            out << "cannot resolve " << host << ": " << gai_strerror(g) << std::endl;
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
                    out << "connected to " << where << std::endl;
                    return 0;
                }
                out << where
                    << " answered, but not as tessera's probe (another service "
                       "holds the port?)"
                    << std::endl;
                return 1;
            }
            last = std::strerror(errno);
        }
        res.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    out << "cannot connect to " << where << ": " << last << std::endl;
    return 1;
}

}  // namespace tessera
