// The inputs of `tessera data prepare` (prepare.h): expanding files, folders and globs into a
// sorted list, reading each one in chunks of whole documents (gzip through zlib), and cutting a
// chunk into its documents' texts (JSONL lines parsed with nlohmann-json).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

enum class PrepareInputKind { txt, jsonl, jsonl_gz };

struct PrepareInput {
    std::string path;  // absolute, normalised
    PrepareInputKind kind = PrepareInputKind::txt;
    int64_t bytes = 0;     // the file's size on disk
    int64_t mtime_ns = 0;  // last modification
    std::string sha256;    // of the file's bytes; filled when it is read
};

// Files, folders (searched recursively for .txt, .jsonl, .jsonl.gz) and glob(3) patterns ->
// the files, sorted by path, each once. InputError naming the input for: a missing file, a
// pattern or folder matching no such file, a file named explicitly with another extension.
std::vector<PrepareInput> prepare_inputs_expand(const std::vector<std::string>& inputs);

struct PrepareChunk {
    int input = 0;             // index into the inputs
    int index = 0;             // chunk number within its input
    int64_t first_line = 1;    // JSONL: the line number of text's first line
    int64_t source_bytes = 0;  // the file bytes it accounts for (compressed ones for .gz)
    std::string text;          // a whole .txt file, or whole JSONL lines
};

// Reads `in` start to end and hands on chunks in order: a .txt file is one chunk, JSONL comes in
// chunks of whole lines of about chunk_bytes (uncompressed). on_chunk returns false to stop.
// Returns the sha256 of the file's bytes ("" when stopped). InputError naming the file when it
// cannot be read or is not valid gzip.
std::string prepare_input_read(const PrepareInput& in, int input_index, int64_t chunk_bytes,
                               const std::function<bool(PrepareChunk&&)>& on_chunk);

// Calls on_document(text, bytes) for each document of a chunk: the .txt file's text, or the
// `field` string of each non-empty JSONL line (bytes: the line's share of chunk.text). A malformed
// line throws InputError "FILE:LINE: expected ..., found ..." or, with skip_bad, is counted in
// `skipped`. on_document returns false to stop.
void prepare_chunk_documents(
    const PrepareChunk& chunk, const PrepareInput& in, const std::string& field, bool skip_bad,
    int64_t& skipped, const std::function<bool(std::string_view text, int64_t bytes)>& on_document);

}  // namespace tessera
