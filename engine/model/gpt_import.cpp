#include "engine/model/gpt_import.h"

#include <cstdlib>
#include <vector>

#include "engine/core/error.h"
#include "engine/model/hf_names.h"

namespace tessera {

namespace {

// The entry of GPT-2 parameter `name`: under its Tessera name, else under its Hugging Face one.
const SafetensorsFile::Entry* find_entry(const SafetensorsFile& f, const std::string& name) {
    const auto* e = f.find(name);
    return e ? e : f.find(gpt_hf_name(name));
}

int64_t max_block_index(const SafetensorsFile& f) {
    int64_t n = -1;
    for (const auto& e : f.entries()) {
        const std::string s = gpt_tessera_name(e.name);
        if (s.rfind("h.", 0) != 0) continue;
        n = std::max<int64_t>(n, std::atoll(s.c_str() + 2));
    }
    return n;
}

}  // namespace

GptDims gpt_dims_from_safetensors(const SafetensorsFile& f) {
    const auto* wte = find_entry(f, "wte.weight");
    const auto* wpe = find_entry(f, "wpe.weight");
    if (!wte || !wpe || wte->shape.size() != 2 || wpe->shape.size() != 2)
        throw InputError(str_cat(f.path(),
                                 ": not a GPT-2 checkpoint: expected wte.weight and "
                                 "wpe.weight matrices (or transformer.wte.weight ...)"));
    GptDims d;
    d.vocab = (int)wte->shape[0];
    d.d_model = (int)wte->shape[1];
    d.seq_len = (int)wpe->shape[0];
    d.n_layer = (int)(max_block_index(f) + 1);
    auto it = f.metadata().find("n_head");
    d.n_head =
        it != f.metadata().end() ? std::atoi(it->second.c_str()) : std::max(1, d.d_model / 64);
    if (d.n_layer < 1 || d.n_head < 1 || d.d_model % d.n_head)
        throw InputError(str_cat(f.path(), ": cannot infer the architecture (", d.n_layer,
                                 " layers, d_model ", d.d_model, ", ", d.n_head, " heads)"));
    return d;
}

void gpt_load_weights(GptModel& model, const SafetensorsFile& f) {
    std::vector<float> tmp;
    for (const ParamInfo& p : model.param_table().entries()) {
        const auto* e = find_entry(f, p.name);
        if (!e)
            throw InputError(str_cat(f.path(), ": missing tensor '", p.name, "' (or ",
                                     gpt_hf_name(p.name), ") of shape ", shape_str(p.shape)));
        float* dst = model.params().f32() + p.offset;
        const HfTensor t = gpt_hf_tensor(p);
        if (e->name == p.name || !t.transposed) {
            f.read_f32(e->name, p.shape, dst);
            continue;
        }
        tmp.resize(p.numel);
        f.read_f32(e->name, t.shape, tmp.data());
        hf_transpose(tmp.data(), t.shape[0], t.shape[1], dst);
    }
}

}  // namespace tessera
