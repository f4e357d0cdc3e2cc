// How fast Tessera tokenizes, next to the reference it is tested against: the Brown corpus as
// plain text (its 500 documents, about 6 MB), encoded document by document with each real
// tokenizer.json (Llama 3, Qwen3, Llama 2) and GPT-2, on 1 thread and on every core; then the same
// documents encoded by @lenml/tokenizers (transformers' tokenizers ported to JavaScript) under
// node, timed inside node after loading (node runs one thread). MB/s = UTF-8 input bytes over wall
// seconds of encoding only, word caches empty at the start; ids are checked equal to node's for
// every document.
//   tokenize [MB]      (default: the whole corpus; needs scripts/fetch-data.sh and node)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/data/brown.h"
#include "engine/data/cache.h"
#include "engine/data/tokenizer.h"

using namespace tessera;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Encodes every document on `threads` threads (documents handed out in order), each time with a
// freshly loaded tokenizer (untimed), so every run starts with empty word caches as a
// `tessera data prepare` does; best of 3.
double encode_seconds(const std::string& spec, const std::vector<std::string>& docs, int threads,
                      std::vector<std::vector<int>>& ids) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        const std::unique_ptr<Tokenizer> tok = tokenizer_make(spec);
        std::atomic<size_t> next{0};
        auto t0 = Clock::now();
        auto work = [&] {
            for (size_t d; (d = next.fetch_add(1)) < docs.size();) ids[d] = tok->encode(docs[d]);
        };
        std::vector<std::thread> pool;
        for (int t = 1; t < threads; ++t) pool.emplace_back(work);
        work();
        for (auto& t : pool) t.join();
        best = std::min(best, seconds_since(t0));
    }
    return best;
}

// node encodes the documents in `docs_json` with the tokenizer in `dir`; returns its seconds and
// ids.
bool node_reference(const std::string& dir, const std::string& docs_json, double& seconds,
                    std::vector<std::vector<int>>& ids) {
    const std::string out = docs_json + ".out.json";
    const std::string script =
        "const fs = require('fs'); const { TokenizerLoader } = require(process.argv[1] + "
        "'/dist/main.js');"
        "const d = process.argv[2]; const rd = f => JSON.parse(fs.readFileSync(d + '/' + f, "
        "'utf8'));"
        "const tok = TokenizerLoader.fromPreTrained({tokenizerJSON: rd('tokenizer.json'),"
        "  tokenizerConfig: rd('tokenizer_config.json')});"
        "const docs = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));"
        "tok.encode(docs[0], {add_special_tokens: false});"
        "let best = 1e30, ids;"
        "for (let r = 0; r < 2; r++) { const t0 = process.hrtime.bigint();"
        "  ids = docs.map(t => tok.encode(t, {add_special_tokens: false}));"
        "  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9); }"
        "fs.writeFileSync(process.argv[4], JSON.stringify({seconds: best, ids}));";
    const std::string cmd = "node -e \"" + script + "\" '" +
                            data_npm_package_dir("@lenml/tokenizers") + "' '" + dir + "' '" +
                            docs_json + "' '" + out + "'";
    if (std::system(cmd.c_str()) != 0) return false;
    std::ifstream f(out);
    if (!f) return false;
    nlohmann::json j = nlohmann::json::parse(f);
    seconds = j["seconds"].get<double>();
    ids = j["ids"].get<std::vector<std::vector<int>>>();
    std::remove(out.c_str());
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    const double limit_mb = argc > 1 ? std::atof(argv[1]) : 1e9;
    std::vector<std::string> docs;
    size_t bytes = 0;
    for (const std::string& p : brown_document_paths()) {
        if (bytes / 1e6 >= limit_mb) break;
        docs.push_back(brown_document_text(p));
        bytes += docs.back().size();
    }
    const std::string docs_json =
        "/tmp/tessera_tokenize_bench_" + std::to_string(getpid()) + ".json";
    std::ofstream(docs_json) << nlohmann::json(docs).dump();
    const int cores = (int)std::max(1u, std::thread::hardware_concurrency());
    std::printf(
        "tokenize: %zu Brown documents, %.2f MB of UTF-8; MB/s of encoding (best of 3; node best "
        "of 2)\n",
        docs.size(), bytes / 1e6);
    std::printf("%-10s %12s %12s %12s %10s %8s\n", "tokenizer", "1 thread", "all cores", "node",
                "vs node", "ids");
    std::printf("%-10s %12s %12s %12s %10s %8s\n", "", "MB/s", "MB/s", "MB/s", "", "");
    int status = 0;
    for (const char* name : {"llama3", "qwen3", "llama2", "gpt2"}) {
        const bool gpt2 = std::string(name) == "gpt2";
        const std::string dir =
            gpt2 ? "" : data_npm_package_dir(std::string("@lenml/tokenizer-") + name) + "/models";
        const std::string spec = gpt2 ? "gpt2" : dir;
        try {
            tokenizer_make(spec);
        } catch (const std::exception& e) {
            std::printf("%-10s skipped: %s\n", name, e.what());
            continue;
        }
        std::vector<std::vector<int>> ids(docs.size());
        const double t1 = encode_seconds(spec, docs, 1, ids);
        const double tn = encode_seconds(spec, docs, cores, ids);
        double tnode = 0;
        std::vector<std::vector<int>> ref;
        // GPT-2's reference is gpt-3-encoder (tests/data), not @lenml/tokenizers: no node column
        const bool have_node = !gpt2 && node_reference(dir, docs_json, tnode, ref);
        const bool same = have_node && ref == ids;
        if (have_node && !same) status = 1;
        std::printf("%-10s %12.2f %12.2f %12s %10s %8s\n", name, bytes / 1e6 / t1, bytes / 1e6 / tn,
                    have_node ? std::to_string(bytes / 1e6 / tnode).substr(0, 6).c_str() : "-",
                    have_node ? (std::to_string(tnode / tn).substr(0, 5) + "x").c_str() : "-",
                    have_node ? (same ? "equal" : "DIFFER") : "-");
    }
    std::printf("(%d cores; 'vs node' = node's seconds over Tessera's on all cores)\n", cores);
    std::remove(docs_json.c_str());
    return status;
}
