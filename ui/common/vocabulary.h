// The telemetry vocabulary (engine/telemetry/metric_names.h: metric names, run statuses) for Qt
// code: the same constants, handed to Qt as QString.
#pragma once
#include <QString>
#include <string_view>

#include "engine/telemetry/metric_names.h"

namespace tessera::studio {

inline QString vocab(std::string_view s) {
    return QString::fromUtf8(s.data(), qsizetype(s.size()));
}

}  // namespace tessera::studio
