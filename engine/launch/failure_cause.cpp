// Exit texts and the launcher's root-cause rules (see failure_cause.h).
#include "engine/launch/failure_cause.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"

namespace tessera {

namespace {
std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev ? str_cat("SIG", abbrev) : str_cat("signal ", sig);
}
}  // namespace

std::string exit_text(int wait_status) {
    return WIFSIGNALED(wait_status) ? str_cat("killed by signal ", WTERMSIG(wait_status), " (",
                                              signal_name(WTERMSIG(wait_status)), ")")
                                    : str_cat("exited with code ", WEXITSTATUS(wait_status));
}

std::string death_message(int rank, int wait_status, int64_t last_step,
                          const std::string& end_message, const MeshShape& mesh) {
    std::string who = str_cat("rank ", rank, " (", mesh_coord_str(mesh_coord(mesh, rank)), ")");
    std::string msg = str_cat(who, " ", exit_text(wait_status), " at step ", last_step);
    if (!end_message.empty()) msg += str_cat(": ", end_message);
    return msg;
}

void FailureCause::first(int r, const std::string& msg, bool node, LaunchClock::time_point now) {
    failed_at_ = now;
    rank = std::max(r, 0);
    message = msg;
    is_signal_ = is_signal_death(msg);
    is_node_ = node;
}

bool FailureCause::is_root_cause(const std::string& msg, bool killed,
                                 LaunchClock::time_point now) const {
    return !is_node_ && !is_signal_ && !killed && now - failed_at_ < kRootCauseWindow &&
           is_signal_death(msg) && msg.find("(SIGTERM)") == std::string::npos &&
           msg.find("(SIGINT)") == std::string::npos;
}

void FailureCause::take_cause(int r, const std::string& msg) {
    rank = std::max(r, 0);
    message = str_cat(msg, " (then ", message, ")");
    is_signal_ = true;
}

bool FailureCause::node_is_cause(bool reported_done, LaunchClock::time_point now) const {
    return !is_node_ && !reported_done && now - failed_at_ < kRootCauseWindow;
}

void FailureCause::take_node_cause(const std::string& msg) {
    message = str_cat(msg, " (then ", message, ")");
    is_node_ = true;
}

bool FailureCause::is_signal_death(const std::string& msg) {
    return msg.find(" killed by signal ") != std::string::npos;
}

}  // namespace tessera
