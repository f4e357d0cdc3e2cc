// Checkpoint directories: atomic save (temp dir -> fsync -> manifest -> rename -> fsync root ->
// latest), verified load (size + crc32 of every file before parsing), rotation and cleanup.
#include "engine/io/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <set>

#include "engine/core/atomic_file.h"
#include "engine/core/error.h"
#include "engine/core/json_text.h"

namespace tessera {

namespace fs = std::filesystem;

static constexpr const char* k_format = "tessera-checkpoint";
static constexpr int k_version = 1;
static constexpr const char* k_tmp_prefix = ".tmp-";

// ---------------------------------------------------------------------------------------------
// Directory helpers

static std::string step_dir_name(int64_t step) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
    return buf;
}

// "step_00001200" -> 1200; nullopt for anything else.
static std::optional<int64_t> step_dir_parse(const std::string& name) {
    if (name.size() < 6 || name.compare(0, 5, "step_") != 0 || name.size() > 5 + 18)
        return std::nullopt;
    int64_t v = 0;
    for (size_t i = 5; i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9') return std::nullopt;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

static bool is_complete(const fs::path& dir) {
    std::error_code ec;
    return fs::is_directory(dir, ec) && fs::is_regular_file(dir / "manifest.json", ec);
}

struct StepDir {
    int64_t step;
    std::string name;
};

// Complete step dirs under root, ascending by step.
static std::vector<StepDir> checkpoint_list_complete(const fs::path& root) {
    std::vector<StepDir> out;
    std::error_code ec;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        std::string name = it->path().filename().string();
        auto step = step_dir_parse(name);
        if (step && is_complete(it->path())) out.push_back({*step, name});
    }
    std::sort(out.begin(), out.end(),
              [](const StepDir& a, const StepDir& b) { return a.step < b.step; });
    return out;
}

static bool file_name_ok(const std::string& n) {
    if (n.empty() || n == "." || n == "..") return false;
    for (char c : n)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
            return false;
    return true;
}

// Renames `dir` out of the way first so a half-deleted dir never looks complete, then deletes it.
static void checkpoint_remove_dir(const fs::path& root, const std::string& name) {
    fs::path victim = root / str_cat(k_tmp_prefix, "delete-", name, ".", ::getpid());
    io_rename((root / name).string(), victim.string());
    std::error_code ec;
    fs::remove_all(victim, ec);
    if (ec) throw Error(str_cat("cannot delete ", victim.string(), ": ", ec.message()));
}

// Deletes stale temp dirs / files left by crashed saves (names starting with ".tmp-" or
// "latest.tmp.").
static void checkpoint_clean_temps(const fs::path& root) {
    std::error_code ec;
    std::vector<fs::path> stale;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        std::string name = it->path().filename().string();
        if (name.rfind(k_tmp_prefix, 0) == 0 || name.rfind("latest.tmp.", 0) == 0)
            stale.push_back(it->path());
    }
    for (const fs::path& p : stale) {
        fs::remove_all(p, ec);
        if (ec)
            throw Error(
                str_cat("cannot delete stale checkpoint temp ", p.string(), ": ", ec.message()));
    }
}

// ---------------------------------------------------------------------------------------------
// Save

std::string checkpoint_save(const std::string& root_str, int64_t step,
                            const std::vector<CheckpointFile>& files, const nlohmann::json& state,
                            int keep) {
    TS_CHECK(step >= 0, "negative checkpoint step ", step);
    std::set<std::string> names;
    for (const CheckpointFile& f : files) {
        TS_CHECK(file_name_ok(f.name) && f.name != "manifest", "bad checkpoint file name '", f.name,
                 "'");
        TS_CHECK(names.insert(f.name).second, "duplicate checkpoint file name '", f.name, "'");
    }
    const fs::path root(root_str);
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw Error(str_cat("cannot create checkpoint root ", root_str, ": ", ec.message()));
    checkpoint_clean_temps(root);

    // 1. every file into a temp sibling dir, each fsync'd; the manifest last
    const std::string final_name = step_dir_name(step);
    const fs::path tmp = root / str_cat(k_tmp_prefix, final_name, ".", ::getpid());
    fs::create_directory(tmp, ec);
    if (ec) throw Error(str_cat("cannot create ", tmp.string(), ": ", ec.message()));
    nlohmann::json listed = nlohmann::json::array();
    for (const CheckpointFile& f : files) {
        std::string fname = f.name + ".safetensors";
        SafetensorsWritten w =
            safetensors_write_direct((tmp / fname).string(), f.tensors,
                                     {{"format", "pt"}, {"tessera.step", std::to_string(step)}});
        listed.push_back({{"name", fname}, {"bytes", w.bytes}, {"crc32", w.crc32}});
    }
    nlohmann::json manifest = {{"format", k_format},
                               {"version", k_version},
                               {"step", step},
                               {"files", listed},
                               {"state", state}};
    std::string text = manifest.dump(2) + "\n";
    {
        FileWriter w((tmp / "manifest.json").string());
        w.write(text.data(), text.size());
        w.finish();
    }
    file_fsync_dir(tmp.string());

    // 2. publish: rename into place (replacing a same-step dir), fsync root, then `latest`
    const fs::path final_dir = root / final_name;
    if (fs::exists(final_dir, ec)) checkpoint_remove_dir(root, final_name);
    io_rename(tmp.string(), final_dir.string());
    file_fsync_dir(root_str);
    file_write_atomic((root / "latest").string(), final_name + "\n");

    // 3. rotation: the newest `keep` complete checkpoints by step, always including this one
    if (keep > 0) {
        std::vector<StepDir> all = checkpoint_list_complete(root);
        int kept = 1;  // this one
        for (auto it = all.rbegin(); it != all.rend(); ++it) {
            if (it->name == final_name) continue;
            if (kept < keep) {
                ++kept;
                continue;
            }
            checkpoint_remove_dir(root, it->name);
        }
        file_fsync_dir(root_str);
    }
    return final_dir.string();
}

std::optional<std::string> checkpoint_now_at(const std::string& step_dir, double recorded_at) {
    fs::path p = fs::path(step_dir);
    if (p.filename().empty()) p = p.parent_path();
    std::vector<fs::path> candidates{p};
    std::error_code ec;
    for (fs::directory_iterator it(p.parent_path() / "earlier", ec), end; !ec && it != end;
         it.increment(ec))
        candidates.push_back(it->path() / p.filename());
    // The run's own was written last before the run recorded it (file times lag the clock by a
    // tick at most); another run's checkpoint of this step was written after it, or before it
    // (an earlier run's, set aside too): the latest at or before the record is the one.
    std::optional<std::string> best;
    double best_at = recorded_at - 60;
    for (const fs::path& dir : candidates) {
        if (!is_complete(dir)) continue;
        std::error_code tec;
        const auto written = fs::last_write_time(dir / "manifest.json", tec);
        if (tec) continue;
        const double at = std::chrono::duration<double>(
                              std::chrono::file_clock::to_sys(written).time_since_epoch())
                              .count();
        if (at <= recorded_at + 0.01 && at >= best_at) {
            best = dir.string();
            best_at = at;
        }
    }
    return best;
}

std::optional<int64_t> checkpoint_dir_step(const std::string& step_dir) {
    fs::path p = fs::path(step_dir);
    if (p.filename().empty()) p = p.parent_path();  // "step_00000010/"
    return step_dir_parse(p.filename().string());
}

// ---------------------------------------------------------------------------------------------
// An earlier run's checkpoints, set aside

CheckpointsSetAside checkpoint_set_aside(const std::string& root_str) {
    const fs::path root(root_str);
    CheckpointsSetAside out;
    const std::vector<StepDir> all = checkpoint_list_complete(root);
    if (all.empty()) return out;
    // named after when the newest was written, so that a user can tell earlier runs apart
    std::error_code ec;
    const auto written = fs::last_write_time(root / all.back().name / "manifest.json", ec);
    const std::time_t t =
        ec ? std::time(nullptr)
           : std::chrono::system_clock::to_time_t(std::chrono::file_clock::to_sys(written));
    std::tm local{};
    localtime_r(&t, &local);
    char stamp[40];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d_%H-%M-%S", &local);
    const fs::path earlier = root / "earlier";
    fs::path dest = earlier / stamp;
    for (int i = 2; fs::exists(dest, ec); ++i) dest = earlier / str_cat(stamp, "-", i);
    fs::create_directories(dest, ec);
    if (ec) throw Error(str_cat("cannot create ", dest.string(), ": ", ec.message()));
    for (const StepDir& d : all) io_rename((root / d.name).string(), (dest / d.name).string());
    if (fs::is_regular_file(root / "latest", ec))
        io_rename((root / "latest").string(), (dest / "latest").string());
    file_fsync_dir(dest.string());
    file_fsync_dir(root_str);
    out.dir = dest.string();
    out.count = static_cast<int>(all.size());
    out.first_step = all.front().step;
    out.last_step = all.back().step;
    return out;
}

// ---------------------------------------------------------------------------------------------
// Latest and load

std::optional<std::string> checkpoint_latest(const std::string& root_str) {
    const fs::path root(root_str);
    std::error_code ec;
    if (!fs::is_directory(root, ec)) return std::nullopt;
    if (fs::is_regular_file(root / "latest", ec)) {
        try {
            MappedFile m = io_map_file((root / "latest").string());
            std::string name(reinterpret_cast<const char*>(m.data.get()), m.size);
            while (!name.empty() &&
                   (name.back() == '\n' || name.back() == '\r' || name.back() == ' '))
                name.pop_back();
            if (step_dir_parse(name) && is_complete(root / name)) return (root / name).string();
        } catch (const Error&) {
            // unreadable pointer: fall back to scanning
        }
    }
    std::vector<StepDir> all = checkpoint_list_complete(root);
    if (all.empty()) return std::nullopt;
    return (root / all.back().name).string();
}

Checkpoint checkpoint_load(const std::string& path) {
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw InputError(str_cat("checkpoint ", path, ": no such file or directory"));
    if (!fs::is_directory(path, ec))
        throw InputError(str_cat("checkpoint ", path, ": expected a directory, found a file"));
    std::string dir = path;
    if (!fs::exists(fs::path(path) / "manifest.json", ec)) {
        auto latest = checkpoint_latest(path);
        if (!latest)
            throw InputError(
                str_cat("checkpoint ", path,
                        ": no complete checkpoint (expected a step dir with manifest.json, "
                        "or a root holding step_NNNNNNNN/manifest.json)"));
        dir = *latest;
    }
    auto fail = [&](const std::string& what) -> InputError {
        return InputError(str_cat("checkpoint ", dir, ": ", what));
    };

    // --- the manifest
    const std::string mpath = (fs::path(dir) / "manifest.json").string();
    MappedFile mf = io_map_file(mpath);
    const nlohmann::json m =
        json_parse_text(std::string_view(reinterpret_cast<const char*>(mf.data.get()), mf.size),
                        str_cat("checkpoint ", dir, ": manifest.json"),
                        "a JSON object {format, version, step, files}");
    if (!m.is_object())
        throw fail(str_cat("manifest.json: expected a JSON object, found ", json_kind(m)));
    if (m.value("format", nlohmann::json()) != k_format)
        throw fail(str_cat("manifest.json: key \"format\": expected \"", k_format, "\", found ",
                           m.contains("format") ? m["format"].dump() : "nothing"));
    if (!m.contains("version") || !m["version"].is_number_integer() ||
        m["version"].get<int64_t>() != k_version)
        throw fail(str_cat("manifest.json: key \"version\": expected ", k_version, ", found ",
                           m.contains("version") ? m["version"].dump() : "nothing"));
    if (!m.contains("step") || !m["step"].is_number_integer())
        throw fail(str_cat("manifest.json: key \"step\": expected an integer, found ",
                           m.contains("step") ? m["step"].dump() : "nothing"));
    if (!m.contains("files") || !m["files"].is_array())
        throw fail("manifest.json: key \"files\": expected a list of {name, bytes, crc32}");

    Checkpoint ck;
    ck.dir = dir;
    ck.step = m["step"].get<int64_t>();
    ck.state = m.value("state", nlohmann::json());

    // --- every listed file: size, then crc32, then parse
    for (size_t i = 0; i < m["files"].size(); ++i) {
        const nlohmann::json& f = m["files"][i];
        if (!f.is_object() || !f.contains("name") || !f["name"].is_string() ||
            !f.contains("bytes") || !f["bytes"].is_number_unsigned() || !f.contains("crc32") ||
            !f["crc32"].is_number_unsigned())
            throw fail(str_cat(
                "manifest.json: files[", i,
                "]: expected {\"name\": str, \"bytes\": uint, \"crc32\": uint}, found ", f.dump()));
        const std::string name = f["name"].get<std::string>();
        const std::string ext = ".safetensors";
        if (!file_name_ok(name) || name.size() <= ext.size() ||
            name.compare(name.size() - ext.size(), ext.size(), ext) != 0)
            throw fail(str_cat("manifest.json: files[", i,
                               "]: expected a plain NAME.safetensors, found \"", name, "\""));
        const uint64_t want_bytes = f["bytes"].get<uint64_t>();
        const uint32_t want_crc = static_cast<uint32_t>(f["crc32"].get<uint64_t>());
        const fs::path fp = fs::path(dir) / name;
        if (!fs::is_regular_file(fp, ec))
            throw fail(str_cat("file ", name, ": expected ", want_bytes, " bytes, found no file"));
        MappedFile data = io_map_file(fp.string());
        if (data.size != want_bytes)
            throw fail(
                str_cat("file ", name, ": expected ", want_bytes, " bytes, found ", data.size));
        uint32_t crc = io_crc32(data.data.get(), data.size);
        if (crc != want_crc)
            throw fail(str_cat("file ", name, ": crc32 expected ", io_hex32(want_crc), ", found ",
                               io_hex32(crc)));
        ck.files.emplace(name.substr(0, name.size() - ext.size()),
                         SafetensorsFile::from_mapped(fp.string(), std::move(data)));
    }
    return ck;
}

const SafetensorsFile& checkpoint_file(const Checkpoint& ck, const std::string& name) {
    auto it = ck.files.find(name);
    if (it == ck.files.end())
        throw InputError(str_cat("checkpoint ", ck.dir, ": missing ", name, ".safetensors"));
    return it->second;
}

}  // namespace tessera
