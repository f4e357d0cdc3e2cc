// One pipeline stage's walk over its schedule (engine/parallel/schedule.h), written once for every
// device: the ranks' training loop (engine/train/parallel_trainer.cpp, CPU or CUDA) and the
// estimator's meta ranks (engine/plan/rank_sim.cpp) both run it. Per action it receives the
// chunk's input, runs the chunk's layers between the ParamStore's hooks (binding, ZeRO-3 gathers,
// gradient reductions), offloads and fetches saved activations, and hands the output on.
// What happens at a stage's edges (point-to-point messages, the losses, timeline spans) is the
// caller's: StageEdges.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/parallel/schedule.h"
#include "engine/parallel/tp_layers.h"
#include "engine/parallel/zero.h"

namespace tessera {

// A model chunk of this stage: global index chunk · pp + stage, its layers in forward order
// (owned by the caller); layers[i] is the model's layer first_layer + i (0 the embedding).
struct StageChunk {
    int global = 0;
    int first_layer = 0;
    std::vector<Layer*> layers;
};

// A pipeline stage's chunks of layers, owned: local chunk c is global chunk c·pp + stage and
// holds the model's layers [lo[c], hi[c]) (blocks per global chunk as given; the first chunk also
// holds the embedding, the last the head), each made by layer_create with the stage's spec. The
// GPT head shares the embedding's wte where both are on the stage (pp = 1). Built once, by the
// one function below, for the ranks' loop and for the estimator's meta ranks.
struct StageLayers {
    std::vector<int> global, lo, hi;                          // per local chunk
    std::vector<std::vector<std::unique_ptr<Layer>>> chunks;  // per local chunk, forward order
    std::vector<Layer*> all() const;                          // every layer, chunk by chunk
    std::vector<StageChunk> views() const;                    // what StageRunner walks
};
StageLayers stage_layers_build(const ShardSpec& spec, const std::vector<int>& blocks_per_chunk,
                               int pp, int stage);
// The model's layers [first, second) global chunk g holds when blocks_per_chunk splits a model of
// n_layers layers (the embedding, the blocks, the head): chunk 0 also holds the embedding, the
// last chunk the head.
std::pair<int, int> chunk_layer_range(const std::vector<int>& blocks_per_chunk, int g,
                                      int n_layers);

// A stage's edges. dir 0: activations (to the next stage), 1: gradients (to the previous).
class StageEdges {
  public:
    virtual ~StageEdges() = default;
    // Posts the receive into x (allocated by the runner: the hidden state) of what the neighbour
    // sends for global chunk g and micro-batch `micro`; x's storage stays put until recv_wait of
    // the same (dir, g, micro, eval) returns.
    virtual void recv_post(Tensor& x, int dir, int g, int micro, bool eval) = 0;
    virtual void recv_wait(int dir, int g, int micro, bool eval) = 0;
    // Hands x on to the neighbour's chunk g; x must live until the step's sends are done.
    virtual void send(Tensor x, int dir, int g, int micro, bool eval) = 0;
    // The last chunk's output: its per-target losses (N) (freed after).
    virtual void losses(const Tensor& x, bool eval) = 0;
    // Timeline spans: a receive, a chunk's forward or backward ("recv", "forward", "backward",
    // or split: "backward_input", "backward_weight").
    virtual void span_begin(const char* kind, int micro) { (void)kind, (void)micro; }
    virtual void span_end(bool eval) { (void)eval; }
    // The model's layer `layer` (StageChunk::first_layer + i) was issued: its forward, its
    // backward, or under zb-h1 its B or W part, in the action of the span begun last. The meta
    // device's clock for copies in flight; the ranks' per-layer times (LayerTimeRecord).
    virtual void layer_issued(int layer) { (void)layer; }
};

// Whether a stage posts its receives ahead of the actions that need them: each direction keeps
// its next two receives posted, so a message travels while the stage computes. On CPU ranks,
// where Gloo sends a message only once the receiver has posted its receive (a round trip on the
// critical path otherwise). Not on GPUs: NCCL runs a direction's sends and receives in order on
// one stream, where an early receive would hold back the sends queued behind it.
inline bool recv_ahead_on(bool gpu) {
    return !gpu;
}

class StageRunner {
  public:
    struct Options {
        int pp = 1, v = 1;
        int n_micro = 1;  // micro-batches per step (train.grad_accum; the last backward reduces)
        DType act = DType::f32;       // the hidden state's dtype
        Device device = Device::cpu;  // and where it lives
        bool offload_activations = false;
        bool recv_ahead = false;  // recv_ahead_on(): post each receive before it is needed
    };
    // chunks: this stage's chunks, local index c = chunk of the schedule's actions.
    StageRunner(const ModelShape& model, std::vector<StageChunk> chunks, ParamStore& store,
                StageEdges& edges, const Options& o);
    const std::vector<StageChunk>& chunks() const { return chunks_; }

    // A new step (micro-batches count from the first backward again).
    void step_begin() { backward_count_.clear(); }
    // Walks the step's schedule; batch(micro) supplies each micro-batch. Returns the most
    // micro-batches whose activations were saved at once (a micro-batch counts until its
    // backward, or its W).
    int run(const StageSchedule& sched, const std::function<const Batch&(int micro)>& batch);
    // One action: chunk c's forward (eval: forward-only, its saved tensors dropped) or backward.
    void forward(int micro, int c, const Batch& b, bool eval);
    void backward(int micro, int c, const Batch& b);
    // The backward split in two (zb-h1): B sends the input gradient on, W adds the weight
    // gradients; the gradient hooks (DP all-reduce, ZeRO reductions) fire after W. Layers that do
    // not split run their whole backward, with its hooks, in B's place.
    void backward_input(int micro, int c, const Batch& b);
    void backward_weight(int micro, int c, const Batch& b);

  private:
    Tensor recv_grad(int micro, int c, const Batch& b);
    Tensor backward_layer(Layer* l, int layer, Layer* prev, int micro, Tensor dout, const Batch& b);
    void backward_done(Layer* l, int layer);
    // The receive action `a` needs: 0 activations, 1 gradients, -1 none.
    int recv_dir(const PipeAction& a) const;
    // The hidden state of chunk c's receive in direction dir, posted ahead or now, once it is in.
    Tensor receive(int dir, int c, int micro, const Batch& b, bool eval);
    void post(int dir, int c, int micro, const Batch& b, bool eval);
    ModelShape model_;
    std::vector<StageChunk> chunks_;
    ParamStore& store_;
    StageEdges& edges_;
    Options o_;
    std::map<Layer*, int> backward_count_;
    std::map<std::tuple<int, int, int>, Tensor>
        posted_;  // (dir, chunk, micro): receives posted ahead
};

}  // namespace tessera
