// The run config a checkpoint was saved with, for the subcommands that read a checkpoint without
// its project file (sample, export): the manifest's config_text, its relative paths (data.train,
// a model.init_from folder) resolved where the run resolved them; its data need not be there.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <vector>

#include "engine/cli/cli.h"
#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/io/checkpoint.h"

namespace fs = std::filesystem;

namespace tessera {

namespace {

// The folder the run's config file was in: the checkpoint root (the step dir's parent, less
// earlier/STAMP where a later run set it aside) less the relative checkpoint.dir the config gave
// it. "" when that cannot be told: an absolute checkpoint.dir, or a checkpoint moved since.
std::string run_base_dir(const std::string& text, const std::string& step_dir) {
    std::string rel;
    try {
        const YAML::Node n = YAML::Load(text);
        if (n.IsMap() && n["checkpoint"] && n["checkpoint"]["dir"])
            rel = n["checkpoint"]["dir"].as<std::string>();
    } catch (const std::exception&) {
        return "";  // config_parse names what is wrong with the text
    }
    if (rel.empty() || fs::path(rel).is_absolute()) return "";
    fs::path root = fs::absolute(step_dir).lexically_normal();
    if (root.filename().empty()) root = root.parent_path();  // "step_00000010/"
    root = root.parent_path();
    if (root.parent_path().filename() == "earlier")  // checkpoint_set_aside's ROOT/earlier/STAMP
        root = root.parent_path().parent_path();
    std::vector<fs::path> parts;
    for (const fs::path& p : fs::path(rel).lexically_normal())
        if (!p.empty() && p != ".") parts.push_back(p);
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (root.filename() != *it) return "";
        root = root.parent_path();
    }
    return root.string();
}

}  // namespace

RunConfig cli_checkpoint_config(const Checkpoint& ck) {
    const std::string text = ck.state.value("config_text", std::string());
    if (text.empty())
        throw InputError(str_cat("checkpoint ", ck.dir, ": state has no config_text"));
    // sample and export read no data: a run's data may have moved or gone since
    return config_parse(text, ck.dir + "/manifest.json (config_text)", {},
                        run_base_dir(text, ck.dir), ConfigFiles::may_be_missing);
}

}  // namespace tessera
