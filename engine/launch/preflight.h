// Preflight: a checklist per host of a cluster, run before a multi-host launch (`tessera
// preflight CONFIG`, the studio's Hosts page). Each check is ok, warn or fail; a failure names the
// host and what to do. The remote half runs on each host as `tessera _probe` (preflight_probe.cpp;
// engine/cli/remote.cpp only parses its arguments). The JSON here is the one codec of preflight:
// the probe's lines, `tessera preflight --json`, and the studio's reading of it.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "engine/config/config.h"

namespace tessera {

struct PreflightCheck {
    std::string
        name;  // host key | ssh | tessera | workdir | gpus | cpus | data | rendezvous | environment
    std::string status;  // ok | warn | fail
    std::string detail;  // what was found
    std::string fix;     // what to do (fail/warn)

    // "unknown: ED25519 SHA256:x, RSA SHA256:y" (a failed host key check) -> {"ED25519 SHA256:x",
    // "RSA SHA256:y"}: the keys the user may trust; {} for any other check.
    std::vector<std::string> unknown_fingerprints() const;
};

struct PreflightHost {
    std::string label;  // "alice@gpu-a:2222"
    int first_rank = 0, ranks = 0;
    std::vector<PreflightCheck> checks;
    bool ok() const;  // no check failed
};

struct PreflightReport {
    std::vector<PreflightHost> hosts;
    bool ok() const;
    std::string to_text() const;  // the checklist as printed by `tessera preflight`
    std::string to_json() const;
};

// ---- JSON (the one codec)
// A check as one JSON object {"detail", "fix", "name", "status"} (what `tessera _probe` prints, a
// line each), and back. from_json: InputError naming `where` and the key for a missing or
// non-string member.
nlohmann::json preflight_check_to_json(const PreflightCheck& c);
PreflightCheck preflight_check_from_json(const nlohmann::json& j, const std::string& where);
// What PreflightReport::to_json printed -> the report. InputError naming the key path
// (hosts[1].checks[0].status) and what was expected versus found.
PreflightReport preflight_report_from_json(const std::string& text);

// Runs every check (hosts in parallel). Never throws for a host's problem: it becomes a failed
// check. `progress` (optional) gets one line per finished host.
PreflightReport preflight_run(const RunConfig& cfg, std::ostream* progress = nullptr);

// ---- the remote half: `tessera _probe` on a host
struct PreflightProbe {
    std::string workdir;  // "" = the current directory
    std::string device = "cpu";
    int slots = 1;
    bool has_config = false;  // config_text given: check the data files it names
    std::string config_name = "project.yaml", config_text;
};
// workdir, gpus (nvidia-smi) or cpus against slots, then data (or config, when it does not parse
// here); in that order, as the probe prints them.
std::vector<PreflightCheck> preflight_probe_host(const PreflightProbe& probe);
// The rendezvous port: listen on `port` for `expect` connections (answering "tessera-probe"), or
// connect to HOST:PORT until `seconds` pass. Progress lines go to `out`; exit status 0 or 1.
int preflight_probe_listen(int port, int seconds, int expect, std::ostream& out);
int preflight_probe_connect(const std::string& where, int seconds, std::ostream& out);

}  // namespace tessera
