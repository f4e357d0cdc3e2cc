// Qt-free figures for the Model page (see model_facts.h).
#include "ui/model/model_facts.h"

#include <cstdio>
#include <exception>

#include "engine/model/gpt.h"
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
        // named as the file itself so relative paths (init_from, data) resolve as on load
        config_parse(config_to_yaml(cfg), cfg.source_path.empty() ? name : cfg.source_path);
        return "";
    } catch (const std::exception& e) {
        return e.what();
    }
}

const std::vector<std::string>& model_preset_names() {
    static const std::vector<std::string> names = config_preset_names();  // the engine's table
    return names;
}

void model_apply_preset(RunConfig& cfg, const std::string& preset) {
    // The preset's resolved dims come from the engine's own table (config_parse fills them in).
    const std::string dataset = preset == "mlp" ? "fashion-mnist" : "brown";
    const RunConfig p = config_parse("model:\n  preset: " + preset + "\ndata:\n  dataset: " + dataset + "\n",
                                     "preset " + preset);
    const bool was_mlp = cfg.model.preset == "mlp";
    cfg.model = p.model;
    const bool mlp = preset == "mlp";
    if (mlp) {
        if (cfg.data.dataset == "brown" || !cfg.data.train.empty()) cfg.data.dataset = "fashion-mnist";
        cfg.data.train.clear();
        cfg.data.val.clear();
        cfg.parallel.tp = cfg.parallel.pp = 1;
        cfg.parallel.virtual_stages = 1;
        cfg.parallel.stages.clear();
        cfg.parallel.recompute = {cfg.parallel.recompute.empty() ? "none" : cfg.parallel.recompute[0]};
    } else if (was_mlp && cfg.data.dataset == "fashion-mnist") {
        cfg.data.dataset = "brown";
    }
    if (!mlp) {
        // keep the pipeline layout possible for the new depth
        const ModelConfig& m = cfg.model;
        if (cfg.parallel.pp * cfg.parallel.virtual_stages > m.n_layer) {
            cfg.parallel.pp = 1;
            cfg.parallel.virtual_stages = 1;
        }
        if (cfg.parallel.recompute.size() != 1 && (int)cfg.parallel.recompute.size() != cfg.parallel.pp)
            cfg.parallel.recompute = {cfg.parallel.recompute.empty() ? "none" : cfg.parallel.recompute[0]};
        cfg.parallel.stages.clear();
        while (cfg.parallel.tp > 1 && m.n_head % cfg.parallel.tp != 0) cfg.parallel.tp /= 2;
    }
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
