#include "engine/model/model.h"

#include "engine/core/error.h"
#include "engine/model/gpt.h"
#include "engine/model/mlp.h"

namespace tessera {

void Model::allocate(ParamTable table) {
    table_ = std::move(table);
    params_ = Tensor::zeros({table_.total_numel()}, MemCategory::params);
    grads_ = Tensor::zeros({table_.total_numel()}, MemCategory::grads);
}

std::unique_ptr<Model> model_create(const ModelConfig& cfg, int vocab_size) {
    if (cfg.preset == "mlp") return std::make_unique<MlpModel>(mlp_sizes(cfg));
    GptDims d;
    d.n_layer = cfg.n_layer;
    d.n_head = cfg.n_head;
    d.d_model = cfg.d_model;
    d.seq_len = cfg.seq_len;
    d.vocab = vocab_size;
    TS_CHECK(d.n_layer > 0 && d.n_head > 0 && d.d_model > 0 && d.seq_len > 0,
             "model dimensions not resolved (n_layer ", d.n_layer, ", n_head ", d.n_head,
             ", d_model ", d.d_model, ", seq_len ", d.seq_len, ")");
    return std::make_unique<GptModel>(d);
}

}  // namespace tessera
