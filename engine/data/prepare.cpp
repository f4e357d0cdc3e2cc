// `tessera data prepare` (prepare.h): inputs -> chunks -> parts (tokenized on worker threads,
// kept in OUT/.parts for resume) -> train.bin, val.bin, train.idx, manifest.json.
//
//   reader thread   reads the inputs in order (prepare_input.cpp), hashes them, cuts chunks;
//                   a chunk whose part already exists is reused, the others go on a bounded queue
//   workers (N)     tokenize a chunk's documents ([BOS] + tokens + [EOS]) into a part file
//   calling thread  reports progress every 200 ms, then assembles the parts in order, splits
//                   off the validation documents and writes the outputs (temp file + rename)
#include "engine/data/prepare.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/core/atomic_file.h"
#include "engine/core/json_text.h"
#include "engine/core/sha256.h"
#include "engine/core/unique_fd.h"
#include "engine/data/cache.h"
#include "engine/data/prepare_input.h"
#include "engine/data/shard.h"
#include "engine/data/tokenizer.h"

namespace tessera {

namespace fs = std::filesystem;
using nlohmann::json;

double PrepareProgress::eta_seconds() const {
    if (bytes_done <= 0 || bytes_total <= 0 || seconds <= 0) return -1;
    return seconds * (double)std::max<int64_t>(0, bytes_total - bytes_done) / (double)bytes_done;
}

namespace {

constexpr int kManifestVersion = 1;

// ----------------------------------------------------------------------------------------------
// The tokenizer's identity: its files' sha256 (bytes: "bytes")

struct TokenizerId {
    std::string sha256;  // of the files' bytes, concatenated in order
    json files = json::array();
};

TokenizerId tokenizer_identity(const std::string& spec) {
    TokenizerId id;
    std::vector<std::string> file_sha256;
    id.sha256 = tokenizer_sha256(spec, &file_sha256);
    const std::vector<std::string> files = tokenizer_files(spec);
    for (size_t i = 0; i < files.size(); ++i)
        id.files.push_back({{"path", files[i]}, {"sha256", file_sha256[i]}});
    return id;
}

// ----------------------------------------------------------------------------------------------
// Parts: one chunk's documents, tokenized.
//   "TSPART1\0", uint64 documents, uint64 tokens, uint64 skipped lines,
//   uint32 document lengths [documents], uint32 tokens [tokens]

constexpr char kPartMagic[8] = {'T', 'S', 'P', 'A', 'R', 'T', '1', '\0'};

struct Part {
    uint64_t documents = 0, tokens = 0, skipped = 0;
    std::vector<uint32_t> lengths, ids;
};

void part_write(const std::string& path, const Part& p) {
    std::string bytes(kPartMagic, 8);
    for (uint64_t v : {p.documents, p.tokens, p.skipped}) bytes.append((const char*)&v, 8);
    bytes.append((const char*)p.lengths.data(), p.lengths.size() * 4);
    bytes.append((const char*)p.ids.data(), p.ids.size() * 4);
    file_write_atomic(path, bytes);
}

// Reads a part (its header only unless `body`); false when it is missing or not a whole part.
bool part_read(const std::string& path, Part& p, bool body) {
    FilePtr f(std::fopen(path.c_str(), "rb"));
    if (!f) return false;
    char magic[8];
    uint64_t head[3];
    if (std::fread(magic, 8, 1, f.get()) != 1 || std::memcmp(magic, kPartMagic, 8) != 0 ||
        std::fread(head, 8, 3, f.get()) != 3)
        return false;
    p.documents = head[0], p.tokens = head[1], p.skipped = head[2];
    std::fseek(f.get(), 0, SEEK_END);
    if ((uint64_t)std::ftell(f.get()) != 32 + 4 * (p.documents + p.tokens)) return false;
    if (!body) return true;
    std::fseek(f.get(), 32, SEEK_SET);
    p.lengths.resize(p.documents);
    p.ids.resize(p.tokens);
    return std::fread(p.lengths.data(), 4, p.documents, f.get()) == p.documents &&
           std::fread(p.ids.data(), 4, p.tokens, f.get()) == p.tokens;
}

// ----------------------------------------------------------------------------------------------
// The validation split

// Document g of n is in val when floor((g + 1) f) > floor(g f): floor(n f) documents, evenly
// spaced; with f > 0 and n >= 2 at least one (the last).
bool split_is_val(int64_t g, int64_t n, double f) {
    if (f <= 0) return false;
    if (std::floor((double)n * f) == 0) return n >= 2 && g == n - 1;
    return std::floor((double)(g + 1) * f) > std::floor((double)g * f);
}

// ----------------------------------------------------------------------------------------------
// The manifest

json options_json(const PrepareOptions& o) {
    return {{"field", o.field},
            {"val_fraction", o.val_fraction},
            {"eos", o.eos},
            {"skip_bad", o.skip_bad}};
}

std::string manifest_path_of(const std::string& dir) {
    return (fs::path(dir) / "manifest.json").string();
}

PreparedSet manifest_parse(const std::string& dir, const json& m) {
    const std::string path = manifest_path_of(dir);
    auto need = [&](const json& obj, const char* section, const char* key) -> const json& {
        if (!obj.is_object() || !obj.contains(key))
            throw InputError(str_cat(path, ": expected the key ", section, *section ? "." : "", key,
                                     ", found none"));
        return obj[key];
    };
    auto num = [&](const json& obj, const char* section, const char* key) -> int64_t {
        const json& v = need(obj, section, key);
        if (!v.is_number_integer())
            throw InputError(str_cat(path, ": ", section, ".", key, ": expected an integer, found ",
                                     json_kind(v)));
        return v.get<int64_t>();
    };
    if (!m.is_object())
        throw InputError(str_cat(path, ": expected a JSON object, found ", json_kind(m)));
    if (m.value("version", 0) != kManifestVersion)
        throw InputError(str_cat(path, ": version: expected ", kManifestVersion, ", found ",
                                 m.contains("version") ? m["version"].dump() : "none"));
    PreparedSet s;
    s.dir = dir;
    s.manifest_path = path;
    s.train_path = (fs::path(dir) / "train.bin").string();
    s.val_path = (fs::path(dir) / "val.bin").string();
    const json& tok = need(m, "", "tokenizer");
    const json& spec = need(tok, "tokenizer", "spec");
    if (!spec.is_string())
        throw InputError(
            str_cat(path, ": tokenizer.spec: expected a string, found ", json_kind(spec)));
    s.tokenizer = spec.get<std::string>();
    s.vocab_size = (int)num(tok, "tokenizer", "vocab_size");
    s.bos_token = (int)num(tok, "tokenizer", "bos_token");
    s.eos_token = (int)num(tok, "tokenizer", "eos_token");
    const json& c = need(m, "", "counts");
    s.documents = num(c, "counts", "documents");
    s.train_documents = num(c, "counts", "train_documents");
    s.val_documents = num(c, "counts", "val_documents");
    s.train_tokens = num(c, "counts", "train_tokens");
    s.val_tokens = num(c, "counts", "val_tokens");
    s.input_bytes = num(c, "counts", "input_bytes");
    s.skipped_lines = num(c, "counts", "skipped_lines");
    const json& h = need(m, "", "histogram");
    const json& edges = need(h, "histogram", "edges");
    const json& counts = need(h, "histogram", "counts");
    if (!edges.is_array() || !counts.is_array() ||
        (edges.size() != counts.size() + 1 && !edges.empty()))
        throw InputError(
            str_cat(path,
                    ": histogram: expected arrays edges and counts with one more edge than "
                    "counts, found ",
                    edges.size(), " and ", counts.size()));
    for (const json& e : edges) s.hist_edges.push_back(e.get<int64_t>());
    for (const json& e : counts) s.hist_counts.push_back(e.get<int64_t>());
    const json& inputs = need(m, "", "inputs");
    if (!inputs.is_array())
        throw InputError(str_cat(path, ": inputs: expected an array, found ", json_kind(inputs)));
    for (const json& in : inputs) {
        const json& p = need(in, "inputs[]", "path");
        if (!p.is_string())
            throw InputError(
                str_cat(path, ": inputs[].path: expected a string, found ", json_kind(p)));
        s.input_files.push_back(p.get<std::string>());
    }
    return s;
}

json manifest_load(const std::string& path) {
    const std::optional<std::string> text = text_file_read(path);
    if (!text)
        throw InputError(
            str_cat(path, ": not found (is this a folder `tessera data prepare` wrote?)"));
    return json_parse_text(*text, path, "a prepared data manifest");
}

// Whether `dir` holds a complete output of exactly these inputs (path, bytes, sha256), tokenizer
// and options. Hashes the inputs only when everything cheaper already matches.
bool manifest_up_to_date(const std::string& dir, std::vector<PrepareInput>& inputs,
                         const std::string& tok_sha, const PrepareOptions& opt) {
    json m;
    try {
        m = manifest_load(manifest_path_of(dir));
        manifest_parse(dir, m);
    } catch (const std::exception&) {  // none, or not one this version reads: prepare again
        return false;
    }
    if (m["tokenizer"].value("sha256", "") != tok_sha ||
        m.value("options", json()) != options_json(opt))
        return false;
    const json& mi = m.value("inputs", json());
    if (!mi.is_array() || mi.size() != inputs.size()) return false;
    for (size_t i = 0; i < inputs.size(); i++)
        if (!mi[i].is_object() || mi[i].value("path", "") != inputs[i].path ||
            mi[i].value("bytes", (int64_t)-1) != inputs[i].bytes)
            return false;
    PreparedSet s = manifest_parse(dir, m);
    std::error_code ec;
    auto shard_ok = [&](const std::string& p, int64_t tokens) {
        auto size = (int64_t)fs::file_size(p, ec);
        return !ec && (size == 1024 + 2 * tokens || size == 1024 + 4 * tokens);
    };
    auto idx_size = (int64_t)fs::file_size(fs::path(dir) / "train.idx", ec);
    if (ec || idx_size != 8 * (s.train_documents + 1) || !shard_ok(s.train_path, s.train_tokens) ||
        !shard_ok(s.val_path, s.val_tokens))
        return false;
    for (size_t i = 0; i < inputs.size(); i++) {
        inputs[i].sha256 = sha256_file_hex(inputs[i].path);
        if (mi[i].value("sha256", "") != inputs[i].sha256) return false;
    }
    return true;
}

// ----------------------------------------------------------------------------------------------
// The run: reader, workers, progress

struct ChunkRecord {
    int input;
    std::string part_path;
};

// Errors are kept in input order: after a failure, chunks that come earlier still finish (and
// may fail first), later ones are dropped, so the error reported is the first bad line whatever
// the thread count. A cancel stops everything at the next document.
class PrepareRun {
  public:
    PrepareRun(const PrepareOptions& opt, std::vector<PrepareInput>& inputs, const Tokenizer& tok,
               int bos, int eos, const std::string& tok_sha, const std::string& parts_dir)
        : opt_(opt),
          inputs_(inputs),
          tok_(tok),
          bos_(bos),
          eos_(eos),
          tok_sha_(tok_sha),
          parts_dir_(parts_dir),
          chunks_done_(inputs.size(), 0),
          chunks_total_(inputs.size(), -1) {}

    // Runs to the end; false when the progress callback cancelled. Rethrows the first failure.
    bool run(int threads, const std::function<bool(const PrepareProgress&)>& progress) {
        t0_ = std::chrono::steady_clock::now();
        capacity_ = (size_t)threads * 2;
        std::thread reader([this] { read_all(); });
        std::vector<std::thread> pool;
        pool.reserve((size_t)threads);
        for (int i = 0; i < threads; i++) pool.emplace_back([this] { work(); });
        std::exception_ptr callback_error;
        while (true) {  // progress at the start, then every 200 ms until the end
            bool go = true;
            try {
                go = !progress || progress(snapshot());
            } catch (...) {  // the threads must be joined before it goes on
                callback_error = std::current_exception();
                go = false;
            }
            if (!go) {
                std::lock_guard<std::mutex> lk(m_);
                cancel_ = true;
                work_cv_.notify_all();
                space_cv_.notify_all();
                break;
            }
            std::unique_lock<std::mutex> lk(m_);
            if (main_cv_.wait_for(lk, std::chrono::milliseconds(200), [&] { return finished(); }))
                break;
        }
        reader.join();
        for (auto& t : pool) t.join();
        if (callback_error) std::rethrow_exception(callback_error);
        if (cancel_) return false;
        if (error_) std::rethrow_exception(error_);
        return true;
    }

    PrepareProgress snapshot() const {
        PrepareProgress p;
        p.bytes_done = bytes_done_;
        for (const PrepareInput& in : inputs_) p.bytes_total += in.bytes;
        p.documents = documents_;
        p.tokens = tokens_;
        p.skipped_lines = skipped_;
        p.inputs_done = inputs_done_;
        p.inputs_total = (int)inputs_.size();
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        return p;
    }

    const std::vector<ChunkRecord>& chunks() const { return chunks_; }
    int reused() const { return reused_; }

  private:
    const PrepareOptions& opt_;
    std::vector<PrepareInput>& inputs_;
    const Tokenizer& tok_;
    const int bos_, eos_;
    const std::string tok_sha_, parts_dir_;
    std::chrono::steady_clock::time_point t0_;

    std::mutex m_;
    std::condition_variable work_cv_, space_cv_, main_cv_;
    struct Queued {
        PrepareChunk chunk;
        int64_t order;  // the chunk's place in input order
    };
    std::deque<Queued> queue_;
    size_t capacity_ = 2;
    bool reader_done_ = false;
    int busy_ = 0;
    std::atomic<bool> cancel_{false};
    std::exception_ptr error_;
    std::atomic<int64_t> error_order_{INT64_MAX};  // the failed chunk's order (INT64_MAX: none)
    std::vector<int> chunks_done_, chunks_total_;  // per input (under m_)
    std::vector<ChunkRecord> chunks_;              // the reader's, in order
    int reused_ = 0;
    std::atomic<int64_t> bytes_done_{0}, documents_{0}, tokens_{0}, skipped_{0};
    std::atomic<int> inputs_done_{0};

    bool finished() const { return reader_done_ && queue_.empty() && busy_ == 0; }
    // whether work on the chunk of this order is wasted
    bool abandoned(int64_t order) const { return cancel_ || error_order_ < order; }

    // Keeps the failure with the lowest order.
    void fail(int64_t order) {
        std::lock_guard<std::mutex> lk(m_);
        if (order < error_order_) error_ = std::current_exception(), error_order_ = order;
        space_cv_.notify_all();
    }

    std::string part_path(const PrepareChunk& c) const {
        const PrepareInput& in = inputs_[c.input];
        std::string key = str_cat("tessera-part 1\n", in.path, "\n", in.bytes, "\n", in.mtime_ns,
                                  "\n", c.index, "\n", opt_.chunk_bytes, "\n", tok_sha_, "\n",
                                  opt_.field, "\n", bos_, " ", eos_);
        return (fs::path(parts_dir_) / (sha256_hex(key).substr(0, 32) + ".part")).string();
    }

    // Under m_: one more chunk of `input` is finished.
    void chunk_done_locked(int input) {
        if (++chunks_done_[input] == chunks_total_[input]) inputs_done_++;
    }

    void read_all() {
        int64_t order = 0;
        try {
            for (size_t i = 0; i < inputs_.size() && !abandoned(order); i++) {
                int n_chunks = 0;
                std::string sha =
                    prepare_input_read(inputs_[i], (int)i, opt_.chunk_bytes, [&](PrepareChunk&& c) {
                        n_chunks++;
                        std::string path = part_path(c);
                        chunks_.push_back({c.input, path});
                        Part head;
                        // finished by an earlier run (one that skipped bad lines only serves
                        // --skip-bad)
                        if (part_read(path, head, false) && (opt_.skip_bad || head.skipped == 0)) {
                            std::lock_guard<std::mutex> lk(m_);
                            reused_++;
                            order++;
                            bytes_done_ += c.source_bytes;
                            documents_ += (int64_t)head.documents;
                            tokens_ += (int64_t)head.tokens;
                            skipped_ += (int64_t)head.skipped;
                            chunk_done_locked(c.input);
                            return !abandoned(order);
                        }
                        std::unique_lock<std::mutex> lk(m_);
                        space_cv_.wait(
                            lk, [&] { return abandoned(order) || queue_.size() < capacity_; });
                        if (abandoned(order)) return false;
                        queue_.push_back({std::move(c), order++});
                        work_cv_.notify_one();
                        return true;
                    });
                std::lock_guard<std::mutex> lk(m_);
                inputs_[i].sha256 = sha;
                chunks_total_[i] = n_chunks;
                if (chunks_done_[i] == chunks_total_[i]) inputs_done_++;
            }
        } catch (...) {
            fail(order);
        }
        std::lock_guard<std::mutex> lk(m_);
        reader_done_ = true;
        work_cv_.notify_all();
        main_cv_.notify_all();
    }

    void work() {
        while (true) {
            Queued q;
            {
                std::unique_lock<std::mutex> lk(m_);
                work_cv_.wait(lk, [&] { return cancel_ || !queue_.empty() || reader_done_; });
                if (cancel_ || queue_.empty()) return;
                q = std::move(queue_.front());
                queue_.pop_front();
                busy_++;
                space_cv_.notify_one();
            }
            if (!abandoned(q.order)) {
                try {
                    tokenize(q.chunk, q.order);
                } catch (...) {
                    fail(q.order);
                }
            }
            std::lock_guard<std::mutex> lk(m_);
            busy_--;
            if (finished()) main_cv_.notify_all();
        }
    }

    void tokenize(const PrepareChunk& c, int64_t order) {
        Part part;
        int64_t credited = 0, skipped = 0;
        bool stopped = false;
        prepare_chunk_documents(c, inputs_[c.input], opt_.field, opt_.skip_bad, skipped,
                                [&](std::string_view text, int64_t bytes) {
                                    if (abandoned(order)) {
                                        stopped = true;
                                        return false;
                                    }
                                    bytes_done_ += bytes;
                                    credited += bytes;
                                    if (text.empty()) return true;  // an empty document is left out
                                    const size_t before = part.ids.size();
                                    if (bos_ >= 0) part.ids.push_back((uint32_t)bos_);
                                    for (int id : tok_.encode(text))
                                        part.ids.push_back((uint32_t)id);
                                    if (eos_ >= 0) part.ids.push_back((uint32_t)eos_);
                                    part.lengths.push_back((uint32_t)(part.ids.size() - before));
                                    documents_++;
                                    tokens_ += (int64_t)(part.ids.size() - before);
                                    return true;
                                });
        if (stopped) return;
        part.documents = part.lengths.size();
        part.tokens = part.ids.size();
        part.skipped = (uint64_t)skipped;
        part_write(part_path(c), part);
        skipped_ += skipped;
        bytes_done_ += c.source_bytes - credited;
        std::lock_guard<std::mutex> lk(m_);
        chunk_done_locked(c.input);
    }
};

}  // namespace

// ----------------------------------------------------------------------------------------------
// Assembly and the public functions

namespace {

// Removes what a killed run may have left half-written: temp files of the outputs and of parts.
void temp_files_remove(const std::string& out, const std::string& parts_dir) {
    std::error_code ec;
    for (const std::string& dir : {out, parts_dir}) {
        if (!fs::is_directory(dir, ec)) continue;
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (e.path().filename().string().find(".tmp.") != std::string::npos)
                fs::remove(e.path(), ec);
    }
}

// Tokens-per-document histogram: buckets of width 1 below 4 tokens, then four per octave (each
// [2^j, 2^(j+1)) split into quarters), fine enough to show the spread of documents of one size
// class (Brown's 500 documents all fall in one power-of-two bucket).
size_t hist_bucket(uint64_t tokens) {
    if (tokens < 4) return (size_t)tokens;
    const int j = std::bit_width(tokens) - 1;  // tokens in [2^j, 2^(j+1)), j >= 2
    return 4 + (size_t)(j - 2) * 4 + (size_t)((tokens >> (j - 2)) & 3);
}
// The first token count of bucket b.
int64_t hist_edge(size_t b) {
    if (b < 4) return (int64_t)b;
    const int j = (int)(b - 4) / 4 + 2, quarter = (int)(b - 4) % 4;
    return ((int64_t)1 << j) + (int64_t)quarter * ((int64_t)1 << (j - 2));
}

}  // namespace

PreparedSet data_prepare(const PrepareOptions& opt,
                         const std::function<bool(const PrepareProgress&)>& progress) {
    if (opt.tokenizer.empty())
        throw InputError("data prepare: expected --tokenizer FILE|DIR|gpt2|bytes, found nothing");
    if (opt.out.empty()) throw InputError("data prepare: expected --out DIR, found nothing");
    if (!(opt.val_fraction >= 0 && opt.val_fraction <= 0.5))
        throw InputError(
            str_cat("data prepare: --val-fraction: expected a number in [0, 0.5], found ",
                    opt.val_fraction));
    if (opt.threads < 0)
        throw InputError(str_cat("data prepare: --threads: expected 0 (all cores) or more, found ",
                                 opt.threads));
    if (opt.field.empty())
        throw InputError("data prepare: --field: expected a JSON key, found an empty string");
    if (opt.chunk_bytes < 1)
        throw InputError(
            str_cat("data prepare: chunk_bytes: expected >= 1, found ", opt.chunk_bytes));
    const std::string out = opt.out;
    if (fs::exists(out) && !fs::is_directory(out))
        throw InputError(str_cat("data prepare: --out ", out, ": expected a folder, found a file"));

    std::vector<PrepareInput> inputs = prepare_inputs_expand(opt.inputs);
    std::unique_ptr<Tokenizer> tok = tokenizer_make(opt.tokenizer);
    const TokenizerId tid = tokenizer_identity(opt.tokenizer);
    const int bos = tok->adds_bos() ? tok->bos_token() : -1;
    const int eos = opt.eos ? tok->eot_token() : -1;
    int64_t bytes_total = 0;
    for (const PrepareInput& in : inputs) bytes_total += in.bytes;
    const auto t0 = std::chrono::steady_clock::now();
    auto final_progress = [&](const PreparedSet& s) {
        if (!progress) return;
        PrepareProgress p;
        p.bytes_done = p.bytes_total = bytes_total;
        p.documents = s.documents;
        p.tokens = s.train_tokens + s.val_tokens;
        p.skipped_lines = s.skipped_lines;
        p.inputs_done = p.inputs_total = (int)inputs.size();
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        progress(p);
    };

    if (manifest_up_to_date(out, inputs, tid.sha256, opt)) {
        PreparedSet s = prepared_read(out);
        s.up_to_date = true;
        final_progress(s);
        return s;
    }

    const std::string parts_dir = (fs::path(out) / ".parts").string();
    const bool out_created = !fs::exists(out);
    fs::create_directories(parts_dir);
    temp_files_remove(out, parts_dir);
    const int threads =
        opt.threads > 0 ? opt.threads : (int)std::max(1u, std::thread::hardware_concurrency());
    PrepareRun run(opt, inputs, *tok, bos, eos, tid.sha256, parts_dir);
    if (!run.run(threads, progress)) {
        std::error_code ec;
        fs::remove_all(parts_dir, ec);
        if (out_created) fs::remove(out, ec);  // only when empty
        throw PrepareCancelled();
    }

    // Assemble: documents in order, the validation ones split off
    const auto& chunks = run.chunks();
    int64_t n_docs = 0;
    for (const ChunkRecord& c : chunks) {
        Part head;
        TS_CHECK(part_read(c.part_path, head, false), "part ", c.part_path,
                 " is missing or incomplete");
        n_docs += (int64_t)head.documents;
    }
    PreparedSet s;
    s.dir = out;
    s.manifest_path = manifest_path_of(out);
    s.train_path = (fs::path(out) / "train.bin").string();
    s.val_path = (fs::path(out) / "val.bin").string();
    s.tokenizer = opt.tokenizer;
    s.vocab_size = tok->vocab_size();
    s.bos_token = bos;
    s.eos_token = eos;
    s.parts_total = (int)chunks.size();
    s.parts_reused = run.reused();
    std::vector<uint32_t> train, val;
    std::vector<uint64_t> index;
    std::vector<int64_t> input_docs(inputs.size(), 0), input_skipped(inputs.size(), 0);
    int64_t g = 0;
    for (const ChunkRecord& c : chunks) {
        Part part;
        TS_CHECK(part_read(c.part_path, part, true), "part ", c.part_path,
                 " is missing or incomplete");
        input_docs[c.input] += (int64_t)part.documents;
        input_skipped[c.input] += (int64_t)part.skipped;
        s.skipped_lines += (int64_t)part.skipped;
        const uint32_t* p = part.ids.data();
        for (uint32_t len : part.lengths) {
            const bool is_val = split_is_val(g++, n_docs, opt.val_fraction);
            if (!is_val) index.push_back(train.size());
            (is_val ? val : train).insert((is_val ? val : train).end(), p, p + len);
            (is_val ? s.val_documents : s.train_documents)++;
            p += len;
            size_t b = hist_bucket(len);
            if (b >= s.hist_counts.size()) s.hist_counts.resize(b + 1, 0);
            s.hist_counts[b]++;
        }
    }
    index.push_back(train.size());
    s.documents = n_docs;
    s.train_tokens = (int64_t)train.size();
    s.val_tokens = (int64_t)val.size();
    s.input_bytes = bytes_total;
    if (!s.hist_counts.empty()) {
        for (size_t b = 0; b <= s.hist_counts.size(); b++) s.hist_edges.push_back(hist_edge(b));
    }

    json m;
    m["format"] = "tessera prepared data";
    m["version"] = kManifestVersion;
    m["tokenizer"] = {{"spec", opt.tokenizer},      {"sha256", tid.sha256}, {"files", tid.files},
                      {"vocab_size", s.vocab_size}, {"bos_token", bos},     {"eos_token", eos}};
    json jin = json::array();
    for (size_t i = 0; i < inputs.size(); i++) {
        jin.push_back({{"path", inputs[i].path},
                       {"bytes", inputs[i].bytes},
                       {"sha256", inputs[i].sha256},
                       {"documents", input_docs[i]},
                       {"skipped_lines", input_skipped[i]}});
        s.input_files.push_back(inputs[i].path);
    }
    m["inputs"] = jin;
    m["options"] = options_json(opt);
    m["outputs"] = {{"train", "train.bin"}, {"val", "val.bin"}, {"train_index", "train.idx"}};
    m["counts"] = {{"documents", s.documents},         {"train_documents", s.train_documents},
                   {"val_documents", s.val_documents}, {"train_tokens", s.train_tokens},
                   {"val_tokens", s.val_tokens},       {"input_bytes", s.input_bytes},
                   {"skipped_lines", s.skipped_lines}};
    m["histogram"] = {{"edges", s.hist_edges}, {"counts", s.hist_counts}};

    // The manifest goes first and comes back last: a folder with a manifest is always complete.
    fs::remove(s.manifest_path);
    shard_write(s.train_path, train);
    shard_write(s.val_path, val);
    file_write_atomic((fs::path(out) / "train.idx").string(),
                      {{index.data(), index.size() * sizeof(uint64_t)}});
    const std::string text = m.dump(2) + "\n";
    file_write_atomic(s.manifest_path, text);
    std::error_code ec;
    fs::remove_all(parts_dir, ec);
    final_progress(s);
    return s;
}

PreparedSet prepared_read(const std::string& dir) {
    const std::string path = manifest_path_of(dir);
    json m = manifest_load(path);
    try {
        return manifest_parse(dir, m);
    } catch (const json::exception&
                 e) {  // a value of the wrong type where manifest_parse does not check
        throw InputError(str_cat(path, ": malformed manifest (", e.what(), ")"));
    }
}

std::vector<std::string> prepared_samples(const std::string& dir, const std::string& tokenizer,
                                          int n, int max_tokens) {
    PreparedSet s = prepared_read(dir);
    std::unique_ptr<Tokenizer> tok = tokenizer_make(tokenizer.empty() ? s.tokenizer : tokenizer);
    const std::string idx_path = (fs::path(dir) / "train.idx").string();
    std::error_code ec;
    const auto idx_bytes = (int64_t)fs::file_size(idx_path, ec);
    if (ec || idx_bytes != 8 * (s.train_documents + 1))
        throw InputError(str_cat(idx_path, ": expected ", 8 * (s.train_documents + 1), " bytes (",
                                 s.train_documents, " + 1 offsets), found ",
                                 ec ? std::string("no file") : str_cat(idx_bytes, " bytes")));
    const int64_t count = std::min<int64_t>(std::max(n, 0), s.train_documents);
    std::vector<uint64_t> index((size_t)count + 1);
    FilePtr f(std::fopen(idx_path.c_str(), "rb"));
    if (!f || std::fread(index.data(), 8, index.size(), f.get()) != index.size())
        throw InputError(str_cat(idx_path, ": cannot read the document index"));
    std::vector<std::string> out;
    for (int64_t d = 0; d < count; d++) {
        std::vector<uint32_t> ids =
            shard_read_range(s.train_path, (int64_t)index[d], (int64_t)(index[d + 1] - index[d]));
        size_t b = 0, e = ids.size();
        if (s.bos_token >= 0 && b < e && ids[b] == (uint32_t)s.bos_token) b++;
        if (s.eos_token >= 0 && e > b && ids[e - 1] == (uint32_t)s.eos_token) e--;
        e = std::min(e, b + (size_t)std::max(max_tokens, 0));
        out.push_back(tok->decode(std::vector<int>(ids.begin() + (long)b, ids.begin() + (long)e)));
    }
    return out;
}

}  // namespace tessera
