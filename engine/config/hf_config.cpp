// A Hugging Face model folder's config.json as Tessera's model config (model.init_from: DIR):
// the architecture and every size come from the folder. Both spellings of the rotary settings
// are read: top-level rope_theta / rope_scaling (transformers 4.x) and rope_parameters (5.x).
// The writer (hf_config_json, for `tessera export --hf`) is kept beside the reader: the same
// keys, and what one writes the other reads back to the same model.
#include "engine/config/hf_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/core/json_text.h"

namespace tessera {

namespace {

const char* kSupported =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel";

}  // namespace

nlohmann::json hf_read_json(const std::string& path, const std::string& missing) {
    const std::optional<std::string> text = text_file_read(path);
    if (!text) throw InputError(str_cat(path, ": ", missing, " (none found)"));
    return json_parse_text(*text, path, "a Hugging Face JSON file");
}

void hf_config_apply(const std::string& dir, ModelConfig& m) {
    const std::string path = (std::filesystem::path(dir) / "config.json").string();
    const nlohmann::json j =
        hf_read_json(path, "model.init_from is a folder, expected its config.json");
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
            throw InputError(str_cat(path, ": model.seq_len ", m.seq_len,
                                     " is longer than the folder's n_positions ", positions));
        // GPT-2's tokenizer, or the byte-level one of a model Tessera trained and exported
        const int vocab = (int)num(j, "vocab_size", "");
        if (vocab != config_tokenizer_vocab_size("gpt2") &&
            vocab != config_tokenizer_vocab_size("bytes"))
            throw InputError(str_cat(
                path, ": vocab_size: expected GPT-2's ", config_tokenizer_vocab_size("gpt2"),
                " (or ", config_tokenizer_vocab_size("bytes"),
                ", Tessera's byte-level vocabulary), found ", j["vocab_size"].dump()));
        m.vocab = vocab == config_tokenizer_vocab_size("gpt2") ? "gpt2" : "bytes";
        m.from_folder = true;
        m.hf_architecture = arch;
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
                      ? (int)num(j, "num_key_value_heads", "")
                      : m.n_head;
    m.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? (int)num(j, "head_dim", "")
                                                                    : m.d_model / m.n_head;
    m.ffn = (int)num(j, "intermediate_size", "");
    m.vocab_size = (int)num(j, "vocab_size", "");
    m.norm_eps = num(j, "rms_norm_eps", "");
    // absent: untied, the default of transformers' Llama, Mistral and Qwen2 configs
    m.tie_embeddings = j.value("tie_word_embeddings", false);
    // Qwen2 biases q, k and v always; Llama's and Qwen3's attention_bias also biases o_proj,
    // which the block does not have; Mistral's attention has no biases
    m.qkv_bias = arch == "Qwen2ForCausalLM";
    if ((arch == "LlamaForCausalLM" || arch == "Qwen3ForCausalLM") &&
        j.value("attention_bias", false))
        throw InputError(str_cat(
            path, ": attention_bias: true is not supported for ", arch,
            " (it biases o_proj too; Tessera's attention has q/k/v biases only, as Qwen2's)"));
    m.qk_norm = arch == "Qwen3ForCausalLM";
    if (j.value("mlp_bias", false))
        throw InputError(str_cat(
            path, ": mlp_bias: true is not supported (the Llama family's MLP has no biases)"));
    const std::string act = j.value("hidden_act", "silu");
    if (act != "silu") throw InputError(str_cat(path, ": hidden_act: expected silu, found ", act));
    // rotary: 5.x's rope_parameters, else 4.x's top-level keys
    const nlohmann::json* rp = j.contains("rope_parameters") && j["rope_parameters"].is_object()
                                   ? &j["rope_parameters"]
                                   : nullptr;
    const nlohmann::json& rope = rp ? *rp : j;
    const std::string where = rp ? "rope_parameters." : "";
    m.rope_theta = rope.contains("rope_theta") ? num(rope, "rope_theta", where) : 10000.0;
    const nlohmann::json* sc =
        rp ? rp
           : (j.contains("rope_scaling") && j["rope_scaling"].is_object() ? &j["rope_scaling"]
                                                                          : nullptr);
    m.rope_scaling = RopeScaling{};
    if (sc) {
        const std::string sw = rp ? "rope_parameters." : "rope_scaling.";
        std::string type = sc->value("rope_type", sc->value("type", std::string("default")));
        if (type == "llama3") {
            m.rope_scaling = {"llama3", num(*sc, "factor", sw), num(*sc, "low_freq_factor", sw),
                              num(*sc, "high_freq_factor", sw),
                              (int)num(*sc, "original_max_position_embeddings", sw)};
        } else if (type == "linear") {
            m.rope_scaling = {"linear", num(*sc, "factor", sw)};
        } else if (type != "default") {
            throw InputError(str_cat(
                path, ": ", sw, "rope_type: expected default, linear or llama3, found ", type));
        }
    }
    const int positions = (int)num(j, "max_position_embeddings", "");
    if (!m.seq_len) m.seq_len = std::min(positions, 2048);
    if (m.seq_len > positions)
        throw InputError(str_cat(path, ": model.seq_len ", m.seq_len,
                                 " is longer than the folder's max_position_embeddings ",
                                 positions));
    m.from_folder = true;
    m.hf_architecture = arch;
}

// ------------------------------------------------------------------------------------------
// config.json for `tessera export --hf`

std::string hf_export_architecture(const ModelConfig& m) {
    const bool qk_norm = m.qk_norm;
    const std::string family = model_family(m.preset);
    if (family == "gpt") return "GPT2LMHeadModel";
    if (family != "llama")
        throw InputError(str_cat("model.preset ", m.preset,
                                 ": no Hugging Face architecture (expected a GPT or "
                                 "Llama-family model)"));
    if (qk_norm && m.qkv_bias)
        throw InputError(
            "q/k norms together with q/k/v biases: no Hugging Face architecture has both "
            "(Qwen3's attention_bias would add an o_proj bias)");
    if (qk_norm) return "Qwen3ForCausalLM";
    if (m.qkv_bias) return "Qwen2ForCausalLM";
    if (m.hf_architecture == "MistralForCausalLM" || m.preset.rfind("mistral", 0) == 0)
        return "MistralForCausalLM";
    return "LlamaForCausalLM";
}

nlohmann::json hf_config_json(const ModelConfig& m, const std::string& architecture) {
    nlohmann::json j;
    j["architectures"] = {architecture};
    if (architecture == "GPT2LMHeadModel") {
        const int vocab = config_tokenizer_vocab_size(m.vocab);
        j["model_type"] = "gpt2";
        j["vocab_size"] = vocab;
        j["n_embd"] = m.d_model;
        j["n_layer"] = m.n_layer;
        j["n_head"] = m.n_head;
        j["n_positions"] = m.seq_len;
        j["n_ctx"] = m.seq_len;
        j["n_inner"] = nullptr;                 // 4 * n_embd
        j["activation_function"] = "gelu_new";  // the tanh approximation (kernels/cpu/gelu.h)
        j["layer_norm_epsilon"] = 1e-5;         // kernels/cpu/layernorm.h
        j["scale_attn_weights"] = true;
        j["resid_pdrop"] = j["embd_pdrop"] = j["attn_pdrop"] = 0.0;
        j["tie_word_embeddings"] = true;
        // <|endoftext|>; the byte vocabulary has none (GPT2Config would default 50256)
        j["bos_token_id"] = j["eos_token_id"] =
            m.vocab == "gpt2" ? nlohmann::json(vocab - 1) : nlohmann::json();
    } else {
        j["model_type"] = architecture == "MistralForCausalLM" ? "mistral"
                          : architecture == "Qwen2ForCausalLM" ? "qwen2"
                          : architecture == "Qwen3ForCausalLM" ? "qwen3"
                                                               : "llama";
        j["vocab_size"] = m.vocab_size;
        j["hidden_size"] = m.d_model;
        j["intermediate_size"] = m.ffn;
        j["num_hidden_layers"] = m.n_layer;
        j["num_attention_heads"] = m.n_head;
        j["num_key_value_heads"] = m.n_kv_head;
        j["head_dim"] = m.head_dim;
        j["hidden_act"] = "silu";
        j["rms_norm_eps"] = m.norm_eps;
        j["max_position_embeddings"] = m.seq_len;
        j["tie_word_embeddings"] = m.tie_embeddings;
        // Qwen2's q/k/v biases are implicit; elsewhere attention_bias would add an o_proj bias
        if (architecture != "Qwen2ForCausalLM") j["attention_bias"] = false;
        if (architecture == "LlamaForCausalLM") j["mlp_bias"] = false;
        // no sliding window: Mistral's config defaults one (4096), Qwen's keep it off
        if (architecture != "LlamaForCausalLM") j["sliding_window"] = nullptr;
        if (architecture == "Qwen2ForCausalLM" || architecture == "Qwen3ForCausalLM")
            j["use_sliding_window"] = false;
        // rotary: 4.x's top-level keys, and 5.x's rope_parameters (the same keys plus rope_theta)
        nlohmann::json scaling = nullptr;
        const RopeScaling& rs = m.rope_scaling;
        if (rs.type == "linear") {
            scaling = {{"rope_type", "linear"}, {"factor", rs.factor}};
        } else if (rs.type == "llama3") {
            scaling = {{"rope_type", "llama3"},
                       {"factor", rs.factor},
                       {"low_freq_factor", rs.low_freq_factor},
                       {"high_freq_factor", rs.high_freq_factor},
                       {"original_max_position_embeddings", rs.original_max_position_embeddings}};
        } else if (!rs.type.empty()) {
            throw InputError(
                str_cat("model.rope_scaling.type ", rs.type, ": no Hugging Face spelling known"));
        }
        j["rope_theta"] = m.rope_theta;
        j["rope_scaling"] = scaling;
        nlohmann::json params =
            scaling.is_null() ? nlohmann::json{{"rope_type", "default"}} : scaling;
        params["rope_theta"] = m.rope_theta;
        j["rope_parameters"] = params;
    }
    j["torch_dtype"] = "float32";  // 4.x
    j["dtype"] = "float32";        // 5.x
    return j;
}

}  // namespace tessera
