// Which failure a job reports (internal to engine/launch): the text of a child's exit, and the
// root-cause rules the launcher applies when several ranks or hosts fail moments apart. Clock
// values come in from the caller, so the rules are tested without processes.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "engine/parallel/mesh.h"

namespace tessera {

using LaunchClock = std::chrono::steady_clock;
// How long after a first failure another one may still be its cause.
inline constexpr auto kRootCauseWindow = std::chrono::milliseconds(2000);

// "killed by signal 9 (SIGKILL)" or "exited with code 3" (a waitpid status).
std::string exit_text(int wait_status);
// "rank 3 (dp1.tp1.pp0) killed by signal 9 (SIGKILL) at step 12[: the rank's own message]"
std::string death_message(int rank, int wait_status, int64_t last_step,
                          const std::string& end_message, const MeshShape& mesh);

// The failure a job reports. The first failure is remembered; a later one replaces it as the
// cause, "later (then first)", when it is the likelier root:
//  - a rank killed by a signal nobody in the launcher sent (not SIGTERM/SIGINT, before our
//    SIGKILL), within kRootCauseWindow of a first failure that was a rank's own exit (typically
//    a peer's broken collective): the signal is the cause, whichever arrived first;
//  - a node launcher that exited without reporting done, within the window of a rank's failure:
//    a lost host makes its peers' ranks die moments later (broken sockets), so the host is.
class FailureCause {
  public:
    int rank = -1;        // the rank reported (>= 0 once failed; a host's failure reports 0)
    std::string message;  // what the job reports
    bool failed() const { return rank >= 0; }

    // The first failure. node: a lost host or node launcher rather than a rank.
    void first(int rank, const std::string& msg, bool node, LaunchClock::time_point now);
    bool is_root_cause(const std::string& msg, bool killed, LaunchClock::time_point now) const;
    void take_cause(int rank, const std::string& msg);  // a rank's death, by is_root_cause
    bool node_is_cause(bool reported_done, LaunchClock::time_point now) const;
    void take_node_cause(const std::string& msg);  // a node launcher's exit, by node_is_cause
    static bool is_signal_death(const std::string& msg);

  private:
    LaunchClock::time_point failed_at_{};
    bool is_node_ = false;    // the reported failure is a lost host / node launcher
    bool is_signal_ = false;  // the reported failure is a rank killed by a signal
};

}  // namespace tessera
