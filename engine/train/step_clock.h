// StepClock: a training step's wall time as the user sees it. A step counts from the previous
// step's end to its own, so the time between two steps (the last one's bookkeeping, this one's
// setup, in which a GPU idles) is in it, as in a wall-clock tokens/s over many steps; after an
// evaluation or a checkpoint (interrupted()), or for a run's first step, it counts from its own
// start, so neither inflates the next step. Times in seconds on one monotonic clock.
#pragma once

namespace tessera {

class StepClock {
  public:
    void step_begin(double now_s) {
        if (!running_) from_s_ = now_s;
        running_ = true;
    }
    // The step's seconds; the next step counts from here.
    double step_end(double now_s) {
        const double s = now_s - from_s_;
        from_s_ = now_s;
        return s;
    }
    // Something that is not training ran since the last step_end (an evaluation, a checkpoint).
    void interrupted() { running_ = false; }

  private:
    double from_s_ = 0;
    bool running_ = false;
};

}  // namespace tessera
