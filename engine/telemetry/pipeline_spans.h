// What one step's timeline spans (every rank's, on one time base: SpanRecord) say about its
// pipeline. One definition for the Timeline page and `tessera runs show`.
#pragma once
#include <string_view>
#include <utility>
#include <vector>

#include "engine/telemetry/telemetry.h"

namespace tessera {

// forward, backward, forward_backward, backward_input (B) and backward_weight (W): a stage's
// compute; recv and optimizer spans are not.
bool span_is_compute(std::string_view kind);

// First start and last end over the spans other than "optimizer", seconds; {inf, -inf} if none.
std::pair<double, double> pipeline_window_s(const std::vector<SpanRecord>& spans);

// The step's measured bubble: the idle share of the pipeline window over every (stage, rank)
// row that has a span, 1 − Σ compute / (rows × window). -1 when there is no compute span.
double pipeline_bubble_measured(const std::vector<SpanRecord>& spans);

}  // namespace tessera
