#include "engine/model/hf_import.h"

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/config/hf_config.h"
#include "engine/core/error.h"
#include "engine/io/safetensors.h"
#include "engine/model/hf_names.h"

namespace fs = std::filesystem;

namespace tessera {

std::string hf_weights_file(const std::string& dir) {
    const fs::path p = fs::path(dir) / "model.safetensors";
    if (!fs::exists(p))
        throw InputError(str_cat(dir, ": expected model.safetensors in the model folder"));
    return p.string();
}

namespace {

// The folder's tensors: one file, or the shards an index maps names to (opened on first use).
class Weights {
  public:
    explicit Weights(const std::string& dir) : dir_(dir) {
        const fs::path index = fs::path(dir) / "model.safetensors.index.json";
        if (fs::exists(index)) {
            const nlohmann::json j = hf_read_json(index.string(), "expected the shards' index");
            if (!j.contains("weight_map") || !j["weight_map"].is_object())
                throw InputError(str_cat(index.string(), ": expected a weight_map object"));
            for (const auto& [name, file] : j["weight_map"].items())
                map_[name] = file.get<std::string>();
        } else {
            single_ = hf_weights_file(dir);
        }
    }
    // Reads tensor `name` of shape `shape` into dst (converted to fp32).
    void read(const std::string& name, const Shape& shape, float* dst) {
        std::string file = single_;
        if (file.empty()) {
            auto it = map_.find(name);
            if (it == map_.end())
                throw InputError(str_cat(dir_, "/model.safetensors.index.json: no tensor ", name,
                                         " in weight_map"));
            file = (fs::path(dir_) / it->second).string();
        }
        auto& f = files_[file];
        if (!f) f = std::make_unique<SafetensorsFile>(SafetensorsFile::open(file));
        if (!f->find(name))
            throw InputError(
                str_cat(file, ": no tensor ", name, " (expected shape ", shape_str(shape), ")"));
        f->read_f32(name, shape, dst);
    }

  private:
    static std::string shape_str(const Shape& s) {
        std::string r = "[";
        for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
        return r + "]";
    }
    std::string dir_, single_;
    std::map<std::string, std::string> map_;
    std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
};

}  // namespace

void llama_load_hf_weights(const std::string& dir, const LlamaDims& d, float* dst) {
    Weights w(dir);
    const ParamTable table = llama_param_table(d);
    for (const ParamInfo& p : table.entries())
        for (const HfTensor& t : llama_hf_tensors(p, d))
            w.read(t.name, t.shape, dst + p.offset + t.offset);
}

}  // namespace tessera
