// Qt-free figures for the Model page (see model_facts.h).
#include "ui/model/model_facts.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>

#include "engine/config/hf_config.h"
#include "engine/core/error.h"
#include "engine/model/gpt.h"
#include "engine/model/hf_import.h"
#include "engine/model/mlp.h"
#include "engine/parallel/tp_layers.h"
#include "engine/plan/estimator.h"

namespace tessera {

// ----------------------------------------------------------------------------
// layers

std::vector<LayerSpec> model_layer_specs(const ModelConfig& m) {
    if (m.preset == "mlp") {
        for (int h : m.hidden)
            if (h < 1) return {};
        return mlp_layer_specs(mlp_sizes(m));  // specs only: no parameter buffer allocated
    }
    if (m.n_layer < 1 || m.n_head < 1 || m.d_model < 1 || m.seq_len < 1) return {};
    if (model_family(m.preset) == "llama") {
        if (m.n_kv_head < 1 || m.head_dim < 1 || m.ffn < 1 || m.vocab_size < 1) return {};
        return model_shape(m, plan_vocab_size(m)).layer_specs();
    }
    if (m.d_model % m.n_head != 0) return {};
    GptDims d{m.n_layer, m.n_head, m.d_model, m.seq_len, plan_vocab_size(m)};
    return gpt_layer_specs(d);
}

LayerTotals model_layer_totals(const std::vector<LayerSpec>& specs) {
    LayerTotals t;
    for (const auto& s : specs) {
        t.params += s.params;
        t.activation_bytes += s.activation_bytes;
        t.flops_per_token += s.flops_per_token;
    }
    return t;
}

// ----------------------------------------------------------------------------
// what each layer is made of

namespace {

std::string dims(int64_t rows, int64_t cols) {
    return str_cat(rows, " × ", cols);
}

std::string count(int64_t n) {
    return format_count((double)n);
}

std::string rope_text(const ModelConfig& m) {
    std::string t = "rotary θ " + format_number(m.rope_theta);
    if (!m.rope_scaling.type.empty())
        t += str_cat(", ", m.rope_scaling.type, " ×", format_number(m.rope_scaling.factor));
    return t;
}

// one Llama-family layer: RMSNorm, grouped-query attention, RMSNorm, SwiGLU (shapes as
// llama_param_table lays them out)
LayerStructure llama_structure(const ModelConfig& m, const LayerSpec& s) {
    const int64_t C = m.d_model, Q = (int64_t)m.n_head * m.head_dim,
                  K = (int64_t)m.n_kv_head * m.head_dim, F = m.ffn, V = plan_vocab_size(m);
    if (s.kind == "embedding")
        return {str_cat("tokens ", dims(V, C),
                        m.tie_embeddings ? ", tied to the head" : ", untied (own lm_head)",
                        " · positions: ", rope_text(m)),
                str_cat("embed_tokens ", dims(V, C), " = ", count(V * C), "\npositions: no table, ",
                        rope_text(m), " inside attention")};
    if (s.kind == "head") {
        const std::string norm = str_cat("RMSNorm (model.norm) ", C, " = ", count(C));
        if (m.tie_embeddings)
            return {str_cat("RMSNorm · tied to the embedding (", dims(V, C), ")"),
                    norm + "\nlogits through embed_tokens: no parameters of its own"};
        return {str_cat("RMSNorm · lm_head ", dims(V, C)),
                str_cat(norm, "\nlm_head ", dims(V, C), " = ", count(V * C))};
    }
    const int64_t attn = (Q + 2 * K) * C + (m.qkv_bias ? Q + 2 * K : 0) +
                         (m.qk_norm ? 2 * m.head_dim : 0) + Q * C,
                  mlp = 3 * F * C;
    return {str_cat("RMSNorm · attention ", m.n_head, " heads / ", m.n_kv_head, " kv, head_dim ",
                    m.head_dim, m.qkv_bias ? ", qkv bias" : "", m.qk_norm ? ", q/k norm" : "",
                    " · RMSNorm · SwiGLU ffn ", m.ffn),
            str_cat("attention: q ", dims(Q, C), ", k and v ", dims(K, C), " each, o ", dims(C, Q),
                    m.qkv_bias ? ", q/k/v biases" : "",
                    m.qk_norm ? str_cat(", q/k norm 2 × ", m.head_dim) : "", " = ", count(attn),
                    "\nMLP (SwiGLU): gate and up ", dims(F, C), " each, down ", dims(C, F), " = ",
                    count(mlp), "\nRMSNorm × 2: ", 2 * C)};
}

// one GPT-2 layer: LayerNorm, attention, LayerNorm, GELU MLP (gpt_param_table)
LayerStructure gpt_structure(const ModelConfig& m, const LayerSpec& s) {
    const int64_t C = m.d_model, T = m.seq_len, V = plan_vocab_size(m);
    if (s.kind == "embedding")
        return {str_cat("wte ", dims(V, C), ", tied to the head · wpe ", dims(T, C)),
                str_cat("wte (tokens) ", dims(V, C), " = ", count(V * C), "\nwpe (positions) ",
                        dims(T, C), " = ", count(T * C))};
    if (s.kind == "head")
        return {str_cat("LayerNorm · tied to wte (", dims(V, C), ")"),
                str_cat("LayerNorm (ln_f) = ", count(2 * C),
                        "\nlogits through wte: no parameters of its own")};
    return {str_cat("LayerNorm · attention ", m.n_head, " heads, head_dim ",
                    m.n_head ? m.d_model / m.n_head : 0, " · LayerNorm · GELU MLP ", 4 * C),
            str_cat("attention: qkv ", dims(C, 3 * C), ", proj ", dims(C, C),
                    " + biases = ", count(4 * C * C + 4 * C), "\nMLP (GELU): fc ", dims(C, 4 * C),
                    ", proj ", dims(4 * C, C), " + biases = ", count(8 * C * C + 5 * C),
                    "\nLayerNorm × 2: ", 4 * C)};
}

}  // namespace

std::vector<LayerStructure> model_layer_structure(const ModelConfig& m,
                                                  const std::vector<LayerSpec>& specs) {
    std::vector<LayerStructure> out;
    const bool llama = model_family(m.preset) == "llama";
    for (size_t i = 0; i < specs.size(); ++i) {
        const LayerSpec& s = specs[i];
        if (m.preset == "mlp") {
            const std::vector<int> w = mlp_sizes(m);
            const bool last = i + 1 == specs.size();
            out.push_back({str_cat("linear ", w[i], " → ", w[i + 1],
                                   last ? " · softmax cross-entropy" : " · ReLU"),
                           str_cat("weight ", dims(w[i + 1], w[i]), " + bias ", w[i + 1], " = ",
                                   count(s.params))});
        } else {
            out.push_back(llama ? llama_structure(m, s) : gpt_structure(m, s));
        }
    }
    return out;
}

ModelMemory model_memory(int64_t p) {
    ModelMemory m;
    m.fp32_weights = 4 * p;
    m.bf16_weights = 2 * p;
    m.fp32_weights_grads = 8 * p;
    m.bf16_weights_grads = 4 * p;
    m.fp32_training = 16 * p;  // 4 weights + 4 grads + 8 AdamW (m, v)
    m.bf16_training = 16 * p;  // 2 weights + 2 grads + 4 fp32 master + 8 AdamW (m, v)
    return m;
}

// ----------------------------------------------------------------------------
// validation and presets

std::string model_check_config(const RunConfig& cfg, const std::string& name) {
    try {
        // named as the file itself so relative paths (init_from, data) resolve as on load; the
        // data may not be prepared yet
        config_parse(config_to_yaml(cfg), cfg.source_path.empty() ? name : cfg.source_path, {}, "",
                     ConfigFiles::may_be_missing);
        return "";
    } catch (const std::exception& e) {
        return e.what();
    }
}

const std::vector<std::string>& model_preset_names() {
    static const std::vector<std::string> names = config_preset_names();  // the engine's table
    return names;
}

namespace {

// The fields that must follow a new model (cfg.model already set; `was_mlp`: the model before):
// the MLP reads fashion-mnist on one rank; a transformer reads text and keeps a layout its heads,
// kv heads and depth can split.
void fit_to_model(RunConfig& cfg, bool was_mlp) {
    const ModelConfig& m = cfg.model;
    if (m.preset == "mlp") {
        if (cfg.data.dataset == "brown" || !cfg.data.train.empty())
            cfg.data.dataset = "fashion-mnist";
        cfg.data.train.clear();
        cfg.data.val.clear();
        cfg.parallel.tp = cfg.parallel.pp = 1;
        cfg.parallel.virtual_stages = 1;
        cfg.parallel.stages.clear();
        cfg.parallel.recompute = {cfg.parallel.recompute.empty() ? "none"
                                                                 : cfg.parallel.recompute[0]};
        return;
    }
    if (was_mlp && cfg.data.dataset == "fashion-mnist") cfg.data.dataset = "brown";
    // keep the pipeline layout possible for the new depth
    if (cfg.parallel.pp * cfg.parallel.virtual_stages > m.n_layer) {
        cfg.parallel.pp = 1;
        cfg.parallel.virtual_stages = 1;
    }
    if (cfg.parallel.recompute.size() != 1 && (int)cfg.parallel.recompute.size() != cfg.parallel.pp)
        cfg.parallel.recompute = {cfg.parallel.recompute.empty() ? "none"
                                                                 : cfg.parallel.recompute[0]};
    cfg.parallel.stages.clear();
    const bool llama = model_family(m.preset) == "llama";
    auto splits = [&](int tp) {
        return m.n_head % tp == 0 && (!llama || (m.n_kv_head % tp == 0 && m.ffn % tp == 0));
    };
    while (cfg.parallel.tp > 1 && !splits(cfg.parallel.tp)) cfg.parallel.tp /= 2;
}

}  // namespace

void model_apply_preset(RunConfig& cfg, const std::string& preset) {
    // The preset's resolved dims come from the engine's own table (config_parse fills them in).
    const std::string dataset = preset == "mlp" ? "fashion-mnist" : "brown";
    const RunConfig p =
        config_parse("model:\n  preset: " + preset + "\ndata:\n  dataset: " + dataset + "\n",
                     "preset " + preset);
    const bool was_mlp = cfg.model.preset == "mlp";
    cfg.model = p.model;
    fit_to_model(cfg, was_mlp);
}

std::vector<std::string> model_series_names() {
    std::vector<std::string> series;
    for (const auto& p : model_preset_names()) {
        const std::string s = config_preset_series(p);
        if (std::find(series.begin(), series.end(), s) == series.end()) series.push_back(s);
    }
    return series;
}

std::vector<std::string> model_series_presets(const std::string& series) {
    std::vector<std::string> presets;
    for (const auto& p : model_preset_names())
        if (config_preset_series(p) == series) presets.push_back(p);
    return presets;
}

// ----------------------------------------------------------------------------
// Hugging Face folders

namespace {

std::string folder_architecture(const std::string& path) {
    const nlohmann::json j = hf_read_json((std::filesystem::path(path) / "config.json").string(),
                                          "expected the folder's config.json");
    if (j.contains("architectures") && j["architectures"].is_array() &&
        !j["architectures"].empty() && j["architectures"][0].is_string())
        return j["architectures"][0].get<std::string>();
    return "";
}

}  // namespace

ModelFolder model_read_folder(const RunConfig& cfg, const std::string& dir) {
    namespace fs = std::filesystem;
    const std::string path = config_resolve_path(cfg, dir);
    std::error_code ec;
    if (!fs::is_directory(path, ec))
        throw InputError(str_cat(path,
                                 ": expected a Hugging Face model folder (config.json and "
                                 "safetensors weights), found ",
                                 fs::exists(path, ec) ? "a file" : "nothing"));
    ModelFolder f;
    f.model.init_from = dir;
    hf_config_apply(path, f.model);  // seq_len 0: the folder's own, as the engine reads it
    // the weights the run will load: the shards' index, else the one file (the engine's message)
    if (!fs::exists(fs::path(path) / "model.safetensors.index.json", ec)) hf_weights_file(path);
    f.architecture = folder_architecture(path);
    return f;
}

std::string model_folder_architecture(const RunConfig& cfg) {
    if (!cfg.model.from_folder) return "";
    try {
        return folder_architecture(config_resolve_path(cfg, cfg.model.init_from));
    } catch (const std::exception&) {
        return "";  // the validation line says what is wrong with the folder
    }
}

void model_apply_folder(RunConfig& cfg, const ModelConfig& folder_model) {
    const bool was_mlp = cfg.model.preset == "mlp";
    cfg.model = folder_model;
    fit_to_model(cfg, was_mlp);
}

// ----------------------------------------------------------------------------
// formatting

static std::string fmt(const char* f, double v, const char* unit) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v, unit);
    return buf;
}

std::string format_count(double n) {
    if (n >= 1e9) return fmt("%.2f %s", n / 1e9, "B");
    if (n >= 1e6) return fmt("%.2f %s", n / 1e6, "M");
    if (n >= 1e4) return fmt("%.1f %s", n / 1e3, "K");
    return fmt("%.0f%s", n, "");
}

std::string format_number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    std::string t = buf;
    const size_t e = t.find("e+");
    if (e != std::string::npos) t = t.substr(0, e + 1) + std::to_string(std::stoi(t.substr(e + 2)));
    return t;
}

std::string format_bytes(double b) {
    if (b >= 1024.0 * 1024 * 1024) return fmt("%.2f %s", b / (1024.0 * 1024 * 1024), "GiB");
    if (b >= 1024.0 * 1024) return fmt("%.1f %s", b / (1024.0 * 1024), "MiB");
    if (b >= 1024.0) return fmt("%.1f %s", b / 1024.0, "KiB");
    return fmt("%.0f %s", b, "B");
}

std::string format_flops(double f) {
    if (f >= 1e12) return fmt("%.2f %s", f / 1e12, "TFLOP");
    if (f >= 1e9) return fmt("%.2f %s", f / 1e9, "GFLOP");
    if (f >= 1e6) return fmt("%.2f %s", f / 1e6, "MFLOP");
    if (f >= 1e3) return fmt("%.1f %s", f / 1e3, "KFLOP");
    return fmt("%.0f %s", f, "FLOP");
}

}  // namespace tessera
