// The config of a run stored in runs.db (runs.config_text), as the Monitor, Timeline and Compare
// pages read it: the one place they parse it.
#pragma once
#include <string>

#include "engine/config/config.h"
#include "engine/store/run_store.h"

namespace tessera::studio {

// `config_text` of a run in `store`, named `name` in messages: its relative paths (data.train,
// model.vocab, model.init_from) resolved against runs.db's folder — the project folder the run
// was started from, for a project's own runs.db — and its files not required to exist now
// (ConfigFiles::may_be_missing: the data may have moved since the run). InputError as
// config_parse throws it.
tessera::RunConfig stored_run_config(const tessera::RunStore& store, const std::string& config_text,
                                     const std::string& name);

}  // namespace tessera::studio
