#include "engine/parallel/zero.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/kernels/cpu/adamw.h"
#include "engine/kernels/cpu/elementwise.h"
#include "engine/kernels/cpu/threads.h"
#include "engine/model/params.h"
#include "engine/parallel/device_ops.h"

namespace tessera {

struct ParamStore::Unit {
    Layer* layer = nullptr;
    std::vector<int> params;      // indices in layer->table()
    std::vector<int64_t> offset;  // element offset of each param within the unit
    int64_t len = 0, S = 0, pad = 0;
    int64_t shard_begin = 0, shard_end = 0;  // this DP rank's slice [begin, end) within len
    bool is_wte = false, tied_copy = false;
    Tensor full, shard, grad_full, grad_shard, m, v;
    std::shared_future<void> gathering;
    bool gather_posted = false;
    // ZeRO-1/2 on NCCL: the in-place all-gather of `full` (or of its bf16 image `full16`) after
    // the optimizer step, in flight until the unit's layer is next bound (see settle)
    std::unique_ptr<CommRequest> gathered;
    Tensor full16;
    uint16_t* sym16 = nullptr;  // this unit's place in the symmetric bf16 buffer, if any
    float* gsym = nullptr;      // zero 0/1: its full gradient in the symmetric fp32 buffer, if any
    float* gstage = nullptr;    // and the staging part the other ranks' slices arrive in
    // Optimizer offload on a GPU (ParamStore::host_master_): the fp32 master values of the range
    // this rank updates and their gradients, in pinned host memory beside m and v (same indexing);
    // the gradients' download in flight (an event) until the optimizer step, and whether it was
    // issued this step (download_grads)
    Tensor master, host_grad;
    void* grad_download = nullptr;
    bool grads_down = false;
    // after an optimizer step, until the next forward first needs the unit (land_update): its
    // host update (on the store's host thread; invalid where there was nothing to update)
    std::shared_future<void> updating;
    bool update_pending = false;
    // ... and with layers in bf16 (ZeRO 0-2), the device keeps only the bf16 image (`full16`,
    // persistent, or the symmetric sym16), no fp32 `full`
    float* grads() { return gsym ? gsym : grad_full.f32(); }  // null when there is none
    // Gradients split (ParamStore::split_grads): the buffers of ParamStore::grad_parts, from the
    // unit's first backward of a step to the next step's start (allocate_grads), and where each
    // parameter's gradient lies in them
    bool split = false;
    std::vector<std::vector<int>> part_params;
    std::vector<Tensor> grad_parts;
    std::vector<float*> grad_at;
    // parameter k's gradient (null when there is none yet)
    float* grad_of(size_t k) {
        if (split) return grad_at.empty() ? nullptr : grad_at[k];
        float* g = grads();
        return g ? g + offset[k] : nullptr;
    }
    uint16_t* image16() { return sym16 ? sym16 : static_cast<uint16_t*>(full16.data()); }
};

namespace {

bool replicated(const ParamShard& s) {
    int64_t rows = 0;
    for (auto& b : s.row_blocks) rows += b.second;
    int64_t grows = s.global_shape.empty() ? 1 : s.global_shape[0];
    int64_t gcols = s.global_shape.size() == 2 ? s.global_shape[1] : 1;
    return rows == grows && s.col0 == 0 && s.col1 == gcols;
}

// Calls f(k, info, lo, hi) for each parameter k of a unit whose elements [offset[k], offset[k] +
// numel) meet the unit's flat range [r0, r1), lo and hi being the overlap: the one walk over a
// unit's parameters within a range (gradient norms, the optimizer's ranges, on device or host,
// what a checkpoint takes).
template <class Unit, class F>
void for_each_param_range(const Unit& u, int64_t r0, int64_t r1, F&& f) {
    const auto& es = u.layer->table().entries();
    for (size_t k = 0; k < u.params.size(); ++k) {
        const ParamInfo& info = es[u.params[k]];
        const int64_t lo = std::max(u.offset[k], r0), hi = std::min(u.offset[k] + info.numel, r1);
        if (lo < hi) f(k, info, lo, hi);
    }
}

float init_value(const ParamInfo& p, const ParamShard& s, uint64_t seed, int64_t i) {
    switch (p.init) {
        case InitKind::zeros:
            return 0.0f;
        case InitKind::ones:
            return 1.0f;
        case InitKind::normal:
            return p.init_std *
                   counter_normal(seed, (uint64_t)s.global_index, (uint64_t)s.global_offset(i));
    }
    return 0.0f;
}

}  // namespace

std::vector<ParamStore::UnitGroup> ParamStore::unit_groups(const Layer& l) {
    const auto& es = l.table().entries();
    UnitGroup wte{{}, true}, rest{{}, false};
    for (int i = 0; i < (int)es.size(); ++i)
        (vocab_embedding_name(es[i].name) ? wte : rest).params.push_back(i);
    std::vector<UnitGroup> groups;
    for (UnitGroup* g : {&wte, &rest})
        if (!g->params.empty()) groups.push_back(std::move(*g));
    return groups;
}

std::vector<std::vector<int>> ParamStore::grad_parts(const Layer& l, const UnitGroup& group,
                                                     bool gpu) {
    // a GPU's pool serves up to 1 MiB from small blocks; the CPU's heap has no such rule
    const int64_t own_buffer = gpu ? (int64_t(1) << 20) / (int64_t)sizeof(float) : 0;
    const auto& es = l.table().entries();
    std::vector<std::vector<int>> parts;
    std::vector<int> small;
    for (int k = 0; k < (int)group.params.size(); ++k)
        if (es[group.params[k]].numel > own_buffer)
            parts.push_back({k});
        else
            small.push_back(k);
    if (!small.empty()) parts.push_back(std::move(small));
    return parts;
}

ParamStore::ParamStore(std::vector<Layer*> layers, const ZeroOptions& o, Communicator* dp_async,
                       int tp_rank, bool last_stage_copy)
    : layers_(std::move(layers)),
      o_(o),
      dp_(dp_async),
      tp_rank_(tp_rank),
      last_stage_copy_(last_stage_copy),
      ops_(o.ops ? o.ops : &device_ops_cpu()),
      dev_(ops_->device()),
      host_master_(o.offload_optimizer && o.gpu && dev_ != Device::cpu) {
    if (dp_) {
        dp_rank_ = dp_->rank();
        dp_size_ = dp_->size();
    }
    // the meta device (the estimator), and CPU ranks (ZeroOptions::comm_in_place): the main
    // thread runs each task when it waits for it
    worker_ = std::make_unique<CommWorker>(dev_ == Device::meta || o_.comm_in_place
                                               ? CommWorker::Mode::lazy
                                               : CommWorker::Mode::thread);
    if (host_master_ && dev_ != Device::meta) {
        host_worker_ = std::make_unique<CommWorker>();
        // that thread's own team (a new thread starts from the process's default, not from
        // this thread's threads_configure)
        const int team = host_optimizer_threads(omp_get_max_threads());
        host_worker_->post([team] { omp_set_num_threads(team); });
    }
    const MemCategory opt_cat = o_.offload_optimizer ? MemCategory::host : MemCategory::optimizer;
    // symmetric buffers are tried below (see there): ZeRO-1/2's bf16 images, and gradients
    // reduced through copy-engine exchanges
    const SymmetricLayout layout = symmetric_layout(o_.stage, o_.gather_bf16, dp_ != nullptr);
    const bool sym = layout.images16, symg = layout.grads;
    for (Layer* l : layers_) {
        const auto& es = l->table().entries();
        for (const UnitGroup& group : unit_groups(*l)) {
            auto u = std::make_unique<Unit>();
            u->layer = l;
            u->params = group.params;
            for (int i : group.params) {
                u->offset.push_back(u->len);
                u->len += es[i].numel;
            }
            u->is_wte = group.is_wte;
            u->tied_copy = u->is_wte && last_stage_copy_ && l->name() == "head";
            u->S = (u->len + dp_size_ - 1) / dp_size_;
            u->pad = u->S * dp_size_;
            u->shard_begin = std::min(u->len, dp_rank_ * u->S);
            u->shard_end = std::min(u->len, u->shard_begin + u->S);
            int64_t opt_n = o_.stage >= 1 ? u->S : u->len;
            // offloaded optimizer states live in host memory, whatever the device (on the meta
            // device, meta tensors in the host category)
            Device opt_dev = o_.offload_optimizer && dev_ != Device::meta ? Device::cpu : dev_;
            u->m = Tensor::zeros({opt_n}, opt_cat, DType::f32, opt_dev);
            u->v = Tensor::zeros({opt_n}, opt_cat, DType::f32, opt_dev);
            if (host_master_) {
                u->master = Tensor::empty({opt_n}, MemCategory::host, DType::f32, opt_dev);
                u->host_grad = Tensor::empty({opt_n}, MemCategory::host, DType::f32, opt_dev);
            }
            if (o_.stage >= 3) {
                u->shard = Tensor::zeros({u->S}, MemCategory::params, DType::f32, dev_);
            } else if (image_only()) {
                if (!sym)
                    u->full16 = Tensor::zeros({u->pad}, MemCategory::params, DType::bf16, dev_);
            } else {
                u->full = Tensor::zeros({u->pad}, MemCategory::params, DType::f32, dev_);
            }
            u->split = split_grads(o_.stage, dp_size_, o_.micro_batches);
            if (u->split) u->part_params = grad_parts(*l, group, o_.gpu);
            if (o_.stage >= 2)
                u->grad_shard = Tensor::zeros({u->S}, MemCategory::grads, DType::f32, dev_);
            else if (!symg && !u->split)
                u->grad_full = Tensor::zeros({u->pad}, MemCategory::grads, DType::f32, dev_);
            units_.push_back(std::move(u));
        }
    }
    // Symmetric buffers (NCCL windows; none on other backends): one per kind, every unit's
    // `elem`-byte elements in its own page-aligned part, at the same offsets on every DP rank,
    // so the copy engines can move them. Returns its size (0: none).
    auto symmetric = [&](int elem, MemCategory cat, auto&& place) -> int64_t {
        int64_t bytes = 0;
        for (auto& u : units_) bytes += symmetric_part_bytes(elem * u->pad);
        char* p = static_cast<char*>(dp_->symmetric_buffer(bytes));
        if (!p) return 0;
        count_symmetric(cat, bytes);
        for (auto& u : units_) {
            place(*u, p);
            p += symmetric_part_bytes(elem * u->pad);
        }
        return bytes;
    };
    if (symg) {  // the gradients and their staging buffer: the reductions on the copy engines
        gsym_bytes_ = symmetric(4, MemCategory::grads, [&](Unit& u, char* p) {
            u.gsym = reinterpret_cast<float*>(p);
            ops_->zero(u.gsym, u.pad);
        });
        if (gsym_bytes_)
            stage_bytes_ = symmetric(4, MemCategory::comm, [](Unit& u, char* p) {
                u.gstage = reinterpret_cast<float*>(p);
            });
        else
            for (auto& u : units_)
                u->grad_full = Tensor::zeros({u->pad}, MemCategory::grads, DType::f32, dev_);
    }
    if (sym)  // ZeRO-1/2 in bf16: every unit's bf16 image, for the all-gathers; accounted as comm
        gather16_bytes_ = symmetric(2, MemCategory::comm, [](Unit& u, char* p) {
            u.sym16 = reinterpret_cast<uint16_t*>(p);
        });
    if (image_only())  // no symmetric buffer: a plain persistent image
        for (auto& u : units_)
            if (!u->sym16 && !u->full16.defined())
                u->full16 = Tensor::zeros({u->pad}, MemCategory::params, DType::bf16, dev_);
    // initialise what this rank stores, straight from the counter-based init (the meta device
    // holds no values)
    if (dev_ != Device::meta)
        for (auto& u : units_) {
            const auto& es = u->layer->table().entries();
            const auto& shards = u->layer->shards();
            // the values this rank keeps: the unit (ZeRO 0-2) or its slice (ZeRO-3)
            const int64_t keep0 = o_.stage >= 3 ? u->shard_begin : 0;
            const int64_t keep1 = o_.stage >= 3 ? u->shard_end : u->len;
            std::vector<float> host(keep1 - keep0);
            for (size_t k = 0; k < u->params.size(); ++k) {
                const int pi = u->params[k];
                const ParamInfo& info = es[pi];
                const int64_t base = u->offset[k];
                const int64_t lo = std::max<int64_t>(0, keep0 - base),
                              hi = std::min<int64_t>(info.numel, keep1 - base);
                if (lo >= hi) continue;
                float* dst = host.data() + (base - keep0);
                // counter-based: each element depends on its index only, so the threads cannot
                // change a value (a 1B-parameter model took ~40 s on one core)
                const ParamShard& shard = shards[pi];
#pragma omp parallel for schedule(static)
                for (int64_t i = lo; i < hi; ++i) dst[i] = init_value(info, shard, o_.seed, i);
            }
            set_values(*u, host.data(), keep0, keep1);
        }
    refresh_images();
    for (Layer* l : layers_) {
        l->copy_kept_by_optimizer = optimizer_writes_copies();
        l->param_ptr.assign(l->table().entries().size(), nullptr);
        l->param16_ptr.assign(l->table().entries().size(), nullptr);
        l->grad_ptr.assign(l->table().entries().size(), nullptr);
        l->grad_unwritten.assign(l->table().entries().size(), 0);
        if (o_.stage < 3) bind(l);
    }
}

// The persistent bf16 images cast from the full parameters (after initialisation and loads;
// the optimizer step keeps them current afterwards).
void ParamStore::refresh_images() {
    for (auto& u : units_)
        if (u->sym16 && u->full.defined()) ops_->to_bf16(u->sym16, u->full.f32(), u->pad);
}

// Host values of the unit's elements [k0, k1) (all of them, or ZeRO-3's slice): this rank's part
// of the fp32 master where it is on the host, and the device's copy, fp32 or its bf16 image.
void ParamStore::set_values(Unit& u, const float* host, int64_t k0, int64_t k1) {
    if (k0 >= k1) return;
    if (host_master_) {
        const int64_t r0 = std::max(k0, update_begin(u)), r1 = std::min(k1, update_end(u));
        if (r0 < r1)
            std::memcpy(u.master.f32() + (r0 - update_begin(u)), host + (r0 - k0),
                        sizeof(float) * (r1 - r0));
    }
    if (o_.stage >= 3) {
        ops_->upload(u.shard.f32() + (k0 - u.shard_begin), host, k1 - k0);
    } else if (image_only()) {
        Tensor staging = Tensor::empty({k1 - k0}, MemCategory::comm, DType::f32, dev_);
        ops_->upload(staging.f32(), host, k1 - k0);
        ops_->to_bf16(u.image16() + k0, staging.f32(), k1 - k0);
    } else {
        ops_->upload(u.full.f32() + k0, host, k1 - k0);
    }
}

ParamStore::~ParamStore() {
    try {
        if (host_worker_) host_worker_->drain();
        worker_->drain();
    } catch (...) {
    }
    count_symmetric(MemCategory::grads, -gsym_bytes_);
    count_symmetric(MemCategory::comm, -(gather16_bytes_ + stage_bytes_));
}

// The symmetric buffers come from the communicator (NCCL's own memory), outside Tensor and the
// device's pool: counted where memory goes (the process's MemoryTracker, or the estimator's
// MetaMemory).
void ParamStore::count_symmetric(MemCategory cat, int64_t bytes) {
    memory_count_outside_pool(cat, bytes);
}

ParamStore::Unit* ParamStore::unit_of(Layer* l, int param) {
    for (auto& u : units_)
        if (u->layer == l)
            for (int p : u->params)
                if (p == param) return u.get();
    return nullptr;
}

// The compute stream waits for the unit's background all-gather; a bf16 one without a persistent
// image (no symmetric buffer) is widened into the other ranks' slices of `full`.
void ParamStore::settle(Unit& u) {
    land_update(u);
    if (!u.gathered) return;
    u.gathered->wait();
    u.gathered.reset();
    if (!o_.gather_bf16 || u.sym16 || image_only())
        return;  // a persistent image feeds the layers directly
    const uint16_t* h = u.image16();
    for (int r = 0; r < dp_size_; ++r)
        if (r != dp_rank_) ops_->from_bf16(u.full.f32() + r * u.S, h + r * u.S, u.S);
    u.full16 = Tensor();
}

void ParamStore::bind(Layer* layer) {
    layer->weights_version = version_;
    for (auto& u : units_) {
        if (u->layer != layer) continue;
        settle(*u);
        for (size_t k = 0; k < u->params.size(); ++k) {
            layer->param_ptr[u->params[k]] =
                u->full.defined() ? u->full.f32() + u->offset[k] : nullptr;
            layer->param16_ptr[u->params[k]] =
                u->sym16 || image_only() ? u->image16() + u->offset[k] : nullptr;
            layer->grad_ptr[u->params[k]] = u->grad_of(k);
        }
    }
}

// ZeRO-3: all-gathers a unit's parameters into a fresh full buffer on the worker thread.
void ParamStore::gather(Unit& u) {
    land_update(u);  // ZeRO-3 gathers the updated slice
    if (u.gather_posted || u.full.defined()) return;
    Tensor full = Tensor::empty({u.pad}, MemCategory::params, DType::f32, dev_);
    float* out = full.f32();
    const float* in = u.shard.f32();
    Communicator* dp = dp_;
    DeviceOps* ops = ops_;
    int64_t S = u.S;
    u.full = std::move(full);
    ++version_;  // new parameter storage: GPU layers recast their weight copies
    if (!dp) {   // nothing to gather: one rank holds everything
        ops->copy(out, in, S);
        u.gathering = worker_->post([] {});
    } else {
        auto ready = ops->record();
        u.gathering = worker_->post([dp, ops, ready, in, out, S] {
            ops->wait(ready);
            dp->all_gather(in, out, S);
        });
    }
    u.gather_posted = true;
}

void ParamStore::before_forward(Layer* layer, Layer* next) {
    if (o_.stage >= 3) {
        std::vector<Layer*> need{layer};
        if (layer->tied_embedding()) need.push_back(layer->tied_embedding());
        for (Layer* l : need)
            for (auto& u : units_)
                if (u->layer == l) gather(*u);
        if (next)
            for (auto& u : units_)
                if (u->layer == next) gather(*u);
        for (Layer* l : need)
            for (auto& u : units_)
                if (u->layer == l && u->gather_posted) {
                    u->gathering.get();
                    u->gather_posted = false;
                }
    }
    bind(layer);  // also carries the parameter version to the layer
    if (layer->tied_embedding()) bind(layer->tied_embedding());
}

void ParamStore::after_forward(Layer* layer) {
    if (o_.stage < 3) return;
    std::vector<Layer*> done{layer};
    if (layer->tied_embedding()) done.push_back(layer->tied_embedding());
    for (Layer* l : done)
        for (auto& u : units_)
            if (u->layer == l && !u->gather_posted) u->full = Tensor();
}

// Zeroes a split unit's gradients its layer has not written since they were allocated unzeroed
// (Layer::grad_unwritten), before anything reads them.
void ParamStore::settle_unwritten(Unit& u) {
    std::vector<uint8_t>& unwritten = u.layer->grad_unwritten;
    const auto& es = u.layer->table().entries();
    for (size_t k = 0; k < u.params.size(); ++k)
        if (unwritten[u.params[k]]) {
            ops_->zero(u.grad_of(k), es[u.params[k]].numel);
            unwritten[u.params[k]] = 0;
        }
}

// The gradients a unit's backward accumulates into, zeroed, where it has none yet: ZeRO-2/3's
// full gradient each micro-batch (dropped once reduce-scattered), the split gradients once a step
// (kept over its micro-batches); the other plans' persist.
void ParamStore::allocate_grads(Unit& u) {
    if (u.split) {
        if (!u.grad_parts.empty()) return;
        const auto& es = u.layer->table().entries();
        u.grad_at.assign(u.params.size(), nullptr);
        std::vector<uint8_t>& unwritten = u.layer->grad_unwritten;
        for (const std::vector<int>& part : u.part_params) {
            int64_t n = 0;
            for (int k : part) n += es[u.params[k]].numel;
            // a parameter alone whose gradient the layer writes whole: left unzeroed, the
            // layer's first write overwrites it (settle_unwritten zeroes it if none came)
            const bool whole = part_written_whole(*u.layer, u.params, part);
            Tensor t = whole ? Tensor::empty({n}, MemCategory::grads, DType::f32, dev_)
                             : Tensor::zeros({n}, MemCategory::grads, DType::f32, dev_);
            // on the CPU (where the layers' first write zeroes, then adds) NaN: a layer that
            // adds to it instead poisons the run, which the plans' equivalence tests catch
            if (whole && dev_ == Device::cpu)
                std::fill_n(t.f32(), n, std::numeric_limits<float>::quiet_NaN());
            float* g = u.grad_parts.emplace_back(std::move(t)).f32();
            for (int k : part) {
                u.grad_at[k] = g;
                unwritten[u.params[k]] = whole;
                g += es[u.params[k]].numel;
            }
        }
        return;
    }
    if (o_.stage < 2 || u.grad_full.defined()) return;
    // bound the full gradients alive: at most kMaxReductions reduce-scatters in flight (one
    // overlaps this layer's backward), so ZeRO-2/3 keep about one layer's full gradient besides
    // the slices
    while (in_flight_.size() >= kMaxReductions) {
        in_flight_.front().get();
        in_flight_.pop_front();
    }
    u.grad_full = Tensor::zeros({u.pad}, MemCategory::grads, DType::f32, dev_);
}

void ParamStore::before_backward(Layer* layer, Layer* next) {
    before_forward(layer, next);
    std::vector<Layer*> need{layer};
    if (layer->tied_embedding()) need.push_back(layer->tied_embedding());
    for (Layer* l : need)
        for (auto& u : units_)
            if (u->layer == l) allocate_grads(*u);
    bind(layer);
    if (layer->tied_embedding()) bind(layer->tied_embedding());
}

void ParamStore::after_backward(Layer* layer, bool last_micro) {
    for (auto& up : units_) {
        Unit& u = *up;
        if (u.layer != layer) continue;
        if (o_.stage < 2) {
            // optimizer offload: final, so to the host now, under the rest of the backward; the
            // embedding's gradient, which another layer or stage may add to, waits for
            // finish_gradients
            if (last_micro && host_master_ && !u.is_wte &&
                downloads_in_backward(o_.stage, dp_size_)) {
                if (u.split) settle_unwritten(u);
                download_grads(u);
            }
            if (last_micro && dp_) {
                float* g = u.grads();
                int64_t n = u.pad;  // the padding holds zeros on every rank
                // ZeRO-1 needs only its slice reduced: half the bytes of an all-reduce
                auto req = o_.stage == 1 ? dp_->ireduce_scatter(g, u.S, u.gstage)
                                         : dp_->iall_reduce(g, n, u.gstage);
                if (req) {
                    reducing_.push_back(std::move(req));
                    continue;
                }
                Communicator* dp = dp_;
                DeviceOps* ops = ops_;
                auto ready = ops->record();
                worker_->post([dp, ops, ready, g, n] {
                    ops->wait(ready);
                    dp->all_reduce(g, n);
                });
            }
        } else {
            // reduce-scatter this micro-batch's gradient into the slice, then drop the buffer
            auto full = std::make_shared<Tensor>(std::move(u.grad_full));
            float* acc = u.grad_shard.f32();
            int64_t S = u.S;
            Communicator* dp = dp_;
            DeviceOps* ops = ops_;
            if (!dp) {
                ops->accumulate(acc, full->f32(), S);
            } else {
                auto part = std::make_shared<Tensor>(
                    Tensor::empty({S}, MemCategory::comm, DType::f32, dev_));
                auto ready = ops->record();
                in_flight_.push_back(worker_->post([dp, ops, ready, full, part, acc, S]() mutable {
                    ops->wait(ready);
                    dp->reduce_scatter(full->f32(), part->f32(), S);
                    ops->accumulate(acc, part->f32(), S);  // stream-ordered on the device
                    full.reset();  // free before the future is ready: the caller may wait on it
                    part.reset();
                }));
            }
        }
    }
    after_forward(layer);  // ZeRO-3: release the gathered parameters
}

void ParamStore::flush_accumulates() {
    worker_->drain();
    in_flight_.clear();
    for (auto& r : reducing_) r->wait();
    reducing_.clear();
}

void ParamStore::zero_grads() {
    flush_accumulates();
    for (auto& u : units_) {
        u->grad_parts.clear();  // the next backward allocates them
        u->grad_at.clear();
        if (u->gsym)
            ops_->zero(u->gsym, u->pad);
        else if (u->grad_full.defined())
            u->grad_full.zero();
        if (u->grad_shard.defined()) u->grad_shard.zero();
    }
}

void ParamStore::finish_gradients(Communicator* embedding) {
    land_updates();  // the host's gradient copies are written again below
    flush_accumulates();
    for (auto& u : units_)  // split: zeros where a layer ran no backward or write this step
        if (u->split) {
            allocate_grads(*u);
            settle_unwritten(*u);
        }
    for (auto& u : units_) {
        if (!u->is_wte || !embedding) continue;
        if (o_.stage < 2)  // the embedding is a unit of its own: one parameter
            embedding->all_reduce(u->grad_of(0), u->len);
        else
            embedding->all_reduce(u->grad_shard.f32(), u->S);
    }
    // The ranges this rank owns, a unit's adjacent ones merged (its gradients lie back to back).
    // Never merged across units: whether two units' buffers are adjacent depends on what else the
    // plan allocated (offload, the ZeRO stage), and the device sums each range in blocks of its
    // own length, so merging them would make the norm's rounding, and through clipping the
    // run's bits, depend on the plan.
    std::vector<std::pair<const float*, int64_t>> ranges;
    for (auto& up : units_) {
        Unit& u = *up;
        if (u.tied_copy) continue;
        const size_t unit_first = ranges.size();
        for_each_param_range(
            u, u.shard_begin, u.shard_end, [&](size_t k, const ParamInfo&, int64_t lo, int64_t hi) {
                if (tp_rank_ != 0 && replicated(u.layer->shards()[u.params[k]])) return;
                const float* g = o_.stage < 2 ? u.grad_of(k) + (lo - u.offset[k])
                                              : u.grad_shard.f32() + (lo - u.shard_begin);
                if (!u.split && ranges.size() > unit_first &&
                    ranges.back().first + ranges.back().second == g)
                    ranges.back().second += hi - lo;
                else
                    ranges.push_back({g, hi - lo});
            });
    }
    ops_->sum_squares_begin();
    ops_->sum_squares_ranges(ranges);
    for (auto& u : units_) download_grads(*u);  // those the backward did not offload yet
}

// Optimizer offload on a GPU: the gradients of the range this rank updates, once final, to the
// host on the copy stream (host_grad; the last copy's event in grad_download until the optimizer
// step, the copy stream running them in order). Split gradients go a parameter range at a time,
// ranges adjacent on both sides merged.
void ParamStore::download_grads(Unit& u) {
    if (!host_master_ || u.grads_down) return;
    u.grads_down = true;
    land_update(u);  // the host's last update of the unit has read host_grad
    const int64_t r0 = update_begin(u), r1 = update_end(u);
    auto copy = [&](float* host, const float* g, int64_t n) {
        void* ev = device_copy_async(host, u.host_grad.device(), g, dev_, sizeof(float) * n);
        device_event_free(std::exchange(u.grad_download, ev));
    };
    if (r0 >= r1) return;
    if (!u.split) {
        copy(u.host_grad.f32(), o_.stage < 2 ? u.grads() + r0 : u.grad_shard.f32(), r1 - r0);
        return;
    }
    float* host = nullptr;
    const float* dev = nullptr;
    int64_t n = 0;
    for_each_param_range(u, r0, r1, [&](size_t k, const ParamInfo&, int64_t lo, int64_t hi) {
        const float* g = u.grad_of(k) + (lo - u.offset[k]);
        float* h = u.host_grad.f32() + (lo - r0);
        if (n > 0 && dev + n == g && host + n == h) {
            n += hi - lo;
            return;
        }
        if (n > 0) copy(host, dev, n);
        host = h, dev = g, n = hi - lo;
    });
    if (n > 0) copy(host, dev, n);
}

int64_t ParamStore::update_begin(const Unit& u) const {
    return o_.stage >= 1 ? u.shard_begin : 0;
}
int64_t ParamStore::update_end(const Unit& u) const {
    return o_.stage >= 1 ? u.shard_end : u.len;
}

void ParamStore::optimizer_step(const OptimizerConfig& oc, int64_t step, const float* norm2) {
    double lr = lr_at_step(oc, step);
    ++t_;
    ++version_;
    const AdamWHyper h{static_cast<float>(lr),
                       static_cast<float>(oc.beta1),
                       static_cast<float>(oc.beta2),
                       static_cast<float>(oc.eps),
                       0.0f,
                       t_};
    if (host_master_) {
        optimizer_step_host(oc, h, norm2);
        return;
    }
    // ZeRO-1/2 all-gather each unit's slice as soon as it is updated; otherwise every range
    // goes to the device in one batch
    const bool gather = (o_.stage == 1 || o_.stage == 2) && dp_;
    std::vector<AdamWRange> ranges;
    for (auto& up : units_) {
        Unit& u = *up;
        const int64_t r0 = update_begin(u), r1 = update_end(u);
        for_each_param_range(
            u, r0, r1, [&](size_t k, const ParamInfo& info, int64_t lo, int64_t hi) {
                float* p = o_.stage >= 3 ? u.shard.f32() + (lo - u.shard_begin) : u.full.f32() + lo;
                const float* g = o_.stage >= 2 ? u.grad_shard.f32() + (lo - u.shard_begin)
                                               : u.grad_of(k) + (lo - u.offset[k]);
                const int64_t mo = lo - r0;
                // the layer's bf16 copy of the parameter, where the optimizer keeps it current
                auto* copy = static_cast<uint16_t*>(u.layer->weights_copy(u.params[k]));
                ranges.push_back({p, g, u.m.f32() + mo, u.v.f32() + mo, hi - lo,
                                  info.decay ? static_cast<float>(oc.weight_decay) : 0.0f,
                                  copy ? copy + (lo - u.offset[k]) : nullptr});
            });
        if (gather) {
            ops_->adamw_ranges(ranges, h, oc.grad_clip, norm2);
            ranges.clear();
            gather_updated(u);
        }
    }
    ops_->adamw_ranges(ranges, h, oc.grad_clip, norm2);
    if (optimizer_writes_copies())  // every parameter updated above, each copy with it
        for (Layer* l : layers_) l->weights_copy_written(version_);
    worker_->drain();
}

// Optimizer offload on a GPU: per unit in forward order, once its gradients have reached the
// host, AdamW on the host's cores (engine/kernels/cpu/adamw.cpp: the device kernel's bits) over
// the fp32 master, on the store's host thread while this thread goes on; each unit's update lands
// on the device when the next forward first needs it (land_update), so the first layers' forward
// runs while the host still updates the last ones.
void ParamStore::optimizer_step_host(const OptimizerConfig& oc, const AdamWHyper& h,
                                     const float* norm2) {
    float n2 = 0.0f;
    if (norm2 && dev_ != Device::meta) ops_->download(&n2, norm2, 1);
    for (auto& up : units_) {
        Unit& u = *up;
        const int64_t r0 = update_begin(u), r1 = update_end(u);
        void* download = std::exchange(u.grad_download, nullptr);
        u.grads_down = false;
        device_event_wait(download);  // what next writes the gradients (zero_grads) waits for it
        u.update_pending = true;
        if (r0 >= r1 || !host_worker_) {  // nothing to update here, or the meta device
            device_event_sync(download);
            device_event_free(download);
            continue;
        }
        std::vector<AdamWRange> ranges;
        for_each_param_range(u, r0, r1, [&](size_t, const ParamInfo& info, int64_t lo, int64_t hi) {
            const int64_t i = lo - r0;
            ranges.push_back({u.master.f32() + i, u.host_grad.f32() + i, u.m.f32() + i,
                              u.v.f32() + i, hi - lo, info.decay ? (float)oc.weight_decay : 0.0f});
        });
        // the host's AdamW over the ranges: the CPU device's own (clipped by the same norm)
        u.updating =
            host_worker_->post([download, ranges = std::move(ranges), h, clip = oc.grad_clip, n2] {
                device_event_sync(download);
                device_event_free(download);
                device_ops_cpu().adamw_ranges(ranges, h, clip, &n2);
            });
    }
}

// A unit's update from the last optimizer step, onto the device: once the host has it, the
// updated range on the copy stream (into the fp32 parameters, or through a staging buffer cast
// into the bf16 image), the compute stream waiting for it; ZeRO-1/2 then all-gather it.
void ParamStore::land_update(Unit& u) {
    if (!u.update_pending) return;
    u.update_pending = false;
    if (u.updating.valid()) std::exchange(u.updating, {}).get();  // rethrows the host's failure
    const int64_t r0 = update_begin(u), r1 = update_end(u);
    if (r0 < r1) {
        const size_t bytes = sizeof(float) * (r1 - r0);
        if (image_only()) {
            Tensor staging = Tensor::empty({r1 - r0}, MemCategory::comm, DType::f32, dev_);
            void* ev =
                device_copy_async(staging.data(), dev_, u.master.data(), u.master.device(), bytes);
            device_event_wait(ev);
            device_event_free(ev);
            ops_->to_bf16(u.image16() + r0, staging.f32(), r1 - r0);
        } else {
            float* dst = o_.stage >= 3 ? u.shard.f32() : u.full.f32() + r0;
            void* ev = device_copy_async(dst, dev_, u.master.data(), u.master.device(), bytes);
            device_event_wait(ev);
            device_event_free(ev);
        }
    }
    if ((o_.stage == 1 || o_.stage == 2) && dp_) gather_updated(u);
}

void ParamStore::land_updates() {
    for (auto& u : units_) land_update(*u);
}

// ZeRO-1/2: every DP rank updated its slice of the unit; all-gather the full parameters (in the
// background where the backend can: the next forward waits for each unit when it binds it).
void ParamStore::gather_updated(Unit& u) {
    const int64_t mine = dp_rank_ * u.S;
    if (image_only()) {  // the slice is in the image already
        u.gathered = dp_->iall_gather(u.image16(), u.S, DType::bf16);
        TS_CHECK(u.gathered,
                 "optimizer offload in bf16 needs a DP backend with in-place all-gathers (NCCL)");
        return;
    }
    if (o_.gather_bf16) {
        if (!u.sym16) u.full16 = Tensor::empty({u.pad}, MemCategory::comm, DType::bf16, dev_);
        ops_->to_bf16(u.image16() + mine, u.full.f32() + mine, u.S);
        if ((u.gathered = dp_->iall_gather(u.image16(), u.S, DType::bf16))) return;
        u.full16 = Tensor();
    } else if ((u.gathered = dp_->iall_gather(u.full.f32(), u.S, DType::f32))) {
        return;
    }
    auto slice =
        std::make_shared<Tensor>(Tensor::empty({u.S}, MemCategory::comm, DType::f32, dev_));
    if (u.shard_end > u.shard_begin)
        ops_->copy(slice->f32(), u.full.f32() + u.shard_begin, u.shard_end - u.shard_begin);
    float* out = u.full.f32();
    int64_t S = u.S;
    Communicator* dp = dp_;
    DeviceOps* ops = ops_;
    auto ready = ops->record();
    worker_->post([dp, ops, ready, slice, out, S] {
        ops->wait(ready);
        dp->all_gather(slice->f32(), out, S);
    });
}

std::vector<ParamStore::Held> ParamStore::held() {
    std::vector<Held> out;
    for (auto& up : units_) {
        settle(*up);  // values are read after the all-gather, on the compute stream
        const Unit& u = *up;
        if (u.tied_copy) continue;
        const int64_t r0 = o_.stage >= 1 ? u.shard_begin : (dp_rank_ == 0 ? 0 : u.len);
        const int64_t r1 = o_.stage >= 1 ? u.shard_end : u.len;
        for_each_param_range(u, r0, r1, [&](size_t k, const ParamInfo&, int64_t lo, int64_t hi) {
            const int pi = u.params[k];
            if (tp_rank_ != 0 && replicated(u.layer->shards()[pi])) return;
            Held h;
            h.layer = u.layer;
            h.param = pi;
            h.begin = lo - u.offset[k];
            h.end = hi - u.offset[k];
            const int64_t mo = lo - update_begin(u);  // the moments' (and a host master's) index
            h.param_values = host_master_    ? u.master.f32() + mo
                             : o_.stage >= 3 ? u.shard.f32() + (lo - u.shard_begin)
                                             : u.full.f32() + lo;
            h.m = u.m.f32() + mo;
            h.v = u.v.f32() + mo;
            h.params_on_host = host_master_ || dev_ == Device::cpu;
            h.moments_on_host = o_.offload_optimizer || dev_ == Device::cpu;
            out.push_back(h);
        });
    }
    return out;
}

void ParamStore::load(const std::function<void(const std::string&, int, const ParamShard&, int64_t,
                                               int64_t, float*)>& get_host) {
    std::vector<float> host, values;
    const Device mdev = o_.offload_optimizer ? Device::cpu : dev_;
    ++version_;
    auto get_moment = [&](const std::string& name, int which, const ParamShard& sh, int64_t lo,
                          int64_t hi, float* dst) {
        host.resize(hi - lo);
        get_host(name, which, sh, lo, hi, host.data());
        if (mdev == Device::cpu)
            std::memcpy(dst, host.data(), sizeof(float) * (hi - lo));
        else
            ops_->upload(dst, host.data(), hi - lo);
    };
    for (auto& up : units_) {
        Unit& u = *up;
        settle(u);  // a pending all-gather must not overwrite what is loaded
        const auto& es = u.layer->table().entries();
        // the parameter values this rank keeps (as at initialisation), then set like them
        const int64_t keep0 = o_.stage >= 3 ? u.shard_begin : 0;
        const int64_t keep1 = o_.stage >= 3 ? u.shard_end : u.len;
        values.assign(keep1 - keep0, 0.0f);
        const int64_t r0 = update_begin(u);
        for (size_t k = 0; k < u.params.size(); ++k) {
            int pi = u.params[k];
            const ParamShard& sh = u.layer->shards()[pi];
            const std::string& name = es[pi].name;
            int64_t base = u.offset[k], n = es[pi].numel;
            const int64_t lo = std::max<int64_t>(0, keep0 - base),
                          hi = std::min<int64_t>(n, keep1 - base);
            if (lo < hi) get_host(name, 0, sh, lo, hi, values.data() + (base + lo - keep0));
            const int64_t mlo = std::max<int64_t>(0, r0 - base),
                          mhi = std::min<int64_t>(n, update_end(u) - base);
            if (mlo < mhi) {
                get_moment(name, 1, sh, mlo, mhi, u.m.f32() + (base + mlo - r0));
                get_moment(name, 2, sh, mlo, mhi, u.v.f32() + (base + mlo - r0));
            }
        }
        set_values(u, values.data(), keep0, keep1);
    }
    refresh_images();
}

}  // namespace tessera
