// The SSH transport: how Tessera reaches a remote host with the OpenSSH client. Every command runs
// non-interactively (BatchMode: no password, passphrase or host-key prompt can ever block), host
// keys are checked against known_hosts (an unknown key is shown with its fingerprint and trusted
// only on request; a changed key is refused), and the remote command line is built so that the
// remote argv is byte-identical to the local one. docs/launch.md "Several hosts over SSH".
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "engine/config/config.h"

namespace tessera {

// One quoted word for a POSIX shell: 'text' with each ' written as '\''. Any byte string
// (newlines, $(...), backticks, non-ASCII, a leading '-') comes out of the shell unchanged.
std::string shell_quote(const std::string& word);
// The words quoted and joined by spaces: what the remote login shell receives.
std::string shell_join(const std::vector<std::string>& argv);

struct SshTarget {
    std::string host, user, identity, known_hosts;
    int port = 22;
    int connect_timeout = 10;
    std::string label() const;  // "alice@gpu-a:2222" (port when not 22)
};
SshTarget ssh_target(const ClusterConfig& cluster, const ClusterHost& host);

// Refuses, before any ssh runs, a target ssh must not see: a host or user name with shell
// metacharacters, a missing identity file, a passphrase-protected identity without an agent.
// InputError naming the host and what to do.
void ssh_check_target(const SshTarget& t);

// ssh's argv to run `remote_argv` on the target: BatchMode, ConnectTimeout, ServerAlive (a dead
// peer is noticed within ~6 s), StrictHostKeyChecking=yes, and the remote words quoted.
// `keep_stdin`: the remote command reads our stdin (the node launcher watches it to notice a lost
// connection); otherwise stdin is /dev/null (-n).
std::vector<std::string> ssh_argv(const SshTarget& t, const std::vector<std::string>& remote_argv,
                                  bool keep_stdin = false);

struct SshResult {
    int exit_code = -1;  // ssh's: the remote command's code, or 255 for ssh's own failures
    bool timed_out = false;
    std::string out, err;
};
// Runs a remote command and waits for it (killed after `timeout`).
SshResult ssh_run(const SshTarget& t, const std::vector<std::string>& remote_argv,
                  std::chrono::milliseconds timeout);
// Runs a local command (argv[0] looked up on PATH) the same way: output captured, time-limited.
SshResult process_run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                      const std::string& input = "");

// One readable sentence for a failed ssh (exit 255): unknown or changed host key, refused key,
// unreachable host, name not resolved, timeout. "" when the failure is not ssh's own.
std::string ssh_failure_message(const SshTarget& t, const SshResult& r);

// Host keys.
struct HostKeyScan {
    enum class State { known, unknown, changed, unreachable } state = State::unreachable;
    std::vector<std::string> fingerprints;  // "ED25519 SHA256:..." of the keys the host offers
    std::string keys;                       // the known_hosts lines ssh-keyscan returned
    std::string message;                    // for unreachable / changed
};
HostKeyScan ssh_scan_host_key(const SshTarget& t);
// Adds exactly the keys of `scan` (the ones whose fingerprints were shown and confirmed) to the
// target's known_hosts file, so no other key can slip in between showing and trusting.
void ssh_trust_host_key(const SshTarget& t, const HostKeyScan& scan);
// The known_hosts file in use (t.known_hosts, else ~/.ssh/known_hosts).
std::string ssh_known_hosts_file(const SshTarget& t);

}  // namespace tessera
