// A Hugging Face model folder's config.json as Tessera's model config (model.init_from: DIR):
// the architecture and every size come from the folder. Both spellings of the rotary settings
// are read: top-level rope_theta / rope_scaling (transformers 4.x) and rope_parameters (5.x).
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/config/config.h"
#include "engine/config/hf_config.h"
#include "engine/core/error.h"

namespace tessera {

namespace {

const char* kSupported = "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel";

}  // namespace

nlohmann::json hf_read_json(const std::string& path, const std::string& missing) {
    std::ifstream f(path);
    if (!f) throw InputError(str_cat(path, ": ", missing, " (none found)"));
    std::stringstream text;
    text << f.rdbuf();
    try {
        return nlohmann::json::parse(text.str());
    } catch (const std::exception& e) {
        throw InputError(str_cat(path, ": not JSON (", e.what(), ")"));
    }
}

void hf_config_apply(const std::string& dir, ModelConfig& m) {
    const std::string path = (std::filesystem::path(dir) / "config.json").string();
    const nlohmann::json j = hf_read_json(path, "model.init_from is a folder, expected its config.json");
    auto num = [&](const nlohmann::json& o, const char* key, const std::string& where) -> double {
        if (!o.contains(key) || !o[key].is_number())
            throw InputError(str_cat(path, ": ", where, key, ": expected a number, found ",
                                     o.contains(key) ? o[key].dump() : "nothing"));
        return o[key].get<double>();
    };
    std::string arch;
    if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty())
        arch = j["architectures"][0].get<std::string>();
    if (arch == "GPT2LMHeadModel") {
        m.preset = "gpt2";
        m.n_layer = (int)num(j, "n_layer", "");
        m.n_head = (int)num(j, "n_head", "");
        m.d_model = (int)num(j, "n_embd", "");
        const int positions = (int)num(j, "n_positions", "");
        if (!m.seq_len) m.seq_len = positions;
        if (m.seq_len > positions)
            throw InputError(str_cat(path, ": model.seq_len ", m.seq_len, " is longer than the folder's n_positions ", positions));
        if ((int)num(j, "vocab_size", "") != 50257)
            throw InputError(str_cat(path, ": vocab_size: expected GPT-2's 50257, found ", j["vocab_size"].dump()));
        m.vocab = "gpt2";
        m.from_folder = true;
        return;
    }
    if (arch != "LlamaForCausalLM" && arch != "MistralForCausalLM" && arch != "Qwen2ForCausalLM" &&
        arch != "Qwen3ForCausalLM")
        throw InputError(str_cat(path, ": architectures: expected one of ", kSupported, ", found ",
                                 arch.empty() ? std::string("none") : arch));
    m.preset = "llama";
    m.n_layer = (int)num(j, "num_hidden_layers", "");
    m.n_head = (int)num(j, "num_attention_heads", "");
    m.d_model = (int)num(j, "hidden_size", "");
    m.n_kv_head = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                      ? (int)num(j, "num_key_value_heads", "") : m.n_head;
    m.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? (int)num(j, "head_dim", "") : m.d_model / m.n_head;
    m.ffn = (int)num(j, "intermediate_size", "");
    m.vocab_size = (int)num(j, "vocab_size", "");
    m.norm_eps = num(j, "rms_norm_eps", "");
    // absent: untied, the default of transformers' Llama, Mistral and Qwen2 configs
    m.tie_embeddings = j.value("tie_word_embeddings", false);
    m.qkv_bias = arch == "Qwen2ForCausalLM" || j.value("attention_bias", false);
    m.qk_norm = arch == "Qwen3ForCausalLM";
    if (j.value("mlp_bias", false))
        throw InputError(str_cat(path, ": mlp_bias: true is not supported (the Llama family's MLP has no biases)"));
    const std::string act = j.value("hidden_act", "silu");
    if (act != "silu") throw InputError(str_cat(path, ": hidden_act: expected silu, found ", act));
    // rotary: 5.x's rope_parameters, else 4.x's top-level keys
    const nlohmann::json* rp = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? &j["rope_parameters"] : nullptr;
    const nlohmann::json& rope = rp ? *rp : j;
    const std::string where = rp ? "rope_parameters." : "";
    m.rope_theta = rope.contains("rope_theta") ? num(rope, "rope_theta", where) : 10000.0;
    const nlohmann::json* sc = rp ? rp : (j.contains("rope_scaling") && j["rope_scaling"].is_object() ? &j["rope_scaling"] : nullptr);
    m.rope_scaling = RopeScaling{};
    if (sc) {
        const std::string sw = rp ? "rope_parameters." : "rope_scaling.";
        std::string type = sc->value("rope_type", sc->value("type", std::string("default")));
        if (type == "llama3") {
            m.rope_scaling = {"llama3", num(*sc, "factor", sw), num(*sc, "low_freq_factor", sw),
                              num(*sc, "high_freq_factor", sw), (int)num(*sc, "original_max_position_embeddings", sw)};
        } else if (type == "linear") {
            m.rope_scaling = {"linear", num(*sc, "factor", sw)};
        } else if (type != "default") {
            throw InputError(str_cat(path, ": ", sw, "rope_type: expected default, linear or llama3, found ", type));
        }
    }
    const int positions = (int)num(j, "max_position_embeddings", "");
    if (!m.seq_len) m.seq_len = std::min(positions, 2048);
    if (m.seq_len > positions)
        throw InputError(str_cat(path, ": model.seq_len ", m.seq_len, " is longer than the folder's max_position_embeddings ",
                                 positions));
    m.from_folder = true;
}

}  // namespace tessera
