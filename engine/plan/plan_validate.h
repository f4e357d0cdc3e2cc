// Plan validation for editors: every problem with a config's parallel layout at once (the config
// parser stops at the first), each tied to the key path of the control that caused it, with the
// reason in words. Qt-free: the studio's Plan page shows each issue next to its control.
#pragma once
#include <string>
#include <vector>

#include "engine/config/config.h"

namespace tessera {

struct PlanIssue {
    std::string key;      // "parallel.tp", "parallel.stages", "train.grad_accum", ...
    std::string message;  // what is wrong and why, with expected versus found
};

// All issues of cfg's plan; empty = the plan can run. gpus_available <= 0 skips the world check.
std::vector<PlanIssue> plan_validate(const RunConfig& cfg, int gpus_available);

// The issues whose key is `key` joined by newlines ("" when none): what a control shows.
std::string plan_issues_for_key(const std::vector<PlanIssue>& issues, const std::string& key);

}  // namespace tessera
