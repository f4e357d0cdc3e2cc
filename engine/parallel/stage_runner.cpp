// A pipeline stage's schedule walk (see stage_runner.h): the same code on CPU ranks, GPUs and the
// estimator's meta device.
#include "engine/parallel/stage_runner.h"

#include <algorithm>

#include "engine/core/error.h"

namespace tessera {

std::vector<Layer*> StageLayers::all() const {
    std::vector<Layer*> v;
    for (const auto& ch : chunks)
        for (const auto& l : ch) v.push_back(l.get());
    return v;
}

std::vector<StageChunk> StageLayers::views() const {
    std::vector<StageChunk> v(chunks.size());
    for (size_t c = 0; c < chunks.size(); ++c) {
        v[c].global = global[c];
        v[c].first_layer = lo[c];
        for (const auto& l : chunks[c]) v[c].layers.push_back(l.get());
    }
    return v;
}

std::pair<int, int> chunk_layer_range(const std::vector<int>& blocks_per_chunk, int g,
                                      int n_layers) {
    const int G = (int)blocks_per_chunk.size();
    TS_CHECK(g >= 0 && g < G, "chunk_layer_range: chunk ", g, " of ", G);
    int first = 1;  // the layer chunk g's blocks start at (layer 0 is the embedding)
    for (int k = 0; k < g; ++k) first += blocks_per_chunk[(size_t)k];
    return {g == 0 ? 0 : first, g == G - 1 ? n_layers : first + blocks_per_chunk[(size_t)g]};
}

StageLayers stage_layers_build(const ShardSpec& spec, const std::vector<int>& blocks_per_chunk,
                               int pp, int stage) {
    const int G = (int)blocks_per_chunk.size(), n_layers = spec.model.n_layers();
    TS_CHECK(pp >= 1 && G % pp == 0 && stage >= 0 && stage < pp, "stage_layers_build: ", G,
             " chunks over pp ", pp, ", stage ", stage);
    StageLayers st;
    Layer* embedding = nullptr;
    for (int g = stage; g < G; g += pp) {
        const auto [lo, hi] = chunk_layer_range(blocks_per_chunk, g, n_layers);
        st.global.push_back(g);
        st.lo.push_back(lo);
        st.hi.push_back(hi);
        auto& ch = st.chunks.emplace_back();
        for (int li = lo; li < hi; ++li) {
            ch.push_back(layer_create(spec, li, pp == 1 ? embedding : nullptr));
            if (li == 0) embedding = ch.back().get();
        }
    }
    return st;
}

namespace {
// A receive posted ahead. Evaluation's forwards run outside run() (never posted ahead): their
// keys are apart from training's.
std::tuple<int, int, int> posted_key(int dir, int c, int micro, bool eval) {
    return {dir, c, eval ? -1 - micro : micro};
}
}  // namespace

StageRunner::StageRunner(const ModelShape& model, std::vector<StageChunk> chunks, ParamStore& store,
                         StageEdges& edges, const Options& o)
    : model_(model), chunks_(std::move(chunks)), store_(store), edges_(edges), o_(o) {}

int StageRunner::run(const StageSchedule& sched,
                     const std::function<const Batch&(int micro)>& batch) {
    int in_flight = 0, max_in_flight = 0;
    // recv_ahead: the receiving actions of each direction in schedule order, the first of them
    // at or after the current action, and the next one not posted yet
    std::vector<size_t> recv_at[2];
    size_t first[2] = {0, 0}, unposted[2] = {0, 0};
    if (o_.recv_ahead)
        for (size_t k = 0; k < sched.size(); ++k)
            if (const int dir = recv_dir(sched[k]); dir >= 0) recv_at[dir].push_back(k);
    for (size_t k = 0; k < sched.size(); ++k) {
        const PipeAction& a = sched[k];
        const Batch& b = batch(a.micro);
        for (int dir : {0, 1}) {  // each direction keeps the next two receives from here posted
            const std::vector<size_t>& at = recv_at[dir];
            while (first[dir] < at.size() && at[first[dir]] < k) ++first[dir];
            for (; unposted[dir] < std::min(at.size(), first[dir] + 2); ++unposted[dir]) {
                const PipeAction& later = sched[at[unposted[dir]]];
                post(dir, later.chunk, later.micro, batch(later.micro), false);
            }
        }
        switch (a.kind) {
            case PipeAction::forward:
                forward(a.micro, a.chunk, b, false);
                max_in_flight = std::max(max_in_flight, ++in_flight);
                break;
            case PipeAction::backward:
                backward(a.micro, a.chunk, b);
                --in_flight;
                break;
            case PipeAction::backward_input:
                backward_input(a.micro, a.chunk, b);
                break;
            case PipeAction::backward_weight:
                backward_weight(a.micro, a.chunk, b);
                --in_flight;
                break;
        }
    }
    TS_CHECK(posted_.empty(), "StageRunner: ", posted_.size(),
             " receives posted ahead were not taken");
    return max_in_flight;
}

int StageRunner::recv_dir(const PipeAction& a) const {
    const int g = chunks_[a.chunk].global;
    if (a.kind == PipeAction::forward) return g > 0 ? 0 : -1;
    if (a.kind == PipeAction::backward || a.kind == PipeAction::backward_input)
        return g < o_.pp * o_.v - 1 ? 1 : -1;
    return -1;
}

void StageRunner::post(int dir, int c, int micro, const Batch& b, bool eval) {
    Tensor x = Tensor::empty(model_.hidden(b.batch_size, b.seq_len), MemCategory::activations,
                             o_.act, o_.device);
    edges_.recv_post(x, dir, chunks_[c].global, micro, eval);
    posted_.emplace(posted_key(dir, c, micro, eval), std::move(x));
}

Tensor StageRunner::receive(int dir, int c, int micro, const Batch& b, bool eval) {
    edges_.span_begin("recv", micro);
    const auto key = posted_key(dir, c, micro, eval);
    if (!posted_.count(key)) post(dir, c, micro, b, eval);
    auto it = posted_.find(key);
    Tensor x = std::move(it->second);
    posted_.erase(it);
    edges_.recv_wait(dir, chunks_[c].global, micro, eval);
    edges_.span_end(eval);
    return x;
}

void StageRunner::forward(int micro, int c, const Batch& b, bool eval) {
    StageChunk& ch = chunks_[c];
    const int G = o_.pp * o_.v;
    Tensor x;
    if (ch.global > 0) x = receive(0, c, micro, b, eval);
    edges_.span_begin("forward", micro);
    const bool offload = !eval && o_.offload_activations;
    for (size_t i = 0; i < ch.layers.size(); ++i) {
        Layer* l = ch.layers[i];
        store_.before_forward(l, i + 1 < ch.layers.size() ? ch.layers[i + 1] : nullptr);
        x = l->forward(eval ? -1 - micro : micro, std::move(x), b);
        edges_.layer_issued(ch.first_layer + int(i));
        store_.after_forward(l);
        if (offload) l->offload(micro);  // overlaps the next layer's forward on GPUs
    }
    edges_.span_end(eval);
    if (ch.global == G - 1)
        edges_.losses(x, eval);
    else
        edges_.send(std::move(x), 0, ch.global + 1, micro, eval);
    if (eval)
        for (Layer* l : ch.layers) l->drop(-1 - micro);
}

// The gradient of chunk c's output from the next stage (none for the last chunk: the head made
// its own in the forward).
Tensor StageRunner::recv_grad(int micro, int c, const Batch& b) {
    return chunks_[c].global < o_.pp * o_.v - 1 ? receive(1, c, micro, b, false) : Tensor();
}

// A layer's whole backward between the store's hooks; `prev` is the layer whose backward comes
// next (the store prefetches its parameters).
Tensor StageRunner::backward_layer(Layer* l, int layer, Layer* prev, int micro, Tensor dout,
                                   const Batch& b) {
    store_.before_backward(l, prev);
    dout = l->backward(micro, std::move(dout), b);
    backward_done(l, layer);
    return dout;
}

// A layer's weight gradients of this micro-batch are in: the last micro-batch's fire its
// gradient hooks (reductions).
void StageRunner::backward_done(Layer* l, int layer) {
    edges_.layer_issued(layer);
    store_.after_backward(l, ++backward_count_[l] == o_.n_micro);
}

void StageRunner::backward(int micro, int c, const Batch& b) {
    StageChunk& ch = chunks_[c];
    Tensor dout = recv_grad(micro, c, b);
    // Offloaded activations come back one layer ahead of the backward that needs them.
    const bool offload = o_.offload_activations;
    if (offload && !ch.layers.empty()) ch.layers.back()->fetch_begin(micro);
    edges_.span_begin("backward", micro);
    for (size_t i = ch.layers.size(); i-- > 0;) {
        Layer* l = ch.layers[i];
        if (offload) {
            if (i > 0) ch.layers[i - 1]->fetch_begin(micro);
            l->fetch_wait(micro);
        }
        dout = backward_layer(l, ch.first_layer + int(i), i > 0 ? ch.layers[i - 1] : nullptr, micro,
                              std::move(dout), b);
    }
    edges_.span_end(false);
    if (ch.global > 0) edges_.send(std::move(dout), 1, ch.global - 1, micro, false);
}

void StageRunner::backward_input(int micro, int c, const Batch& b) {
    StageChunk& ch = chunks_[c];
    Tensor dout = recv_grad(micro, c, b);
    edges_.span_begin("backward_input", micro);
    for (size_t i = ch.layers.size(); i-- > 0;) {
        Layer* l = ch.layers[i];
        Layer* prev = i > 0 ? ch.layers[i - 1] : nullptr;
        if (l->splits_backward()) {  // B reads the parameters: bound as for a forward
            store_.before_forward(l, prev);
            dout = l->backward_input(micro, std::move(dout), b);
            edges_.layer_issued(ch.first_layer + int(i));
            store_.after_forward(l);
        } else {
            dout = backward_layer(l, ch.first_layer + int(i), prev, micro, std::move(dout), b);
        }
    }
    edges_.span_end(false);
    if (ch.global > 0) edges_.send(std::move(dout), 1, ch.global - 1, micro, false);
}

void StageRunner::backward_weight(int micro, int c, const Batch& b) {
    StageChunk& ch = chunks_[c];
    edges_.span_begin("backward_weight", micro);
    // the layers in backward order: a gradient buffer two layers share (the tied vocabulary
    // table on one stage) sums their parts in backward()'s order
    Layer* next = nullptr;
    for (size_t i = ch.layers.size(); i-- > 0;) {
        Layer* l = ch.layers[i];
        if (!l->splits_backward()) continue;
        next = nullptr;
        for (size_t j = i; j-- > 0;)
            if (ch.layers[j]->splits_backward()) {
                next = ch.layers[j];
                break;
            }
        store_.before_backward(l, next);
        l->backward_weight(micro, b);
        backward_done(l, ch.first_layer + int(i));
    }
    edges_.span_end(false);
}

}  // namespace tessera
