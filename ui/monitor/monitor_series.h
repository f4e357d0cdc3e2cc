// Monitor page data helpers (Qt-free): the debiased exponential moving average the loss chart
// smooths with, computed on full-resolution data (display downsampling is QCustomPlot's adaptive
// sampling, never the smoothing's input).
#pragma once
#include <cmath>
#include <vector>

namespace tessera::studio {

// s_t = beta s_{t-1} + (1 - beta) x_t with s_0 = 0, reported as s_t / (1 - beta^t) (Adam-style
// debiasing), so the first smoothed point equals the first raw value. NaN inputs yield NaN and
// leave the state untouched. beta in [0, 1): 0 = no smoothing.
struct EmaState {
    double beta = 0;
    double acc = 0;
    double beta_pow = 1;  // beta^t
    double push(double x) {
        if (std::isnan(x)) return x;
        acc = beta * acc + (1 - beta) * x;
        beta_pow *= beta;
        double denom = 1 - beta_pow;
        return denom > 0 ? acc / denom : x;
    }
};

// The whole series at once (same result as pushing one by one).
inline std::vector<double> monitor_ema_debiased(const std::vector<double>& x, double beta) {
    EmaState s{beta};
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = s.push(x[i]);
    return out;
}

}  // namespace tessera::studio
