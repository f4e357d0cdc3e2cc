#include "engine/model/gpt_import.h"

#include <cstdlib>
#include <vector>

#include "engine/core/error.h"

namespace tessera {

namespace {

// The entry for Tessera name `name`, trying the HF spellings; `transposed` tells whether it is
// stored (in, out) as HF's Conv1D does.
const SafetensorsFile::Entry* find_entry(const SafetensorsFile& f, const std::string& name,
                                         bool* transposed) {
    *transposed = false;
    if (const auto* e = f.find(name)) return e;
    const auto* e = f.find("transformer." + name);
    if (!e) return nullptr;
    bool conv1d = name.find("c_attn.weight") != std::string::npos ||
                  name.find("c_proj.weight") != std::string::npos ||
                  name.find("c_fc.weight") != std::string::npos;
    *transposed = conv1d;
    return e;
}

int64_t max_block_index(const SafetensorsFile& f) {
    int64_t n = -1;
    for (const auto& e : f.entries()) {
        std::string s = e.name;
        if (s.rfind("transformer.", 0) == 0) s = s.substr(12);
        if (s.rfind("h.", 0) != 0) continue;
        n = std::max<int64_t>(n, std::atoll(s.c_str() + 2));
    }
    return n;
}

}  // namespace

GptDims gpt_dims_from_safetensors(const SafetensorsFile& f) {
    bool tr;
    const auto* wte = find_entry(f, "wte.weight", &tr);
    const auto* wpe = find_entry(f, "wpe.weight", &tr);
    if (!wte || !wpe || wte->shape.size() != 2 || wpe->shape.size() != 2)
        throw InputError(str_cat(f.path(), ": not a GPT-2 checkpoint: expected wte.weight and "
                                           "wpe.weight matrices (or transformer.wte.weight ...)"));
    GptDims d;
    d.vocab = (int)wte->shape[0];
    d.d_model = (int)wte->shape[1];
    d.seq_len = (int)wpe->shape[0];
    d.n_layer = (int)(max_block_index(f) + 1);
    auto it = f.metadata().find("n_head");
    d.n_head = it != f.metadata().end() ? std::atoi(it->second.c_str()) : std::max(1, d.d_model / 64);
    if (d.n_layer < 1 || d.n_head < 1 || d.d_model % d.n_head)
        throw InputError(str_cat(f.path(), ": cannot infer the architecture (", d.n_layer,
                                 " layers, d_model ", d.d_model, ", ", d.n_head, " heads)"));
    return d;
}

void gpt_load_weights(GptModel& model, const SafetensorsFile& f) {
    std::vector<float> tmp;
    for (const ParamInfo& p : model.param_table().entries()) {
        bool transposed = false;
        const auto* e = find_entry(f, p.name, &transposed);
        if (!e)
            throw InputError(str_cat(f.path(), ": missing tensor '", p.name, "' (or transformer.",
                                     p.name, ") of shape ", shape_str(p.shape)));
        float* dst = model.params().f32() + p.offset;
        if (!transposed) {
            f.read_f32(e->name, p.shape, dst);
            continue;
        }
        // HF Conv1D: stored (in, out); Tessera keeps (out, in)
        Shape stored{p.shape[1], p.shape[0]};
        tmp.resize(p.numel);
        f.read_f32(e->name, stored, tmp.data());
        const int64_t rows = stored[0], cols = stored[1];
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = tmp[i * cols + j];
    }
}

}  // namespace tessera
