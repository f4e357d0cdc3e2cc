// The parallel runtime's layers, written once for every device: GPT-2 (Megatron style, this
// file's tp_layers.cpp) and the MLP classifier (mlp_layers.cpp). They compute through LayerOps (the
// CPU kernels, the CUDA kernels, or the meta device on which the estimator replays them). Each
// layer holds its tensor-parallel shard of the parameters (attention QKV and MLP fc
// column-parallel, attention and MLP output projections row-parallel, vocab-parallel embedding and
// cross-entropy) and keeps the saved activations of every micro-batch in flight, with per-layer
// recompute (none / selective / full) and optional activation offload to a host pool. With tp = 1
// on the CPU the math is GptModel's (MlpModel's).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/model/gpt.h"
#include "engine/model/llama.h"
#include "engine/model/mlp.h"
#include "engine/model/model.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/layer_ops.h"

namespace tessera {

enum class Recompute { none, selective, full };
Recompute recompute_parse(const std::string& s);

// Where a local parameter's elements sit in the full (single-rank) tensor: the local tensor is
// the rows of `row_blocks` (first global row, count), restricted to columns [col0, col1).
// 1-D tensors are viewed as (n, 1).
struct ParamShard {
    int global_index = 0;  // position in gpt_param_table(dims): the init stream
    Shape global_shape;
    std::vector<std::pair<int64_t, int64_t>> row_blocks;
    int64_t col0 = 0, col1 = 1;
    // global flat index of local element i
    int64_t global_offset(int64_t i) const;
};

class Layer {
  public:
    virtual ~Layer();
    const std::string& name() const { return name_; }
    const ParamTable& table() const { return table_; }
    const std::vector<ParamShard>& shards() const { return shards_; }
    // Where each parameter and its gradient live (one pointer per table entry), bound by the
    // owner before every forward/backward (ZeRO-3 gathers parameters just in time).
    std::vector<float*> param_ptr, grad_ptr;
    // Marks, one a parameter, that its gradient buffer holds no values yet (set by the store
    // for a buffer it left unzeroed: split gradients of a parameter the layer declares
    // grad_written_whole): the step's first write overwrites it (first_write), later ones add.
    // Empty: every buffer holds values to add to.
    std::vector<uint8_t> grad_unwritten;
    // Whether the backward writes parameter i's whole gradient in one product (the weight
    // gradients' GEMMs), so that a buffer it has not written yet need not be zeroed first.
    virtual bool grad_written_whole(int i) const {
        (void)i;
        return false;
    }
    // The store's bf16 image of each parameter where it keeps one (ZeRO-1/2 gathering in bf16
    // through a symmetric buffer), else null: layers in bf16 compute with it instead of casting
    // a copy of param_ptr (whose other DP ranks' slices the store then leaves stale).
    std::vector<const void*> param16_ptr;
    int param_index(const std::string& n) const;
    // The layer's own copy of its parameters in the activation dtype (see w()), where the
    // optimizer keeps it current: the store sets copy_kept_by_optimizer when its AdamW updates
    // every parameter of the layer on the device, writes each updated value into the copy too
    // (weights_copy: parameter i's place in it, null until the first forward made it) and then
    // says that the copy holds the new version (weights_copy_written), so no step casts it
    // again. The copy's first cast is then the run's setup, not a step's work: the estimator's
    // op trace leaves it out.
    bool copy_kept_by_optimizer = false;
    void* weights_copy(int i);
    void weights_copy_written(uint64_t version);

    // x: the input hidden state (B, T, C) — ownership moves into the layer (saved for backward);
    // null for the embedding. Returns the output (B, T, C); the head returns its per-token losses
    // (N).
    virtual Tensor forward(int micro, Tensor x, const Batch& batch) = 0;
    // dout: gradient of the output (B, T, C) (empty for the head, whose forward made the
    // gradient of its loss). Returns the gradient of the input (empty for the embedding).
    // grads += this micro-batch's.
    virtual Tensor backward(int micro, Tensor dout, const Batch& batch) = 0;
    // The same backward split in two (schedule zb-h1): backward_input (B) returns the gradient of
    // the input and keeps what backward_weight (W) reads; W then adds micro's weight gradients
    // (grads +=, each buffer as backward() would: B then W gives backward()'s bits on the CPU).
    // B reads the parameters only, W the gradient buffers only. Layers whose splits_backward()
    // is false compute everything in backward() (the runner calls it in B's place).
    virtual bool splits_backward() const { return false; }
    virtual Tensor backward_input(int micro, Tensor dout, const Batch& batch);
    virtual void backward_weight(int micro, const Batch& batch);
    // Cached decoding (tessera sample, one rank holding the whole model; the embedding runs its
    // forward): x (B, n, C) the input for n new tokens per sequence at positions pos0 ..
    // pos0 + n; returns the output (B, n, C), the head the logits (rows, padded vocabulary) of
    // each sequence's last token, or of every token with all_rows. A block keeps its keys and
    // values for max_len positions. Layers without it throw.
    struct DecodeStep {
        int B = 1, n = 1, pos0 = 0, max_len = 0;
        bool all_rows = false;
    };
    virtual Tensor decode(Tensor x, const DecodeStep& st);
    // Activation offload: move micro's saved tensors to the host pool (right after the layer's
    // forward) and back (fetch_begin one layer ahead of the backward, fetch_wait just before it).
    // On GPUs the copies run on the copy stream into pinned memory, overlapped with compute; a
    // device buffer is released once its copy has finished. On the CPU they are plain copies.
    void offload(int micro);
    void fetch_begin(int micro);
    void fetch_wait(int micro);
    void drop(int micro) {  // forget a forward-only micro-batch (evaluation)
        saved_.erase(micro);
        offloaded_.erase(micro);
    }
    int64_t saved_bytes(int micro) const;
    // The head on a pp = 1 rank shares the embedding's wte: that embedding layer, else null.
    virtual Layer* tied_embedding() const { return nullptr; }
    // Bumped by the parameter store whenever parameter values change (an optimizer step, a
    // ZeRO-3 gather): layers in bf16 recast their weight copies when it moves.
    uint64_t weights_version = 0;
    // A classifier's head counts the evaluation rows it answers right here (the runner reads
    // and resets it); other layers leave it 0.
    int64_t eval_correct = 0;
    Device device = Device::cpu;  // where the layer's tensors live (ops.device())

  protected:
    explicit Layer(LayerOps& ops) : device(ops.device()), ops_(ops) {}
    // Whether writing parameter i's gradient now overwrites it (its buffer's first write of the
    // step, grad_unwritten), clearing the mark.
    bool first_write(int i) {
        if (i >= (int)grad_unwritten.size() || !grad_unwritten[i]) return false;
        grad_unwritten[i] = 0;
        return true;
    }
    float* g(const std::string& n) { return grad_ptr[param_index(n)]; }
    // Parameter i's weights as the kernels read them (activation dtype): the fp32 masters, the
    // store's bf16 image, or the layer's bf16 copy of its parameters (made on first use in the
    // params category, recast when weights_version or the storage moves).
    const void* w(int i);
    // A batch's token ids (targets: the targets) where the kernels read them: the batch itself,
    // or a device buffer per micro-batch slot, kept across steps.
    const int* tokens(int micro, const Batch& b, bool targets);
    // Keeps micro's saved tensors (index 0: the block's input) as the recompute policy says:
    // full keeps the input only; selective drops the cheap activation output `cheap` and, where
    // the device keeps attention probabilities, `scores` (both recomputed in the backward).
    void save_for_backward(int micro, std::vector<Tensor> s, Recompute rc, int cheap, int scores);
    // The attention whose probabilities a block keeps: micro-batch B × T, this rank's query width
    // Cq, its heads NH and key/value heads KV.
    struct AttentionShape {
        int B, T, Cq, NH, KV;
    };
    // save_for_backward's inverse, what a block's backward (or B) reads: micro's saved tensors
    // with what the recompute policy dropped computed again. Full: `forward` from the input
    // (index 0) gives them all again. Selective: the attention probabilities at `scores` from the
    // queries/keys/values at `qkv`, where the device keeps them; then `cheap` computes the
    // cheap activation again.
    std::vector<Tensor>& saved_recomputed(int micro, Recompute rc,
                                          const std::function<std::vector<Tensor>(Tensor)>& forward,
                                          int scores, int qkv, const AttentionShape& att,
                                          const std::function<void(std::vector<Tensor>&)>& cheap);
    Tensor act(Shape s) {
        return Tensor::empty(std::move(s), MemCategory::activations, ops_.traits.act, device);
    }
    Tensor work(Shape s) {
        return Tensor::empty(std::move(s), MemCategory::workspace, ops_.traits.act, device);
    }
    Tensor f32(Shape s, MemCategory c) {
        return Tensor::empty(std::move(s), c, DType::f32, device);
    }
    LayerOps& ops_;
    // Registers a parameter: local shape and shard description.
    void add_param(const ParamTable& global, const std::string& gname, Shape local,
                   std::vector<std::pair<int64_t, int64_t>> row_blocks, int64_t col0, int64_t col1);
    std::string name_;
    ParamTable table_;
    std::vector<ParamShard> shards_;
    std::map<int, std::vector<Tensor>> saved_;   // micro -> saved tensors (layer-specific order)
    std::map<int, std::vector<Tensor>> wsaved_;  // micro -> what B keeps for W (output gradients)
    // micro's saved tensors for its backward (or B); an Error naming the layer when its forward
    // has not run or they are still offloaded.
    std::vector<Tensor>& saved_at(int micro);
    // What micro's B kept for its W; an Error naming the layer when B has not run.
    std::vector<Tensor>& w_saved_at(int micro);
    // Forgets micro's saved tensors (after its backward, or its W).
    void release(int micro) {
        saved_.erase(micro);
        wsaved_.erase(micro);
        offloaded_.erase(micro);
    }
    std::map<int, bool> offloaded_;

  private:
    std::vector<void*> move_saved(int micro, MemCategory from, MemCategory to, Device dev);
    std::map<int, std::vector<void*>> fetching_;  // micro -> events the backward must wait for
    Tensor cache_;                                // bf16 copy of the parameters (see w())
    std::vector<int64_t> cache_off_;
    std::vector<float*> cache_src_;
    uint64_t cache_version_ = 0;
    std::map<std::pair<int, bool>, TokenSlot> tokens_;
};

// What a model is to the runtime: the family and the sizes its layers are built from. The global
// layer list is the input layer (GPT's embedding, the MLP's first linear layer), then the blocks
// a pipeline splits, then the head (the loss): n_blocks() + 2 layers.
struct ModelShape {
    enum class Family { gpt, llama, mlp };
    Family family = Family::gpt;
    GptDims gpt;             // gpt
    LlamaDims llama;         // llama
    std::vector<int> sizes;  // mlp: input, hidden..., classes (mlp_sizes)
    int n_layers() const {
        return family == Family::gpt     ? gpt.n_layer + 2
               : family == Family::llama ? llama.n_layer + 2
                                         : (int)sizes.size() - 1;
    }
    int n_blocks() const { return n_layers() - 2; }
    // The single-rank table (init stream, checkpoints), built on first use and shared by the
    // shape's copies (every layer of a rank asks for it): set the fields before asking.
    const ParamTable& param_table() const;
    std::vector<LayerSpec> layer_specs() const;  // per global layer, as the Model's
    int targets_per_sample() const {
        return family == Family::gpt ? gpt.seq_len : family == Family::llama ? llama.seq_len : 1;
    }
    int d_model() const {
        return family == Family::gpt ? gpt.d_model : llama.d_model;
    }  // transformers
    // the head computes with the embedding's table (its copy on a pp > 1 last stage)
    bool tied() const {
        return family == Family::gpt || (family == Family::llama && llama.tie_embeddings);
    }
    int vocab() const { return family == Family::gpt ? gpt.vocab : llama.vocab; }  // transformers
    // One line for people: "GPT 12 layers, 12 heads, d_model 768, seq 1024, vocab 50257, N
    // parameters".
    std::string describe() const;
    // What a pipeline stage hands the next: the hidden state of B samples of T positions.
    Shape hidden(int B, int T) const;

  private:
    mutable std::shared_ptr<const ParamTable> table_;
};
// The shape of the model a config describes (`vocab`: GPT's tokenizer size).
ModelShape model_shape(const ModelConfig& m, int vocab);

struct ShardSpec {
    ModelShape model;
    TpGroup tp;
    Recompute recompute = Recompute::none;
    LayerOps* ops = nullptr;  // the device (null: the CPU)
    float loss_scale = 1.0f;  // d loss / d (per-token loss): the head's gradient is made in
                              // its forward pass
};

// Layer index in the global layer list (GPT: 0 = embedding, 1..L = blocks, L+1 = head; the
// MLP: fc.<index>). `tied_embedding`: the embedding layer on this rank whose wte the head
// shares (GPT, pp = 1), or null (the head then holds its own copy of its wte shard, kept equal
// through the embedding group).
std::unique_ptr<Layer> layer_create(const ShardSpec& spec, int index, Layer* tied_embedding);

// Every layer of the model on one rank (spec.tp of size 1, no pipeline; the head tied to the
// embedding where the model ties them), bound to flat buffers laid out as the model's
// param_table(): `params`, and `grads` (null: the layers have no gradient buffers). For the
// sampler's decoder and tests; training binds through the ParamStore.
std::vector<std::unique_ptr<Layer>> layers_create_bound(const ShardSpec& spec, float* params,
                                                        float* grads);
// The MLP's layers (mlp_layers.cpp) and the Llama family's blocks (llama_layers.cpp), through
// layer_create.
std::unique_ptr<Layer> mlp_layer_create(const ShardSpec& spec, int index);
std::unique_ptr<Layer> llama_block_create(const ShardSpec& spec, int block);
// A vocabulary table a head may share with the embedding (ParamStore keeps it in its own unit).
bool vocab_embedding_name(const std::string& param_name);

// The vocabulary rows [first, last) tensor-parallel rank r of t holds (uneven splits allowed).
std::pair<int64_t, int64_t> vocab_shard(int64_t vocab, int r, int t);

}  // namespace tessera
