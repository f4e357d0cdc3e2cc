// `tessera data prepare`: the user's own text (.txt files, .jsonl and .jsonl.gz lines) tokenized
// with a model's tokenizer into a prepared folder the trainer reads:
//   OUT/train.bin, OUT/val.bin   token shards (shard.h: uint16 when the vocabulary fits, else
//   uint32) OUT/manifest.json            inputs (path, bytes, sha256), tokenizer (spec, sha256),
//   options,
//                                counts, tokens-per-document histogram
//   OUT/train.idx                train.bin's document starts: uint64 offsets, one per document and
//                                one more (the token count), for previews (prepared_samples)
//   OUT/.parts/                  one finished part per input or per chunk of a large JSONL input
//                                (resume); removed once complete
// A document is one .txt file or one JSONL line; each becomes [BOS if the tokenizer adds one]
// + its tokens + [EOS when `eos`]. The validation split takes whole documents, evenly spaced in
// the documents' global order (inputs sorted by path, lines in file order). Inputs are tokenized
// on `threads` worker threads. Re-running with the same inputs, tokenizer and options finds the
// manifest up to date and writes nothing. See docs/data.md.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace tessera {

struct PrepareOptions {
    std::string tokenizer;  // tokenizer_make's spelling: tokenizer.json FILE | DIR | gpt2 | bytes
    std::vector<std::string> inputs;  // files, folders (searched recursively) and globs
    std::string field = "text";       // JSONL: the key holding a document's text
    std::string out;                  // the prepared folder (created)
    double val_fraction = 0.05;       // share of documents in val.bin, in [0, 0.5]
    bool eos = true;                  // append the tokenizer's EOS to every document
    bool skip_bad = false;            // skip (and count) malformed JSONL lines instead of stopping
    int threads = 0;                  // worker threads; 0 = all cores
    // JSONL inputs are cut into chunks of whole lines of about this many (uncompressed) bytes, so
    // one large file uses every thread; a chunk is also the unit of resume
    int64_t chunk_bytes = 4 << 20;
};

struct PrepareProgress {
    int64_t bytes_done = 0, bytes_total = 0;
    int64_t documents = 0, tokens = 0, skipped_lines = 0;
    int inputs_done = 0, inputs_total = 0;
    double seconds = 0;  // since the start
    double mb_per_s() const { return seconds > 0 ? bytes_done / 1e6 / seconds : 0; }
    double eta_seconds() const;  // -1 while unknown
};

// The manifest's contents, as written and as read back.
struct PreparedSet {
    std::string dir, train_path, val_path, manifest_path;
    std::string tokenizer;  // the spec it was prepared with
    int vocab_size = 0;
    int64_t documents = 0, train_documents = 0, val_documents = 0;
    int64_t train_tokens = 0, val_tokens = 0, input_bytes = 0, skipped_lines = 0;
    // histogram of tokens per document: hist_counts[i] documents have a token count in
    // [hist_edges[i], hist_edges[i + 1]); hist_edges has one more entry than hist_counts
    std::vector<int64_t> hist_edges, hist_counts;
    std::vector<std::string> input_files;   // every input file, as expanded from the inputs given
    int bos_token = -1, eos_token = -1;     // the separators written (-1: none)
    bool up_to_date = false;                // data_prepare: nothing needed doing
    int parts_total = 0, parts_reused = 0;  // data_prepare: chunks, and those a resume found done
};

// Thrown when the progress callback asked to stop; nothing half-written is left behind.
struct PrepareCancelled : InputError {
    PrepareCancelled() : InputError("data prepare: cancelled") {}
};

// Prepares `opt.out`. `progress` is called from the calling thread several times a second and
// at the end; returning false cancels (PrepareCancelled). InputError naming the file (and line
// for JSONL) on bad input: a missing input, an input matching no file, an unreadable or
// malformed file, a missing or non-string field; train.bin/val.bin/manifest.json already there
// stay as they were until the new ones are complete.
PreparedSet data_prepare(const PrepareOptions& opt,
                         const std::function<bool(const PrepareProgress&)>& progress = {});

// Reads OUT/manifest.json; InputError naming the file for a missing or malformed manifest.
PreparedSet prepared_read(const std::string& dir);

// The first `n` documents of the prepared train split, decoded with `tokenizer` (each cut at
// `max_tokens` tokens), for a preview.
std::vector<std::string> prepared_samples(const std::string& dir, const std::string& tokenizer,
                                          int n, int max_tokens = 200);

}  // namespace tessera
