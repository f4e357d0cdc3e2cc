// Which device the Monitor page predicts a run for (Qt-free, tested without a display): the
// device the run recorded (rank 0's DeviceRecord, RunStore::devices) looked up in the device table
// (engine/plan), or, for a run with no record, the Plan page's default (device_default_name); and
// one line for the page that says which.
#pragma once
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/plan/estimator.h"
#include "engine/telemetry/telemetry.h"

namespace tessera::studio {

struct MonitorDevice {
    tessera::DeviceSpec spec;  // what the prediction is computed for
    bool recorded = false;     // spec is the run's own device (false: the default stands in)
    std::string text;          // e.g. "device: NVIDIA H200 (140.4 GiB) · prediction for H200"
};

// Throws InputError only if the default device is unknown (never for the table's defaults).
MonitorDevice monitor_prediction_device(const tessera::RunConfig& cfg,
                                        const std::vector<tessera::DeviceRecord>& devices);

}  // namespace tessera::studio
