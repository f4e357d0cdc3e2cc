// Run configuration loader: reads project.yaml into a RunConfig. Steps: guarded YAML load
// (config_yaml.cpp) → `--set key.path=value` overrides applied to the tree → per-key reading with
// type and range checks → model preset resolution → cross-field rules (config_rules.cpp). Every
// failure is one InputError "WHERE: KEY.PATH: expected ..., found ..." where WHERE is
// FILE:LINE:COL of the offending node, or the `--set ...` override that supplied it.
#include "engine/config/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>

#include "engine/config/config_reader.h"
#include "engine/config/config_yaml.h"
#include "engine/core/error.h"
#include "engine/core/json_text.h"

namespace fs = std::filesystem;

namespace tessera {

// ----------------------------------------------------------------------------
// schema: the keys each section accepts (docs/config.md documents each one)

const std::vector<std::string>& config_top_keys() {
    static const std::vector<std::string> keys = {
        "name", "model", "data", "train", "runtime", "parallel", "checkpoint", "log", "cluster"};
    return keys;
}

const std::vector<std::string>& config_section_keys(const std::string& section) {
    static const std::map<std::string, std::vector<std::string>> keys = {
        {"model",
         {"preset", "n_layer", "n_head", "d_model", "seq_len", "vocab", "hidden", "init_from",
          "n_kv_head", "head_dim", "ffn", "vocab_size", "norm_eps", "rope_theta", "rope_scaling",
          "qkv_bias", "qk_norm", "tie_embeddings"}},
        {"model.rope_scaling",
         {"type", "factor", "low_freq_factor", "high_freq_factor",
          "original_max_position_embeddings"}},
        {"data", {"train", "val", "dataset", "order"}},
        {"train",
         {"steps", "micro_batch", "grad_accum", "lr", "min_lr", "warmup_steps", "weight_decay",
          "grad_clip", "seed", "eval_every", "eval_steps", "beta1", "beta2", "eps", "threads",
          "restarts"}},
        {"runtime", {"device", "precision"}},
        {"parallel",
         {"dp", "tp", "pp", "zero", "schedule", "virtual_stages", "stages", "recompute",
          "offload_activations", "offload_optimizer"}},
        {"checkpoint", {"dir", "every", "keep"}},
        {"log", {"db", "every"}},
        {"cluster",
         {"hosts", "hostfile", "workdir", "tessera", "rendezvous_port", "env", "known_hosts",
          "connect_timeout"}},
        {"cluster.hosts[]", {"host", "user", "port", "identity", "slots", "addr"}},
    };
    static const std::vector<std::string> none;
    auto it = keys.find(section);
    return it == keys.end() ? none : it->second;
}

// ----------------------------------------------------------------------------
// Reader: locations and typed reads

std::string ConfigReader::override_source(const std::string& path) const {
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
        if (path == it->first || path.rfind(it->first + ".", 0) == 0 ||
            path.rfind(it->first + "[", 0) == 0)
            return it->second;
    return "";
}

std::string ConfigReader::where(const std::string& path, const YAML::Node& value,
                                const YAML::Node* key) const {
    std::string src = override_source(path);
    if (!src.empty()) return src;
    YAML::Mark m = value.IsDefined() ? value.Mark() : YAML::Mark::null_mark();
    // A null value's mark points past the key (often the next line): use the key instead.
    if (key && (m.is_null() || !value.IsDefined() || value.IsNull())) m = key->Mark();
    if (m.is_null()) return loc(parent_path(path));
    return yaml_format_mark(file, m);
}

std::string ConfigReader::parent_path(const std::string& path) {
    size_t dot = path.find_last_of(".[");
    return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

std::string ConfigReader::loc(const std::string& path) const {
    for (std::string p = path;; p = parent_path(p)) {
        auto it = locs.find(p);
        if (it != locs.end()) return it->second;
        if (p.empty()) return str_cat(file, ":1:1");
    }
}

void ConfigReader::fail(const std::string& at, const std::string& path, const std::string& expected,
                        const std::string& found) const {
    throw InputError(str_cat(at, ": ", path.empty() ? "(document)" : path, ": expected ", expected,
                             ", found ", found));
}

void ConfigReader::fail_field(const ConfigField& f, const std::string& expected,
                              const std::string& found) const {
    fail(f.at, f.path, expected, found);
}

void ConfigReader::fail_key(const std::vector<std::string>& candidates, const std::string& expected,
                            const std::string& found) const {
    for (const auto& c : candidates)
        if (locs.count(c)) fail(locs.at(c), c, expected, found);
    fail(loc(candidates.front()), candidates.front(), expected, found);
}

std::vector<ConfigField> ConfigReader::read_map(const YAML::Node& node, const std::string& path,
                                                const std::string& at,
                                                const std::vector<std::string>& allowed) {
    std::vector<ConfigField> out;
    if (!node.IsDefined() || node.IsNull()) return out;  // "train:" with nothing = all defaults
    if (!node.IsMap())
        fail(at, path, path.empty() ? "a map of sections" : "a map of keys",
             yaml_describe_node(node));
    for (auto it = node.begin(); it != node.end(); ++it) {
        const YAML::Node key = it->first;  // a copy: it-> returns a temporary proxy
        std::string kname = key.IsScalar() ? key.Scalar() : std::string();
        std::string kpath = path.empty() ? kname : str_cat(path, ".", kname);
        if (!key.IsScalar()) {
            fail(where(path, key), path, "a plain key name", yaml_describe_node(key));
        }
        bool known = false;
        for (const auto& a : allowed) known = known || a == kname;
        if (!known) {
            std::string hint = text_suggest(kname, allowed);
            std::string expected =
                path.empty() ? "a known section" : str_cat("a known key of ", path);
            if (!hint.empty()) expected += str_cat(" (", hint, ")");
            std::string src = override_source(kpath);
            fail(src.empty() ? yaml_format_mark(file, key.Mark()) : src, kpath, expected,
                 str_cat("unknown key '", kname, "'"));
        }
        ConfigField f{kpath, it->second, where(kpath, it->second, &key)};
        locs[kpath] = f.at;
        out.push_back(f);
    }
    return out;
}

namespace {

std::string range_text(const char* what, long double lo, long double hi) {
    bool has_hi = hi < (long double)std::numeric_limits<int64_t>::max() / 2;
    std::ostringstream os;
    os << what;
    if (has_hi)
        os << " in [" << (int64_t)lo << ", " << (int64_t)hi << "]";
    else
        os << " >= " << (int64_t)lo;
    return os.str();
}

// A plain (unquoted) scalar, or fail with "expected <what>".
const std::string& plain_scalar(const ConfigReader& r, const ConfigField& f,
                                const std::string& what) {
    if (!f.value.IsDefined() || !f.value.IsScalar() || f.value.Tag() == "!")
        r.fail_field(f, what, yaml_describe_node(f.value));
    return f.value.Scalar();
}

}  // namespace

int64_t ConfigReader::read_int(const ConfigField& f, int64_t lo, int64_t hi) const {
    std::string what = range_text("an integer", (long double)lo, (long double)hi);
    const std::string& s = plain_scalar(*this, f, what);
    int64_t v = 0;
    const char* b = s.data() + (s.size() && s[0] == '+' ? 1 : 0);
    auto [ptr, ec] = std::from_chars(b, s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range)
        fail_field(f, what, str_cat("'", s, "' (out of range)"));
    if (ec != std::errc() || ptr != s.data() + s.size() || s.empty())
        fail_field(f, what, yaml_describe_node(f.value));
    if (v < lo || v > hi) fail_field(f, what, s);
    return v;
}

uint64_t ConfigReader::read_uint64(const ConfigField& f) const {
    const char* what = "a non-negative integer";
    const std::string& s = plain_scalar(*this, f, what);
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size() || s.empty())
        fail_field(f, what, yaml_describe_node(f.value));
    return v;
}

double ConfigReader::read_double(const ConfigField& f, double lo, bool lo_open, double hi,
                                 bool hi_open) const {
    std::string what = "a number";
    if (std::isfinite(lo)) what += str_cat(lo_open ? " > " : " >= ", lo);
    if (std::isfinite(hi))
        what += str_cat(std::isfinite(lo) ? " and" : "", hi_open ? " < " : " <= ", hi);
    const std::string& s = plain_scalar(*this, f, what);
    char* end = nullptr;
    double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) ||
        s.find_first_of("xXnNiI") != std::string::npos)  // no hex floats, nan, inf
        fail_field(f, what, yaml_describe_node(f.value));
    if (v < lo || (lo_open && v == lo) || v > hi || (hi_open && v == hi)) fail_field(f, what, s);
    return v;
}

bool ConfigReader::read_bool(const ConfigField& f) const {
    const std::string& s = plain_scalar(*this, f, "true or false");
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    fail_field(f, "true or false", yaml_describe_node(f.value));
}

std::string ConfigReader::read_string(const ConfigField& f, bool allow_empty) const {
    if (f.value.IsDefined() && f.value.IsNull() && allow_empty) return "";
    if (!f.value.IsDefined() || !f.value.IsScalar())
        fail_field(f, "a string", yaml_describe_node(f.value));
    if (!allow_empty && f.value.Scalar().empty()) fail_field(f, "a non-empty string", "\"\"");
    return f.value.Scalar();
}

std::string ConfigReader::read_enum(const ConfigField& f,
                                    const std::vector<std::string>& options) const {
    std::string what = "one of ";
    for (size_t i = 0; i < options.size(); ++i) what += (i ? "|" : "") + options[i];
    if (!f.value.IsDefined() || !f.value.IsScalar())
        fail_field(f, what, yaml_describe_node(f.value));
    const std::string& s = f.value.Scalar();
    for (const auto& o : options)
        if (s == o) return s;
    std::string hint = text_suggest(s, options);
    fail_field(f, what, yaml_describe_node(f.value) + (hint.empty() ? "" : " (" + hint + ")"));
}

ConfigField ConfigReader::element(const ConfigField& list, size_t i) const {
    std::string p = str_cat(list.path, "[", i, "]");
    YAML::Node v = list.value[i];
    std::string src = override_source(p);
    return {p, v,
            src.empty() ? (v.Mark().is_null() ? list.at : yaml_format_mark(file, v.Mark())) : src};
}

std::vector<int> ConfigReader::read_int_list(const ConfigField& f, int64_t lo, int64_t hi) const {
    if (!f.value.IsDefined() || !f.value.IsSequence())
        fail_field(f, "a list of integers like [2, 2]", yaml_describe_node(f.value));
    std::vector<int> out;
    for (size_t i = 0; i < f.value.size(); ++i) out.push_back((int)read_int(element(f, i), lo, hi));
    return out;
}

// ----------------------------------------------------------------------------
// overrides: "key.path=value" applied to the tree before anything is read

namespace {

std::vector<std::string> split_dots(const std::string& s) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
        size_t dot = s.find('.', start);
        parts.push_back(
            s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
        if (dot == std::string::npos) return parts;
        start = dot + 1;
    }
}

void apply_override(ConfigReader& r, YAML::Node& root, const std::string& spec) {
    std::string src = str_cat("--set ", spec);
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
        r.fail(src, "(override)", "key.path=value", str_cat("'", spec, "'"));
    std::string path = spec.substr(0, eq);
    std::vector<std::string> parts = split_dots(path);
    // Validate the path against the schema (same did-you-mean as keys in the file).
    const auto& top = config_top_keys();
    auto unknown = [&](const std::string& shown, const std::string& word,
                       const std::vector<std::string>& options, const std::string& scope) {
        std::string hint = text_suggest(word, options);
        std::string expected = str_cat("a known key of ", scope);
        if (!hint.empty()) expected += str_cat(" (", hint, ")");
        r.fail(src, shown, expected, str_cat("unknown key '", word, "'"));
    };
    if (std::find(top.begin(), top.end(), parts[0]) == top.end())
        unknown(path, parts[0], top, "the config");
    if (parts.size() > 1) {
        const auto& keys = config_section_keys(parts[0]);
        if (keys.empty())
            r.fail(src, path, str_cat("no sub-keys under '", parts[0], "'"),
                   str_cat("'", parts[1], "'"));
        if (std::find(keys.begin(), keys.end(), parts[1]) == keys.end())
            unknown(path, parts[1], keys, parts[0]);
    }
    if (parts.size() > 2)
        r.fail(src, path, str_cat("a key path at most two deep like ", parts[0], ".", parts[1]),
               str_cat("'", path, "'"));

    YAML::Node value = yaml_load_guarded(spec.substr(eq + 1), src, path, false);
    r.overrides.emplace_back(path, src);
    if (parts.size() == 1) {
        root[parts[0]] = value;
        return;
    }
    // Find the section without creating it (operator[] on a non-const node would).
    YAML::Node section;
    bool present = false;
    for (auto it = root.begin(); it != root.end(); ++it)
        if (it->first.IsScalar() && it->first.Scalar() == parts[0])
            section = it->second, present = true;
    if (present && section.IsMap()) {
        section[parts[1]] = value;
    } else if (present && !section.IsNull()) {
        r.fail(yaml_format_mark(r.file, section.Mark()), parts[0],
               str_cat("a map of keys (to apply ", src, ")"), yaml_describe_node(section));
    } else {
        YAML::Node fresh(YAML::NodeType::Map);
        fresh[parts[1]] = value;
        root[parts[0]] = fresh;
    }
}

std::string read_text_file(const std::string& path) {
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw InputError(str_cat(path, ": (file): expected a config file, found no such file"));
    if (fs::is_directory(path, ec))
        throw InputError(str_cat(path, ": (file): expected a config file, found a directory"));
    auto size = fs::file_size(path, ec);
    if (!ec && size > kConfigMaxBytes)
        throw InputError(str_cat(path, ": (file): expected a config file under ",
                                 kConfigMaxBytes >> 20, " MiB, found ", size, " bytes"));
    std::optional<std::string> text = text_file_read(path);
    if (!text)
        throw InputError(str_cat(path, ": (file): expected a readable config file, found one ",
                                 "that cannot be opened"));
    return std::move(*text);
}

}  // namespace

// ----------------------------------------------------------------------------
// public API

RunConfig config_parse(const std::string& text, const std::string& name,
                       const std::vector<std::string>& overrides, const std::string& base_dir,
                       ConfigFiles files) {
    ConfigReader r;
    r.file = name;
    r.files_must_exist = files == ConfigFiles::must_exist;
    r.locs[""] = str_cat(name, ":1:1");
    if (text.size() > kConfigMaxBytes)
        r.fail(name, "(document)", str_cat("a config under ", kConfigMaxBytes >> 20, " MiB"),
               str_cat(text.size(), " bytes"));
    YAML::Node root = yaml_load_guarded(text, name, "(document)", true);
    if (!root.IsDefined() || root.IsNull())
        r.fail(str_cat(name, ":1:1"), "", "a map of sections (name, model, data, train, ...)",
               "an empty document");
    if (!root.IsMap())
        r.fail(yaml_format_mark(name, root.Mark()), "",
               "a map of sections (name, model, data, train, ...)", yaml_describe_node(root));

    for (const auto& spec : overrides) apply_override(r, root, spec);

    RunConfig cfg;
    cfg.base_dir = base_dir.empty() ? config_base_dir_for(name) : base_dir;
    config_read_tree(r, root, cfg);
    config_check_rules(r, cfg);

    cfg.source_path = name;
    if (overrides.empty()) {
        cfg.source_text = text;
    } else {
        YAML::Emitter e;
        e << root;
        cfg.source_text = str_cat(e.c_str(), "\n");
    }
    return cfg;
}

RunConfig config_load(const std::string& path, const std::vector<std::string>& overrides,
                      ConfigFiles files) {
    std::string text = read_text_file(path);
    return config_parse(text, path, overrides, "", files);
}

std::string config_resolve_path(const RunConfig& cfg, const std::string& p) {
    if (p.empty()) return p;
    fs::path path(p);
    if (path.is_absolute()) return p;
    fs::path base = cfg.base_dir.empty() ? fs::current_path() : fs::path(cfg.base_dir);
    return (base / path).lexically_normal().string();
}

std::string config_base_dir_for(const std::string& name) {
    std::error_code ec;
    fs::path parent = fs::path(name).parent_path();
    fs::path base = parent.empty() ? fs::current_path(ec) : fs::absolute(parent, ec);
    return base.lexically_normal().string();
}

}  // namespace tessera
