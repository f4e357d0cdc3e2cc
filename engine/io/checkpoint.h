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

// What checkpoint_set_aside moved: `count` complete checkpoints, steps `first_step` to
// `last_step`, now under `dir`; count 0 (dir empty) when ROOT held none.
struct CheckpointsSetAside {
    std::string dir;
    int count = 0;
    int64_t first_step = 0, last_step = 0;
};

// A run that does not continue ROOT's checkpoints (a fresh start, or a resume from elsewhere)
// calls this before its first save: ROOT's complete step dirs and `latest` move into
// ROOT/earlier/<when the newest of them was written, local time>/, a checkpoint root of its own
// (sample, export and --resume-from read it), so that the new run's saves and rotation never
// replace or delete an earlier run's checkpoints. Renames only: nothing is copied or deleted.
CheckpointsSetAside checkpoint_set_aside(const std::string& root);

// Where the checkpoint a run recorded at `step_dir` (saved just before `recorded_at`, epoch
// seconds) is now: step_dir, or the same step dir under ROOT/earlier/*/ (a later run set it
// aside): of those complete, the one whose manifest was written last at or before recorded_at,
// within a minute (another run's checkpoint of the same step was written after it, or before
// it); nullopt when there is none (rotated away by checkpoint.keep, or removed).
std::optional<std::string> checkpoint_now_at(const std::string& step_dir, double recorded_at);

// The step of a checkpoint step dir's path (".../step_00001200" -> 1200); nullopt for any other.
std::optional<int64_t> checkpoint_dir_step(const std::string& step_dir);

// The dir of the checkpoint ROOT/latest names if it is complete, else the complete step dir with
// the highest step; nullopt when there is none (or ROOT does not exist).
std::optional<std::string> checkpoint_latest(const std::string& root);

}  // namespace tessera
