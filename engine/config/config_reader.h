// Internal to engine/config: the reading context shared by config.cpp (typed reads, overrides)
// and config_rules.cpp (sections, presets, cross-field rules, canonical YAML). It remembers where
// each key came from so that cross-field errors can point at the most relevant key.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/config/config.h"

namespace tessera {

// One key's value with its dotted path ("train.steps", "parallel.stages[1]") and its location
// ("FILE:LINE:COL" or "--set train.steps=abc").
struct ConfigField {
    std::string path;
    YAML::Node value;
    std::string at;
};

struct ConfigReader {
    std::string file;                                            // name used in messages
    std::vector<std::pair<std::string, std::string>> overrides;  // key path, "--set spec"
    std::map<std::string, std::string> locs;                     // key path -> location read
    bool files_must_exist = true;  // ConfigFiles::must_exist (config.h)

    // "--set ..." when the path (or a parent) was supplied by an override, else "".
    std::string override_source(const std::string& path) const;
    // Location of a value node (the key's position when the value is null).
    std::string where(const std::string& path, const YAML::Node& value,
                      const YAML::Node* key = nullptr) const;
    // Location of a read key or, when absent, of its nearest read parent (else FILE:1:1).
    std::string loc(const std::string& path) const;
    static std::string parent_path(const std::string& path);

    [[noreturn]] void fail(const std::string& at, const std::string& path,
                           const std::string& expected, const std::string& found) const;
    [[noreturn]] void fail_field(const ConfigField& f, const std::string& expected,
                                 const std::string& found) const;
    // Cross-field failure: reported at the first candidate key present in the file, else at
    // the first candidate (located at its nearest present parent).
    [[noreturn]] void fail_key(const std::vector<std::string>& candidates,
                               const std::string& expected, const std::string& found) const;

    // The keys of a map node (null = empty), rejecting unknown keys with a suggestion.
    std::vector<ConfigField> read_map(const YAML::Node& node, const std::string& path,
                                      const std::string& at,
                                      const std::vector<std::string>& allowed);

    int64_t read_int(const ConfigField& f, int64_t lo,
                     int64_t hi = std::numeric_limits<int64_t>::max()) const;
    uint64_t read_uint64(const ConfigField& f) const;
    double read_double(const ConfigField& f, double lo, bool lo_open,
                       double hi = std::numeric_limits<double>::infinity(),
                       bool hi_open = false) const;
    bool read_bool(const ConfigField& f) const;
    std::string read_string(const ConfigField& f, bool allow_empty) const;
    std::string read_enum(const ConfigField& f, const std::vector<std::string>& options) const;
    std::vector<int> read_int_list(const ConfigField& f, int64_t lo, int64_t hi) const;
    ConfigField element(const ConfigField& list, size_t i) const;
};

const std::vector<std::string>& config_top_keys();
const std::vector<std::string>& config_section_keys(const std::string& section);
// Absolute, normalised directory of a config named `name` (its parent; cwd when none).
std::string config_base_dir_for(const std::string& name);

// config_rules.cpp: fills `cfg` from the tree (presets resolved) and applies the cross-field rules.
void config_read_tree(ConfigReader& r, const YAML::Node& root, RunConfig& cfg);
void config_check_rules(const ConfigReader& r, const RunConfig& cfg);

}  // namespace tessera
