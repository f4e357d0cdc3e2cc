#include "engine/train/data_source.h"

#include "engine/core/error.h"
#include "engine/data/brown.h"
#include "engine/data/epoch_order.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/shard.h"
#include "engine/data/token_sampler.h"
#include "engine/data/tokenizer.h"
#include "engine/model/params.h"

namespace tessera {

namespace {

// How the training set is read: data.order, and the step's sample count over all ranks and
// micro-batches (the epoch order numbers samples across steps with it).
struct ReadOrder {
    bool epoch = false;
    int64_t global_batch = 1;
};

// ---- GPT: windows of seq_len + 1 tokens from llm.c token shards, mapped (TokenShard) ----------
class TokenData final : public DataSource {
  public:
    TokenData(TokenShard train, TokenShard val, int seq_len, uint64_t seed, ReadOrder order,
              int vocab, std::string desc)
        : train_(std::move(train)),
          val_(std::move(val)),
          seq_len_(seq_len),
          seed_(seed),
          order_(order),
          vocab_(vocab),
          desc_(std::move(desc)) {}

    Batch train_batch(int64_t step, int64_t first, int n) const override {
        Batch b = alloc(n);
        if (order_.epoch)
            epoch_token_batch(train_.tokens(), seed_, step, first, n, order_.global_batch, seq_len_,
                              b.inputs.data(), b.targets.data());
        else
            sample_token_batch(train_.tokens(), seed_, step, first, n, seq_len_, b.inputs.data(),
                               b.targets.data());
        return b;
    }
    Batch eval_batch(int64_t index, int64_t first, int n) const override {
        // random windows in both orders, from a separate stream: evaluation windows never depend
        // on the training seed's progress
        Batch b = alloc(n);
        sample_token_batch(val_.tokens(), splitmix64(seed_ ^ 0xE7A1ull), index, first, n, seq_len_,
                           b.inputs.data(), b.targets.data());
        return b;
    }
    int64_t train_set_size() const override { return token_window_count(train_.size(), seq_len_); }
    int vocab_size() const override { return vocab_; }
    std::string describe() const override { return desc_; }

  private:
    Batch alloc(int n) const {
        Batch b;
        b.batch_size = n;
        b.seq_len = seq_len_;
        b.inputs.resize((size_t)n * seq_len_);
        b.targets.resize((size_t)n * seq_len_);
        return b;
    }
    TokenShard train_, val_;
    int seq_len_;
    uint64_t seed_;
    ReadOrder order_;
    int vocab_;
    std::string desc_;
};

// ---- MLP: Fashion-MNIST images, pixels scaled to [0, 1] ---------------------------------------
class ImageData final : public DataSource {
  public:
    ImageData(ImageSet train, ImageSet test, uint64_t seed, ReadOrder order)
        : train_(std::move(train)), test_(std::move(test)), seed_(seed), order_(order) {}

    Batch train_batch(int64_t step, int64_t first, int n) const override {
        Batch b = alloc(n);
        for (int i = 0; i < n; ++i) {
            if (order_.epoch) {
                copy(train_,
                     epoch_order_item(seed_, step, first + i, order_.global_batch, train_.count), b,
                     i);
                continue;
            }
            uint64_t h = splitmix64(
                seed_ ^ splitmix64((uint64_t)step * 0x9E3779B97F4A7C15ull + (uint64_t)(first + i)));
            copy(train_, (int64_t)(h % (uint64_t)train_.count), b, i);
        }
        return b;
    }
    Batch eval_batch(int64_t index, int64_t first, int n) const override {
        // sequential passes over the test set: batch `index` of size n starts at index * n
        int64_t start = index * n + first;
        int count = (int)std::max<int64_t>(0, std::min<int64_t>(n, test_.count - start));
        Batch b = alloc(count);
        for (int i = 0; i < count; ++i) copy(test_, start + i, b, i);
        return b;
    }
    int64_t eval_set_size() const override { return test_.count; }
    int64_t train_set_size() const override { return train_.count; }
    int vocab_size() const override { return 10; }
    std::string describe() const override {
        return str_cat("Fashion-MNIST (", train_.count, " train, ", test_.count, " test images",
                       order_.epoch ? "; epoch order" : "", ")");
    }

  private:
    static Batch alloc(int n) {
        Batch b;
        b.batch_size = n;
        b.seq_len = 1;
        b.features.resize((size_t)n * 784);
        b.targets.resize(n);
        return b;
    }
    static void copy(const ImageSet& s, int64_t idx, Batch& b, int i) {
        const uint8_t* px = s.pixels.data() + idx * 784;
        for (int k = 0; k < 784; ++k) b.features[(size_t)i * 784 + k] = px[k] * (1.0f / 255.0f);
        b.targets[i] = s.labels[idx];
    }
    ImageSet train_, test_;
    uint64_t seed_;
    ReadOrder order_;
};

}  // namespace

std::unique_ptr<DataSource> data_source_open(const RunConfig& cfg) {
    const auto& d = cfg.data;
    const ReadOrder order{d.order == "epoch",
                          (int64_t)cfg.train.micro_batch * cfg.train.grad_accum * cfg.parallel.dp};
    if (cfg.model.preset == "mlp") {
        if (d.dataset != "fashion-mnist")
            throw InputError(str_cat(cfg.source_path,
                                     ": data.dataset: the mlp preset trains on "
                                     "'fashion-mnist', found '",
                                     d.dataset, "'"));
        ImageSet train = fashion_mnist_load("train"), test = fashion_mnist_load("test");
        TS_CHECK(train.rows * train.cols == 784, "Fashion-MNIST images are not 28x28");
        return std::make_unique<ImageData>(std::move(train), std::move(test), cfg.train.seed,
                                           order);
    }
    const std::string tokenizer = config_tokenizer(cfg);
    const int tokenizer_vocab = tokenizer_vocab_size(tokenizer);  // ids only: no BPE tables built
    std::string train_path, val_path;
    if (d.dataset == "brown") {
        ShardPaths p = brown_prepare(tokenizer);
        train_path = p.train;
        val_path = p.val;
    } else if (!d.dataset.empty()) {
        throw InputError(str_cat(cfg.source_path,
                                 ": data.dataset: expected brown for a GPT "
                                 "model, found '",
                                 d.dataset, "'"));
    } else {
        train_path = config_resolve_path(cfg, d.train);
        val_path = d.val.empty() ? train_path : config_resolve_path(cfg, d.val);
    }
    TokenShard train(train_path);
    TokenShard val = val_path == train_path ? train : TokenShard(val_path);  // one mapping
    // Ids Tessera tokenized itself lie in the tokenizer's vocabulary; a shard of the user's own
    // ids must fit the model's embedding (a Llama-family vocab_size; GPT's is the tokenizer's).
    const bool own_ids = d.dataset.empty() && cfg.model.vocab_size > 0;
    const int vocab = own_ids ? cfg.model.vocab_size : tokenizer_vocab;
    for (const TokenShard* v : {&train, &val}) {
        if (v == &val && val_path == train_path) break;  // one file: checked once
        if (const uint32_t t = v->tokens().max(); v->size() > 0 && t >= (uint32_t)vocab)
            throw InputError(own_ids
                                 ? str_cat(v->path(), ": token id ", t,
                                           " (the shard's largest) outside the model's vocabulary "
                                           "(vocab_size ",
                                           vocab, ")")
                                 : str_cat(v->path(), ": token id ", t,
                                           " (the shard's largest) outside the ", cfg.model.vocab,
                                           " vocabulary (size ", vocab, ")"));
    }
    // A window is seq_len + 1 tokens; say which file is too short before the first step (an empty
    // val.bin is what `tessera data prepare --val-fraction 0` writes)
    const int64_t window = (int64_t)cfg.model.seq_len + 1;
    if (train.size() < window)
        throw InputError(str_cat(train_path, ": ", train.size(),
                                 " tokens, expected at least seq_len + 1 = ", window,
                                 " to train on"));
    if (cfg.train.eval_every > 0 && val.size() < window)
        throw InputError(str_cat(val_path, ": ", val.size(),
                                 " tokens, expected at least seq_len + 1 = ", window,
                                 " for evaluation (train.eval_every ", cfg.train.eval_every,
                                 "); give data.val more documents, or set train.eval_every: 0"));
    std::string desc =
        str_cat(d.dataset.empty() ? train_path : d.dataset, " (", train.size(), " train / ",
                val.size(), " val tokens, vocab ", cfg.model.vocab, ")");
    if (order.epoch)
        desc += str_cat("; epoch order over ", token_window_count(train.size(), cfg.model.seq_len),
                        " windows of ", cfg.model.seq_len, " tokens");
    return std::make_unique<TokenData>(std::move(train), std::move(val), cfg.model.seq_len,
                                       cfg.train.seed, order, vocab, desc);
}

}  // namespace tessera
