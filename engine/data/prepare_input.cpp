// `tessera data prepare`'s inputs: expansion (files, folders, globs), chunked reading (plain and
// gzip) and JSONL parsing. See prepare_input.h.
#include "engine/data/prepare_input.h"

#include <glob.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/core/error.h"
#include "engine/core/json_text.h"
#include "engine/core/sha256.h"
#include "engine/core/unique_fd.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

// ----------------------------------------------------------------------------------------------
// Expansion

const char* kExtensions = ".txt, .jsonl or .jsonl.gz";

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The kind of a file by its name; false when it is none of the three.
bool input_kind(const std::string& path, PrepareInputKind& kind) {
    if (ends_with(path, ".jsonl.gz"))
        kind = PrepareInputKind::jsonl_gz;
    else if (ends_with(path, ".jsonl"))
        kind = PrepareInputKind::jsonl;
    else if (ends_with(path, ".txt"))
        kind = PrepareInputKind::txt;
    else
        return false;
    return true;
}

PrepareInput input_stat(const fs::path& p, PrepareInputKind kind) {
    PrepareInput in;
    in.path = fs::absolute(p).lexically_normal().string();
    in.kind = kind;
    std::error_code ec;
    in.bytes = (int64_t)fs::file_size(p, ec);
    if (ec)
        throw InputError(
            str_cat("input ", p.string(), ": cannot read its size (", ec.message(), ")"));
    in.mtime_ns = (int64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
                      fs::last_write_time(p, ec).time_since_epoch())
                      .count();
    return in;
}

// The supported files under a folder, recursively; returns how many it added.
size_t folder_add(const fs::path& dir, std::vector<PrepareInput>& out) {
    size_t n = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(
             dir, fs::directory_options::follow_directory_symlink, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        PrepareInputKind kind;
        if (it->is_regular_file() && input_kind(it->path().filename().string(), kind)) {
            out.push_back(input_stat(it->path(), kind));
            n++;
        }
    }
    if (ec)
        throw InputError(
            str_cat("input folder ", dir.string(), ": cannot list it (", ec.message(), ")"));
    return n;
}

struct GlobDeleter {
    void operator()(glob_t* g) const {
        globfree(g);
        delete g;
    }
};

// ----------------------------------------------------------------------------------------------
// Reading

// Cuts `buf` into chunks of whole lines of about chunk_bytes and hands them on; keeps the tail
// (an unfinished line) unless `last`.
class LineChunker {
  public:
    LineChunker(int input, int64_t chunk_bytes, const std::function<bool(PrepareChunk&&)>& on_chunk)
        : input_(input), chunk_bytes_(chunk_bytes), on_chunk_(on_chunk) {}

    // `consumed`: file bytes read so far (credited to the chunks cut off here)
    bool feed(std::string& buf, int64_t consumed, bool last) {
        while ((int64_t)buf.size() >= chunk_bytes_ || (last && !buf.empty())) {
            size_t cut = buf.size();
            if (!last || (int64_t)buf.size() > chunk_bytes_) {
                size_t nl = buf.rfind('\n', (size_t)chunk_bytes_ - 1);
                if (nl == std::string::npos) nl = buf.find('\n', (size_t)chunk_bytes_);
                if (nl == std::string::npos) {
                    if (!last) return true;  // one long line: wait for its end
                } else {
                    cut = nl + 1;
                }
            }
            PrepareChunk c;
            c.input = input_;
            c.index = index_++;
            c.first_line = next_line_;
            c.text = buf.substr(0, cut);
            buf.erase(0, cut);
            next_line_ += std::count(c.text.begin(), c.text.end(), '\n');
            // a chunk accounts for the file bytes read up to its cut (all of them for the last)
            c.source_bytes = buf.empty() ? consumed - credited_
                                         : std::min(consumed - credited_, (int64_t)c.text.size());
            credited_ += c.source_bytes;
            if (!on_chunk_(std::move(c))) return false;
        }
        return true;
    }

  private:
    int input_;
    int64_t chunk_bytes_;
    const std::function<bool(PrepareChunk&&)>& on_chunk_;
    int index_ = 0;
    int64_t next_line_ = 1, credited_ = 0;
};

// ----------------------------------------------------------------------------------------------
// JSONL

std::string line_excerpt(std::string_view line) {
    std::string s(line.substr(0, 60));
    return str_cat("'", s, line.size() > 60 ? "...'" : "'");
}

// The field's text of one line; "" + a message in `why` when the line is malformed.
bool jsonl_line_text(std::string_view line, const std::string& field, std::string& text,
                     std::string& why) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
        why = str_cat("expected a JSON object, found invalid JSON (at byte ", e.byte, " of ",
                      line_excerpt(line), ")");
        return false;
    }
    if (!j.is_object()) {
        why = str_cat("expected a JSON object, found ", json_kind(j));
        return false;
    }
    auto it = j.find(field);
    if (it == j.end()) {
        std::string keys;
        int n = 0;
        for (auto k = j.begin(); k != j.end() && n < 8; ++k, ++n)
            keys += str_cat(n ? ", " : "", "\"", k.key(), "\"");
        why = str_cat("expected the key \"", field, "\" (--field), found ",
                      keys.empty() ? std::string("an empty object")
                                   : str_cat("the keys ", keys, j.size() > 8 ? ", ..." : ""));
        return false;
    }
    if (!it->is_string()) {
        why = str_cat("key \"", field, "\": expected a string, found ", json_kind(*it));
        return false;
    }
    text = it->get<std::string>();
    return true;
}

}  // namespace

std::vector<PrepareInput> prepare_inputs_expand(const std::vector<std::string>& inputs) {
    if (inputs.empty())
        throw InputError(str_cat("data prepare: expected at least one --input, found none"));
    std::vector<PrepareInput> out;
    for (const std::string& spec : inputs) {
        PrepareInputKind kind;
        if (spec.find_first_of("*?[") != std::string::npos) {
            std::unique_ptr<glob_t, GlobDeleter> g(new glob_t{});
            int rc = glob(spec.c_str(), 0, nullptr, g.get());
            if (rc == GLOB_NOMATCH)
                throw InputError(str_cat("input ", spec, ": the pattern matches no file"));
            if (rc != 0)
                throw InputError(str_cat("input ", spec, ": glob failed (error ", rc, ")"));
            size_t n = 0;
            for (size_t i = 0; i < g->gl_pathc; i++) {
                fs::path p(g->gl_pathv[i]);
                if (fs::is_directory(p))
                    n += folder_add(p, out);
                else if (fs::is_regular_file(p) && input_kind(p.filename().string(), kind))
                    out.push_back(input_stat(p, kind)), n++;
            }
            if (n == 0)
                throw InputError(str_cat("input ", spec, ": the pattern matches ", g->gl_pathc,
                                         " path(s) but no ", kExtensions, " file"));
        } else if (fs::is_directory(spec)) {
            if (folder_add(spec, out) == 0)
                throw InputError(str_cat("input folder ", spec, ": expected ", kExtensions,
                                         " files in it, found none"));
        } else if (!fs::exists(spec)) {
            throw InputError(str_cat("input ", spec, ": no such file or folder"));
        } else if (!input_kind(fs::path(spec).filename().string(), kind)) {
            throw InputError(str_cat("input ", spec, ": unsupported file type: expected ",
                                     kExtensions, ", found '", fs::path(spec).extension().string(),
                                     "'"));
        } else {
            out.push_back(input_stat(spec, kind));
        }
    }
    std::sort(out.begin(), out.end(),
              [](const PrepareInput& a, const PrepareInput& b) { return a.path < b.path; });
    out.erase(
        std::unique(out.begin(), out.end(),
                    [](const PrepareInput& a, const PrepareInput& b) { return a.path == b.path; }),
        out.end());
    return out;
}

std::string prepare_input_read(const PrepareInput& in, int input_index, int64_t chunk_bytes,
                               const std::function<bool(PrepareChunk&&)>& on_chunk) {
    FilePtr f(std::fopen(in.path.c_str(), "rb"));
    if (!f) throw InputError(str_cat(in.path, ": cannot open the input"));
    Sha256 hash;
    constexpr size_t kBlock = 1 << 20;
    std::unique_ptr<char[]> block(new char[kBlock]);
    int64_t consumed = 0;
    std::string buf;
    auto read_block = [&]() -> size_t {
        size_t n = std::fread(block.get(), 1, kBlock, f.get());
        if (std::ferror(f.get())) throw InputError(str_cat(in.path, ": read error"));
        hash.update(block.get(), n);
        consumed += (int64_t)n;
        return n;
    };
    if (in.kind == PrepareInputKind::txt) {
        while (size_t n = read_block()) buf.append(block.get(), n);
        PrepareChunk c;
        c.input = input_index;
        c.source_bytes = consumed;
        c.text = std::move(buf);
        if (!on_chunk(std::move(c))) return "";
        return hash.hex();
    }
    LineChunker chunker(input_index, std::max<int64_t>(chunk_bytes, 1), on_chunk);
    if (in.kind == PrepareInputKind::jsonl) {
        while (size_t n = read_block()) {
            buf.append(block.get(), n);
            if (!chunker.feed(buf, consumed, false)) return "";
        }
        if (!chunker.feed(buf, consumed, true)) return "";
        return hash.hex();
    }
    // .jsonl.gz: inflate (gzip, several members allowed) as the blocks arrive
    z_stream z{};
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        throw Error(str_cat(in.path, ": zlib inflateInit2 failed"));
    std::unique_ptr<z_stream, int (*)(z_stream*)> zguard(&z, &inflateEnd);
    std::unique_ptr<char[]> out(new char[kBlock]);
    bool stream_end = false;
    while (size_t n = read_block()) {
        z.next_in = (Bytef*)block.get();
        z.avail_in = (uInt)n;
        while (z.avail_in > 0) {
            if (stream_end) {  // another gzip member follows
                inflateReset(&z);
                stream_end = false;
            }
            z.next_out = (Bytef*)out.get();
            z.avail_out = (uInt)kBlock;
            int rc = inflate(&z, Z_NO_FLUSH);
            if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
                throw InputError(str_cat(in.path,
                                         ": not valid gzip data (zlib: ", z.msg ? z.msg : "error ",
                                         rc, ") after ", z.total_in, " compressed bytes"));
            buf.append(out.get(), kBlock - z.avail_out);
            if (rc == Z_STREAM_END) stream_end = true;
        }
        if (!chunker.feed(buf, consumed, false)) return "";
    }
    if (!stream_end)
        throw InputError(
            str_cat(in.path,
                    ": truncated gzip data: expected the end of the gzip stream, found the "
                    "end of the file after ",
                    consumed, " bytes"));
    if (!chunker.feed(buf, consumed, true)) return "";
    return hash.hex();
}

void prepare_chunk_documents(
    const PrepareChunk& chunk, const PrepareInput& in, const std::string& field, bool skip_bad,
    int64_t& skipped,
    const std::function<bool(std::string_view text, int64_t bytes)>& on_document) {
    if (in.kind == PrepareInputKind::txt) {
        on_document(chunk.text, chunk.source_bytes);
        return;
    }
    const double scale = chunk.text.empty() ? 0 : (double)chunk.source_bytes / chunk.text.size();
    std::string_view all(chunk.text);
    int64_t line_no = chunk.first_line;
    std::string text, why;
    for (size_t pos = 0; pos < all.size(); line_no++) {
        size_t nl = all.find('\n', pos);
        size_t end = nl == std::string_view::npos ? all.size() : nl;
        std::string_view line = all.substr(pos, end - pos);
        const int64_t bytes = (int64_t)((end + 1 - pos) * scale);
        pos = end + 1;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank line
        if (!jsonl_line_text(line, field, text, why)) {
            if (!skip_bad) throw InputError(str_cat(in.path, ":", line_no, ": ", why));
            skipped++;
            continue;
        }
        if (!on_document(text, bytes)) return;
    }
}

}  // namespace tessera
