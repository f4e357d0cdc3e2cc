// The SSH transport (ssh.h): argv construction, quoting, pre-checks, a small synchronous runner
// for probes, failure classification and host-key handling through ssh-keyscan / ssh-keygen.
#include "engine/launch/ssh.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/unique_fd.h"

extern char** environ;

namespace fs = std::filesystem;

namespace tessera {

std::string shell_quote(const std::string& word) {
    std::string q = "'";
    for (char c : word) {
        if (c == '\'')
            q += "'\\''";
        else
            q += c;
    }
    return q + "'";
}

std::string shell_join(const std::vector<std::string>& argv) {
    std::string s;
    for (const auto& a : argv) {
        if (!s.empty()) s += ' ';
        s += shell_quote(a);
    }
    return s;
}

std::string SshTarget::label() const {
    std::string s = user.empty() ? host : str_cat(user, "@", host);
    if (port != 22) s += str_cat(":", port);
    return s;
}

namespace {

std::string expand_home(const std::string& p) {
    if (p.rfind("~/", 0) != 0) return p;
    const char* home = std::getenv("HOME");
    return home ? str_cat(home, p.substr(1)) : p;
}

bool contains(const std::string& s, const char* what) {
    return s.find(what) != std::string::npos;
}

// The last non-empty line of ssh's stderr (its own diagnosis).
std::string last_line(const std::string& text) {
    std::istringstream in(text);
    std::string line, last;
    while (std::getline(in, line))
        if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    return last;
}

}  // namespace

SshTarget ssh_target(const ClusterConfig& cluster, const ClusterHost& host) {
    SshTarget t;
    t.host = host.host;
    t.user = host.user;
    t.port = host.port;
    t.identity = expand_home(host.identity);
    t.known_hosts = expand_home(cluster.known_hosts);
    t.connect_timeout = cluster.connect_timeout;
    return t;
}

std::string ssh_known_hosts_file(const SshTarget& t) {
    if (!t.known_hosts.empty()) return t.known_hosts;
    const char* home = std::getenv("HOME");
    return str_cat(home ? home : "", "/.ssh/known_hosts");
}

void ssh_check_target(const SshTarget& t) {
    if (auto p = cluster_name_problem(t.host, false); !p.empty())
        throw InputError(
            str_cat("host '", t.host, "': the name ", p,
                    "; refused before ssh runs (letters, digits, '.', '-', '_', ':' only)"));
    if (!t.user.empty())
        if (auto p = cluster_name_problem(t.user, true); !p.empty())
            throw InputError(
                str_cat("host ", t.host, ": user '", t.user, "' ", p, "; refused before ssh runs"));
    if (t.identity.empty()) return;
    std::error_code ec;
    if (!fs::is_regular_file(t.identity, ec))
        throw InputError(str_cat("host ", t.label(), ": identity file ", t.identity,
                                 " does not exist; create a key (ssh-keygen -t ed25519 -f ",
                                 t.identity, ") and add its .pub to the host's authorized_keys"));
    // ssh-keygen -y with an empty passphrase succeeds only for a key without one.
    SshResult r =
        process_run({"ssh-keygen", "-y", "-P", "", "-f", t.identity}, std::chrono::seconds(10));
    if (r.exit_code != 0) {
        bool agent = std::getenv("SSH_AUTH_SOCK") && *std::getenv("SSH_AUTH_SOCK");
        if (contains(r.err, "incorrect passphrase") || contains(r.err, "passphrase")) {
            if (!agent)
                throw InputError(str_cat(
                    "host ", t.label(), ": identity file ", t.identity,
                    " is protected by a passphrase and no ssh-agent is running; Tessera never asks "
                    "for or stores passphrases: run `eval $(ssh-agent) && ssh-add ",
                    t.identity, "` and start Tessera from that shell"));
        } else {
            throw InputError(str_cat("host ", t.label(), ": identity file ", t.identity,
                                     " is not a usable private key: ", last_line(r.err)));
        }
    }
}

std::vector<std::string> ssh_argv(const SshTarget& t, const std::vector<std::string>& remote_argv,
                                  bool keep_stdin) {
    std::vector<std::string> a = {"ssh"};
    auto opt = [&](const std::string& o) {
        a.push_back("-o");
        a.push_back(o);
    };
    if (!keep_stdin) a.push_back("-n");
    a.push_back("-T");  // no pseudo-terminal: binary-clean output, no remote echo
    opt("BatchMode=yes");
    opt(str_cat("ConnectTimeout=", t.connect_timeout));
    opt("ServerAliveInterval=2");
    opt("ServerAliveCountMax=3");
    opt("StrictHostKeyChecking=yes");
    opt("LogLevel=ERROR");
    opt("ControlMaster=no");
    opt("ControlPath=none");
    if (!t.known_hosts.empty()) {
        opt(str_cat("UserKnownHostsFile=", t.known_hosts));
        opt("GlobalKnownHostsFile=/dev/null");
    }
    if (!t.identity.empty()) {
        a.push_back("-i");
        a.push_back(t.identity);
        opt("IdentitiesOnly=yes");
    }
    a.push_back("-p");
    a.push_back(std::to_string(t.port));
    if (!t.user.empty()) {
        a.push_back("-l");
        a.push_back(t.user);
    }
    a.push_back("--");
    a.push_back(t.host);
    a.push_back(shell_join(remote_argv));
    return a;
}

SshResult process_run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                      const std::string& input) {
    SshResult res;
    UniquePipe out, err, in;
    if (!unique_pipe(out, O_CLOEXEC) || !unique_pipe(err, O_CLOEXEC) || !unique_pipe(in, O_CLOEXEC))
        throw Error(str_cat("cannot create pipes: ", std::strerror(errno)));
    std::vector<std::string> args = argv;
    std::vector<char*> cargv = exec_argv(args);
    pid_t pid = ::fork();
    if (pid < 0) throw Error(str_cat("fork: ", std::strerror(errno)));
    if (pid == 0) {
        ::setpgid(0, 0);
        ::signal(SIGPIPE, SIG_DFL);
        ::dup2(in.read.get(), 0);
        ::dup2(out.write.get(), 1);
        ::dup2(err.write.get(), 2);
        ::execvp(cargv[0], cargv.data());
        std::string m = str_cat("cannot execute ", argv[0], ": ", std::strerror(errno), "\n");
        (void)!::write(2, m.data(), m.size());
        ::_exit(127);
    }
    ::setpgid(pid, pid);
    out.write.reset();
    err.write.reset();
    in.read.reset();
    if (!input.empty())
        (void)!::write(in.write.get(), input.data(), input.size());  // small inputs only
    in.write.reset();
    auto deadline = std::chrono::steady_clock::now() + timeout;
    UniqueFd* fds[2] = {&out.read, &err.read};
    std::string* bufs[2] = {&res.out, &res.err};
    while (*fds[0] || *fds[1]) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            res.timed_out = true;
            ::kill(-pid, SIGKILL);
            break;
        }
        pollfd p[2] = {{fds[0]->get(), POLLIN, 0}, {fds[1]->get(), POLLIN, 0}};
        int n = ::poll(p, 2, int(std::min<int64_t>(left.count(), 200)));
        if (n < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
            if (!*fds[i] || !p[i].revents) continue;
            char chunk[8192];
            ssize_t k = ::read(fds[i]->get(), chunk, sizeof chunk);
            if (k > 0)
                bufs[i]->append(chunk, size_t(k));
            else if (k == 0 || errno != EINTR)
                fds[i]->reset();
        }
    }
    out.read.reset();
    err.read.reset();
    int st = 0;
    if (res.timed_out) ::kill(-pid, SIGKILL);
    ::waitpid(pid, &st, 0);
    res.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return res;
}

SshResult ssh_run(const SshTarget& t, const std::vector<std::string>& remote_argv,
                  std::chrono::milliseconds timeout) {
    ssh_check_target(t);
    SshResult r = process_run(ssh_argv(t, remote_argv), timeout);
    if (r.timed_out && r.err.empty())
        r.err = str_cat("no answer within ", timeout.count() / 1000.0, " s");
    return r;
}

std::string ssh_failure_message(const SshTarget& t, const SshResult& r) {
    const std::string& e = r.err;
    std::string who = str_cat("host ", t.label());
    if (contains(e, "REMOTE HOST IDENTIFICATION HAS CHANGED") || contains(e, "Host key for") ||
        contains(e, "has changed and you have requested strict checking"))
        return str_cat(who, ": its host key has CHANGED since it was trusted (",
                       ssh_known_hosts_file(t),
                       "); Tessera refuses to connect. If the host was reinstalled, remove the old "
                       "key with `ssh-keygen -R ",
                       t.port == 22 ? t.host : str_cat("[", t.host, "]:", t.port), " -f ",
                       ssh_known_hosts_file(t),
                       "` and trust the new one; otherwise "
                       "someone may be intercepting the connection");
    if (contains(e, "Host key verification failed") ||
        contains(e, "No ED25519 host key is known") || contains(e, "host key is known for"))
        return str_cat(who, ": its host key is unknown (not in ", ssh_known_hosts_file(t),
                       "); check its fingerprint and trust it: `tessera hosts CONFIG trust ",
                       t.port == 22 ? t.host : str_cat(t.host, ":", t.port), "` or the Hosts page");
    if (contains(e, "Permission denied"))
        return str_cat(who, ": key authentication failed",
                       t.user.empty() ? "" : str_cat(" for user ", t.user),
                       t.identity.empty() ? "" : str_cat(" with ", t.identity),
                       " (is the public key in the host's ~/.ssh/authorized_keys? a passphrase-"
                       "protected key must be loaded into ssh-agent; Tessera never prompts)");
    if (contains(e, "Could not resolve hostname") || contains(e, "Name or service not known"))
        return str_cat(who,
                       ": the name does not resolve (check the host name or add it to /etc/hosts)");
    if (contains(e, "Connection refused"))
        return str_cat(who, ": connection refused on port ", t.port, " (is sshd running there?)");
    if (contains(e, "timed out") || r.timed_out)
        return str_cat(who, ": no answer within ", t.connect_timeout,
                       " s (host down, wrong address, or a firewall)");
    if (contains(e, "No route to host") || contains(e, "Network is unreachable"))
        return str_cat(who, ": unreachable (", last_line(e), ")");
    if (r.exit_code == 255)
        return str_cat(who, ": ssh failed: ", e.empty() ? "connection closed" : last_line(e));
    return "";
}

HostKeyScan ssh_scan_host_key(const SshTarget& t) {
    ssh_check_target(t);
    HostKeyScan s;
    SshResult scan = process_run({"ssh-keyscan", "-T", std::to_string(t.connect_timeout), "-p",
                                  std::to_string(t.port), "--", t.host},
                                 std::chrono::seconds(t.connect_timeout + 5));
    // keep only key lines (ssh-keyscan prints "# host:port SSH-2.0-..." comments on stderr/stdout)
    std::istringstream in(scan.out);
    std::string line;
    while (std::getline(in, line))
        if (!line.empty() && line[0] != '#') s.keys += line + "\n";
    if (s.keys.empty()) {
        s.state = HostKeyScan::State::unreachable;
        s.message = str_cat("host ", t.label(), ": no host key could be read (",
                            scan.err.empty() ? "no answer" : last_line(scan.err), ")");
        return s;
    }
    SshResult fp = process_run({"ssh-keygen", "-l", "-f", "-"}, std::chrono::seconds(10), s.keys);
    std::istringstream fin(fp.out);
    while (std::getline(fin, line)) {
        // "256 SHA256:abc host (ED25519)" -> "ED25519 SHA256:abc"
        std::istringstream w(line);
        std::string bits, hash, host, type;
        w >> bits >> hash >> host >> type;
        if (type.size() > 2) type = type.substr(1, type.size() - 2);
        s.fingerprints.push_back(str_cat(type, " ", hash));
    }
    // Known? Ask ssh itself (the same check a connection makes) without authenticating.
    std::string kh = ssh_known_hosts_file(t);
    std::string name = t.port == 22 ? t.host : str_cat("[", t.host, "]:", t.port);
    SshResult known = process_run({"ssh-keygen", "-F", name, "-f", kh}, std::chrono::seconds(10));
    if (known.exit_code != 0 || known.out.empty()) {
        s.state = HostKeyScan::State::unknown;
        return s;
    }
    // Some key is recorded: does one of the offered keys match it?
    bool match = false;
    std::istringstream offered(s.keys);
    while (std::getline(offered, line)) {
        std::istringstream w(line);
        std::string h, type, blob;
        w >> h >> type >> blob;
        if (!blob.empty() && known.out.find(blob) != std::string::npos) match = true;
    }
    s.state = match ? HostKeyScan::State::known : HostKeyScan::State::changed;
    if (!match)
        s.message = str_cat("host ", t.label(), ": its host key has CHANGED since it was trusted (",
                            kh, "); refused");
    return s;
}

void ssh_trust_host_key(const SshTarget& t, const HostKeyScan& scan) {
    if (scan.state != HostKeyScan::State::unknown)
        throw InputError(str_cat("host ", t.label(), ": only an unknown host key can be trusted",
                                 scan.state == HostKeyScan::State::changed
                                     ? " (this host's key CHANGED: remove the old key first)"
                                     : ""));
    std::string kh = ssh_known_hosts_file(t);
    std::error_code ec;
    fs::create_directories(fs::path(kh).parent_path(), ec);
    std::ofstream out(kh, std::ios::app);
    if (!out) throw Error(str_cat("cannot append to ", kh));
    out << scan.keys;
    if (!out.flush()) throw Error(str_cat("cannot write ", kh));
}

}  // namespace tessera
