// Human-readable views of runs.db for `tessera runs list|show` (engine/cli/runs.cpp). Kept in the
// store library so they are tested without the rest of the engine.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

#include "engine/store/run_store.h"

namespace tessera {

// Table: id, name, status, steps, world, start, duration, final train/loss.
void store_write_run_table(std::ostream& out, const RunStore& store);
// One run: status/message, host, timing, the devices its ranks recorded, last value of every
// metric, checkpoints, errors, config.
// Throws InputError if the run does not exist.
void store_write_run_detail(std::ostream& out, const RunStore& store, int64_t run_id);

std::string store_format_duration(double seconds);  // "12.3s", "4m05s", "2h07m"
std::string store_format_time(double epoch_s);      // local "YYYY-MM-DD HH:MM:SS"

}  // namespace tessera
