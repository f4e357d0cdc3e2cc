// Training and evaluation batches for a run. What a step consumes depends only on the seed, the
// step and the global sample index — never on the parallel plan — so every plan sees the same
// data (the property the equivalence tests rest on), in either reading order (data.order: random
// samples, or each item once per epoch in a shuffled order; docs/data.md "Reading order").
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/config/config.h"
#include "engine/model/model.h"

namespace tessera {

class DataSource {
  public:
    virtual ~DataSource() = default;
    // Samples [first_sample, first_sample + n) of step `step`'s global batch (micro_batch x
    // grad_accum x dp samples; first_sample + n at most that).
    virtual Batch train_batch(int64_t step, int64_t first_sample, int n) const = 0;
    // Evaluation batch `index` (deterministic, independent of training progress).
    virtual Batch eval_batch(int64_t index, int64_t first_sample, int n) const = 0;
    // Number of evaluation samples in a full pass (0 = unbounded; sampled windows).
    virtual int64_t eval_set_size() const { return 0; }
    // Distinct training items: fixed windows of the train shard ((tokens - 1) / seq_len) or
    // images. An epoch of data.order epoch is this many samples; the train/epoch metric is the
    // samples consumed over it.
    virtual int64_t train_set_size() const = 0;
    virtual int vocab_size() const = 0;
    virtual std::string describe() const = 0;
};

// Opens the run's data (token shards or a named data set; Brown shards are prepared on demand).
// The global batch of the epoch order is cfg's micro_batch x grad_accum x parallel.dp.
std::unique_ptr<DataSource> data_source_open(const RunConfig& cfg);

}  // namespace tessera
