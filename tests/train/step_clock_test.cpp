// StepClock (engine/train/step_clock.h): a step counts from the previous step's end, so the time
// between steps is in perf/step_ms and perf/tok_per_s, as in a wall-clock figure over the run;
// an evaluation or a checkpoint in between is not.
#include "engine/train/step_clock.h"

#include <gtest/gtest.h>

using tessera::StepClock;

TEST(StepClock, StepsCountFromThePreviousStepsEnd) {
    StepClock c;
    c.step_begin(100.0);  // the run's first step: from its own start
    const double first = c.step_end(110.0);
    c.step_begin(110.5);  // 0.5 s of bookkeeping and setup between the two steps
    const double second = c.step_end(120.0);
    c.step_begin(120.25);
    const double third = c.step_end(130.0);
    EXPECT_DOUBLE_EQ(first, 10.0);
    EXPECT_DOUBLE_EQ(second, 10.0);
    EXPECT_DOUBLE_EQ(third, 10.0);
    // over the three steps, their times add up to the wall clock from the first start
    EXPECT_DOUBLE_EQ(first + second + third, 130.0 - 100.0);
}

TEST(StepClock, AnEvaluationOrACheckpointBetweenStepsIsNotAStepsTime) {
    StepClock c;
    c.step_begin(0.0);
    EXPECT_DOUBLE_EQ(c.step_end(2.0), 2.0);
    c.interrupted();  // an evaluation ran from 2 to 9
    c.step_begin(9.0);
    EXPECT_DOUBLE_EQ(c.step_end(11.0), 2.0);
    c.step_begin(11.5);  // and the next step counts from the previous end again
    EXPECT_DOUBLE_EQ(c.step_end(13.0), 2.0);
}
