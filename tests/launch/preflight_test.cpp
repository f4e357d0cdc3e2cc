// Preflight without ssh: the JSON codec (engine/launch/preflight.h) that `tessera _probe`,
// `tessera preflight --json` and the studio share — its exact output, the round trip, and bad
// input named by key path — and the probe's own checks run on this machine.
#include "engine/launch/preflight.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "engine/core/error.h"
#include "tests/support/temp_dir.h"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

PreflightReport sample_report() {
    PreflightReport r;
    r.hosts.push_back({"alice@a:22",
                       0,
                       2,
                       {{"host key", "ok", "known: ED25519 SHA256:k", ""},
                        {"gpus", "fail", "8 GPUs, 6 free, 8 slots", "free the busy GPUs"}}});
    r.hosts.push_back(
        {"b", 2, 1, {{"host key", "fail", "unknown: ED25519 SHA256:x, RSA SHA256:y", "trust it"}}});
    return r;
}

std::string error_of(const std::string& text) {
    try {
        preflight_report_from_json(text);
    } catch (const InputError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

// `tessera preflight --json` is read by scripts and the studio: its layout is pinned here.
TEST(PreflightJson, ReportLayoutIsStable) {
    PreflightReport r;
    r.hosts.push_back({"h", 0, 1, {{"ssh", "ok", "key authentication", ""}}});
    EXPECT_EQ(r.to_json(), R"({
  "hosts": [
    {
      "checks": [
        {
          "detail": "key authentication",
          "fix": "",
          "name": "ssh",
          "status": "ok"
        }
      ],
      "first_rank": 0,
      "host": "h",
      "ok": true,
      "ranks": 1
    }
  ],
  "ok": true
})");
    EXPECT_EQ(preflight_check_to_json({"gpus", "warn", "d", "f"}).dump(),
              R"({"detail":"d","fix":"f","name":"gpus","status":"warn"})");
}

TEST(PreflightJson, RoundTrip) {
    const PreflightReport r = sample_report();
    const PreflightReport back = preflight_report_from_json(r.to_json());
    ASSERT_EQ(back.hosts.size(), 2u);
    EXPECT_EQ(back.to_json(), r.to_json());
    EXPECT_FALSE(back.ok());
    EXPECT_TRUE(back.hosts[0].checks[0].unknown_fingerprints().empty());  // known, ok
    EXPECT_EQ(back.hosts[1].checks[0].unknown_fingerprints(),
              (std::vector<std::string>{"ED25519 SHA256:x", "RSA SHA256:y"}));
    PreflightCheck changed{"host key", "fail",
                           "host h: its host key has CHANGED since it was trusted", ""};
    EXPECT_TRUE(changed.unknown_fingerprints().empty());
    // a probe line without "fix" (older probes) reads as no fix
    EXPECT_EQ(preflight_check_from_json(
                  nlohmann::json::parse(R"({"name":"a","status":"ok","detail":"d"})"), "line")
                  .fix,
              "");
}

TEST(PreflightJson, BadReportsNameTheKeyPath) {
    EXPECT_NE(error_of("not json")
                  .find("the preflight report: not valid JSON (byte 2): expected an object"),
              std::string::npos)
        << error_of("not json");
    EXPECT_NE(error_of("[]").find("expected an object"), std::string::npos);
    EXPECT_NE(error_of(R"({"hosts": 3})").find("hosts: expected a list of hosts, found number 3"),
              std::string::npos)
        << error_of(R"({"hosts": 3})");
    EXPECT_NE(error_of(R"({"hosts": [{"first_rank": 0, "ranks": 1, "checks": []}]})")
                  .find("hosts[0].host: expected a string, found nothing"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"hosts": [{"host": "", "first_rank": 0, "ranks": 1, "checks": []}]})")
                  .find("hosts[0].host: expected a host name"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"hosts": [{"host": "h", "first_rank": "0", "ranks": 1, "checks": []}]})")
                  .find("hosts[0].first_rank: expected an integer, found string"),
              std::string::npos);
    const std::string e = error_of(
        R"({"hosts": [{"host": "h", "first_rank": 0, "ranks": 1, "checks": [{"name": "ssh", "status": "ok", "detail": "d"}, {"name": "x", "detail": "d"}]}]})");
    EXPECT_NE(e.find("hosts[0].checks[1].status: expected a string, found nothing"),
              std::string::npos)
        << e;
}

// The probe's checks on this machine: a writable folder, cores against slots, data files named
// by the config (missing here), each with what to do.
TEST(PreflightProbe, ChecksThisHost) {
    const tessera::test_support::TempDir scratch("probe");
    const fs::path& dir = scratch.path();
    PreflightProbe p;
    p.workdir = (dir / "work").string();  // created by the probe
    p.slots = (int)std::thread::hardware_concurrency() + 1;
    p.has_config = true;
    p.config_text = "model: {preset: gpt-tiny}\ndata: {train: nowhere/train.bin}\n";
    const auto checks = preflight_probe_host(p);
    ASSERT_EQ(checks.size(), 3u);
    EXPECT_EQ(checks[0].name, "workdir");
    EXPECT_EQ(checks[0].status, "ok");
    EXPECT_EQ(checks[0].detail, p.workdir + " writable");
    EXPECT_TRUE(fs::is_directory(p.workdir));
    EXPECT_EQ(checks[1].name, "cpus");
    EXPECT_EQ(checks[1].status, "warn");  // more slots than cores
    EXPECT_EQ(checks[1].fix, "fewer slots on this host");
    EXPECT_EQ(checks[2].name, "data");
    EXPECT_EQ(checks[2].status, "fail");
    EXPECT_NE(checks[2].detail.find("nowhere/train.bin"), std::string::npos) << checks[2].detail;
    EXPECT_NE(checks[2].fix.find("copy the file to this host"), std::string::npos) << checks[2].fix;

    p.slots = 1;
    p.has_config = false;
    const auto fewer = preflight_probe_host(p);
    ASSERT_EQ(fewer.size(), 2u);
    EXPECT_EQ(fewer[1].status, "ok");
}

TEST(PreflightProbe, ListenerAndConnectorMeet) {
    // a free port: bind 0 through the listener is not exposed, so pick one from the ephemeral range
    const int port = 20000 + (int)(::getpid() % 20000);
    std::ostringstream lout, cout_;
    std::thread listener([&] { preflight_probe_listen(port, 10, 1, lout); });
    const int rc = preflight_probe_connect("127.0.0.1:" + std::to_string(port), 10, cout_);
    listener.join();
    EXPECT_EQ(rc, 0) << cout_.str() << lout.str();
    EXPECT_EQ(cout_.str(), "connected to 127.0.0.1:" + std::to_string(port) + "\n");
    EXPECT_NE(lout.str().find("accepted 1"), std::string::npos) << lout.str();
}
