// Checkpoints: one directory per saved step, written atomically, verified on load, rotated.
//
//   ROOT/
//     latest                  text: "step_00001200\n" (replaced atomically)
//     step_00001000/          complete: has manifest.json (written last, before the dir rename)
//       model.safetensors
//       optim.safetensors
//       manifest.json         {"format":"tessera-checkpoint","version":1,"step":N,
//                              "files":[{"name","bytes","crc32"}...],"state":{...}}
//     .tmp-step_00001200.PID  a save in progress (or a crashed one): ignored, deleted on next save
//
// See docs/checkpoints.md for the atomicity argument.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/io/safetensors.h"

namespace tessera {

struct CheckpointFile {
    std::string name;  // written as <name>.safetensors; [A-Za-z0-9_.-]+, not "manifest"
    std::vector<TensorView> tensors;
};

// Writes ROOT/step_%08d/ atomically and points ROOT/latest at it. Keeps the `keep` newest
// complete checkpoints by step (the one just written always survives; keep <= 0 keeps all) and
// deletes stale temp dirs. Saving a step that already exists replaces it. Returns the final dir.
std::string checkpoint_save(const std::string& root, int64_t step,
                            const std::vector<CheckpointFile>& files, const nlohmann::json& state,
                            int keep);

// bugprone-exception-escape: clang-tidy 14 follows the implicit move into nlohmann::json's
// internals; every member moves without throwing (the static_assert below says so).
struct Checkpoint {  // NOLINT(bugprone-exception-escape)
    std::string dir;
    int64_t step = 0;
    nlohmann::json state;
    std::map<std::string, SafetensorsFile> files;  // key = name without ".safetensors"
};
static_assert(std::is_nothrow_move_constructible_v<Checkpoint>);

// `path` is ROOT (-> the newest complete checkpoint) or a step dir. Verifies the manifest and
// every listed file's size and crc32 before parsing it; InputError naming the dir, the file and
// expected vs found otherwise.
Checkpoint checkpoint_load(const std::string& path);

// The checkpoint's `name`.safetensors; InputError "checkpoint DIR: missing NAME.safetensors".
const SafetensorsFile& checkpoint_file(const Checkpoint& ck, const std::string& name);

// The dir of the checkpoint ROOT/latest names if it is complete, else the complete step dir with
// the highest step; nullopt when there is none (or ROOT does not exist).
std::optional<std::string> checkpoint_latest(const std::string& root);

}  // namespace tessera
