// Preflight: a checklist per host of a cluster, run before a multi-host launch (`tessera
// preflight CONFIG`, the studio's Hosts page). Each check is ok, warn or fail; a failure names the
// host and what to do. The remote half is `tessera _probe` (engine/cli/remote.cpp).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "engine/config/config.h"

namespace tessera {

struct PreflightCheck {
    std::string name;    // host key | ssh | tessera | workdir | gpus | cpus | data | rendezvous | environment
    std::string status;  // ok | warn | fail
    std::string detail;  // what was found
    std::string fix;     // what to do (fail/warn)
};

struct PreflightHost {
    std::string label;   // "alice@gpu-a:2222"
    int first_rank = 0, ranks = 0;
    std::vector<PreflightCheck> checks;
    bool ok() const;     // no check failed
};

struct PreflightReport {
    std::vector<PreflightHost> hosts;
    bool ok() const;
    std::string to_text() const;  // the checklist as printed by `tessera preflight`
    std::string to_json() const;
};

// Runs every check (hosts in parallel). Never throws for a host's problem: it becomes a failed
// check. `progress` (optional) gets one line per finished host.
PreflightReport preflight_run(const RunConfig& cfg, std::ostream* progress = nullptr);

}  // namespace tessera
