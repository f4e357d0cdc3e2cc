// plan_suggest (fits, sorted, global batch kept, reasons from the numbers) and plan_validate
// (one issue per broken rule, on the key of the control that caused it).
#include "engine/plan/plan_search.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/core/parallel_for.h"
#include "engine/plan/estimator.h"
#include "engine/plan/plan_validate.h"

using namespace tessera;

namespace {

RunConfig gpt_config(const std::string& preset, const std::vector<std::string>& sets = {}) {
    return config_parse(str_cat("name: t\nmodel: {preset: ", preset, "}\ndata: {dataset: brown}\n"),
                        "t.yaml", sets);
}

int64_t global_batch(const RunConfig& c) {
    return int64_t(c.train.micro_batch) * c.train.grad_accum * c.parallel.dp;
}

bool has_issue(const std::vector<PlanIssue>& v, const std::string& key, const std::string& word) {
    for (const auto& i : v)
        if (i.key == key && i.message.find(word) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST(PlanSuggest, FitsSortedKeepsGlobalBatchAndExplains) {
    RunConfig base =
        gpt_config("gpt2-large", {"parallel.dp=16", "train.micro_batch=8", "train.grad_accum=2"});
    DeviceSpec dev = device_spec("H200");
    PlanSearchStats st;
    auto s = plan_suggest(base, dev, 16, 5, &st);
    ASSERT_EQ(s.size(), 5u);
    EXPECT_GT(st.estimated, 5);
    for (size_t i = 0; i < s.size(); ++i) {
        const auto& x = s[i];
        EXPECT_EQ(x.config.parallel.dp * x.config.parallel.tp * x.config.parallel.pp, 16);
        EXPECT_EQ(global_batch(x.config), 256) << x.summary;
        EXPECT_TRUE(x.estimate.fits) << x.summary;
        EXPECT_GT(x.headroom_bytes, 0);
        EXPECT_FALSE(x.reason.empty());
        EXPECT_EQ(20 % x.config.parallel.tp, 0);
        EXPECT_TRUE(plan_validate(x.config, 16).empty()) << x.summary;
        // the estimate stored is the estimate of the stored config
        EXPECT_DOUBLE_EQ(estimate_plan(x.config, dev).tokens_per_s, x.tokens_per_s);
        if (i > 0) EXPECT_GE(s[i - 1].tokens_per_s, x.tokens_per_s);
    }
}

// A search another thread follows and stops (the Plan page's Stop): it counts the layouts it has
// searched, and once stopped skips those left and says so; stopped before it begins, it searches
// none. Left alone it searches every layout and answers as without the control.
TEST(PlanSuggest, AControlCountsTheLayoutsAndStopsTheSearch) {
    RunConfig base = gpt_config("gpt2", {"parallel.dp=4", "train.micro_batch=8"});
    DeviceSpec dev = device_spec("H200");
    PlanSearchControl whole;
    auto s = plan_suggest(base, dev, 4, 5, nullptr, &whole);
    EXPECT_GT(whole.total.load(), 3);
    EXPECT_EQ(whole.done.load(), whole.total.load());
    auto plain = plan_suggest(base, dev, 4, 5);
    ASSERT_EQ(s.size(), plain.size());
    for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i].summary, plain[i].summary);

    PlanSearchControl stopped;
    stopped.stop = true;
    EXPECT_THROW(plan_suggest(base, dev, 4, 5, nullptr, &stopped), PlanSearchStopped);
    EXPECT_EQ(stopped.done.load(), 0);
    EXPECT_EQ(stopped.total.load(), whole.total.load());
}

// The search and the estimator run their layouts and stages side by side (parallel_for); the
// answer is the one a single thread gives, bit for bit. Inside a one-piece parallel_for every
// nested call runs on the calling thread, in order: the sequential reference.
TEST(PlanSuggest, SideBySideSearchEqualsTheSequentialOne) {
    RunConfig base =
        gpt_config("gpt2", {"parallel.dp=8", "train.micro_batch=4", "train.grad_accum=2",
                            "runtime.device=cuda", "runtime.precision=bf16"});
    DeviceSpec dev = device_spec("H200");
    PlanSearchStats par_st, seq_st;
    auto par = plan_suggest(base, dev, 8, 8, &par_st);
    std::vector<PlanSuggestion> seq;
    parallel_for(1, [&](size_t) { seq = plan_suggest(base, dev, 8, 8, &seq_st); });
    ASSERT_GE(par.size(), 3u);
    ASSERT_EQ(par.size(), seq.size());
    EXPECT_EQ(par_st.candidates, seq_st.candidates);
    EXPECT_EQ(par_st.estimated, seq_st.estimated);
    EXPECT_EQ(par_st.fitting, seq_st.fitting);
    for (size_t i = 0; i < par.size(); ++i) {
        EXPECT_EQ(par[i].summary, seq[i].summary);
        EXPECT_EQ(par[i].tokens_per_s, seq[i].tokens_per_s) << par[i].summary;
        EXPECT_EQ(par[i].headroom_bytes, seq[i].headroom_bytes) << par[i].summary;
        EXPECT_EQ(par[i].reason, seq[i].reason);
    }
    // one pipeline plan's stages, simulated side by side and in order
    RunConfig pp4 = base;
    pp4.parallel.dp = 2, pp4.parallel.pp = 4, pp4.train.grad_accum = 8;
    PlanEstimate a = estimate_plan(pp4, dev), b;
    parallel_for(1, [&](size_t) { b = estimate_plan(pp4, dev); });
    ASSERT_EQ(a.ranks.size(), b.ranks.size());
    EXPECT_EQ(a.step_s, b.step_s);
    for (size_t r = 0; r < a.ranks.size(); ++r) {
        EXPECT_EQ(a.ranks[r].device_peak_bytes, b.ranks[r].device_peak_bytes) << "rank " << r;
        EXPECT_EQ(a.ranks[r].compute_s, b.ranks[r].compute_s) << "rank " << r;
    }
}

TEST(PlanSuggest, TightMemoryNeedsSaversAndSaysSo) {
    // gpt2-xl with micro-batch 16 does not fit a 40 GB A100 as plain data parallel
    RunConfig base =
        gpt_config("gpt2-xl", {"parallel.dp=8", "train.micro_batch=16", "train.grad_accum=1"});
    DeviceSpec dev = device_spec("A100-40GB");
    RunConfig plain = base;
    EXPECT_FALSE(estimate_plan(plain, dev).fits);
    auto s = plan_suggest(base, dev, 8, 5);
    ASSERT_FALSE(s.empty());
    for (const auto& x : s) {
        EXPECT_TRUE(x.estimate.fits);
        EXPECT_EQ(global_batch(x.config), 128);
        EXPECT_LE(x.estimate.ranks[0].device_peak_bytes, dev.memory_bytes);
    }
    // every suggestion that uses a memory saver names it in its reason
    for (const auto& x : s) {
        const auto& p = x.config.parallel;
        if (p.recompute[0] != "none")
            EXPECT_NE(x.reason.find("recompute"), std::string::npos) << x.reason;
        if (p.zero > 0) EXPECT_NE(x.reason.find("ZeRO-"), std::string::npos) << x.reason;
        if (p.offload_optimizer || p.offload_activations)
            EXPECT_NE(x.reason.find("offload"), std::string::npos) << x.reason;
    }
}

TEST(PlanSuggest, DataParallelReasonGivesHeadroom) {
    RunConfig base = gpt_config("gpt-tiny", {"train.micro_batch=8"});
    auto s = plan_suggest(base, device_spec("H100"), 1, 5);
    ASSERT_EQ(s.size(), 1u);  // one GPU: one layout
    EXPECT_NE(s[0].reason.find("fits on one GPU with"), std::string::npos) << s[0].reason;
    EXPECT_NE(s[0].reason.find("GiB headroom"), std::string::npos);
}

TEST(PlanSuggest, RejectsBadInput) {
    RunConfig base = gpt_config("gpt-tiny");
    EXPECT_THROW(plan_suggest(base, device_spec("H100"), 0), InputError);
    // a global batch no dp divides except 1: still answers with dp 1 layouts
    RunConfig odd = gpt_config("gpt-tiny", {"train.micro_batch=1", "train.grad_accum=3"});
    auto s = plan_suggest(odd, device_spec("H100"), 4, 5);
    for (const auto& x : s) EXPECT_EQ(global_batch(x.config), 3);
}

TEST(PlanValidate, ValidConfigHasNoIssues) {
    RunConfig c = gpt_config("gpt2", {"parallel.dp=2", "parallel.tp=2", "parallel.pp=2"});
    EXPECT_TRUE(plan_validate(c, 8).empty());
    EXPECT_TRUE(plan_validate(c, 0).empty());  // world check skipped
}

TEST(PlanValidate, EachRuleOnItsKey) {
    RunConfig c = gpt_config("gpt2");  // 12 layers, 12 heads, d_model 768
    c.parallel.tp = 5;
    auto v = plan_validate(c, 5);
    EXPECT_TRUE(has_issue(v, "parallel.tp", "does not divide the 12 attention heads"));
    EXPECT_TRUE(has_issue(v, "parallel.tp", "does not divide d_model 768"));

    c = gpt_config("gpt2");
    c.parallel.dp = 2;
    v = plan_validate(c, 8);
    ASSERT_EQ(v.size(), 1u);
    EXPECT_EQ(v[0].key, "parallel.dp");
    EXPECT_NE(v[0].message.find("= 2 GPUs, but 8 are available"), std::string::npos)
        << v[0].message;

    c = gpt_config("gpt2");
    c.parallel.pp = 13;
    EXPECT_TRUE(
        has_issue(plan_validate(c, 13), "parallel.pp", "more stages than the model's 12 layers"));

    c = gpt_config("gpt2", {"parallel.pp=3"});
    c.parallel.stages = {6, 0, 6};
    v = plan_validate(c, 3);
    EXPECT_TRUE(has_issue(v, "parallel.stages", "stage 1 has no layers"));
    c.parallel.stages = {6, 3, 4};
    EXPECT_TRUE(
        has_issue(plan_validate(c, 3), "parallel.stages", "sum to 13 layers, the model has 12"));
    c.parallel.stages = {6, 6};
    EXPECT_TRUE(has_issue(plan_validate(c, 3), "parallel.stages",
                          "expected pp x virtual_stages = 3 entries"));

    c = gpt_config("gpt2", {"parallel.pp=2"});
    c.parallel.virtual_stages = 2;  // schedule still 1f1b
    EXPECT_TRUE(
        has_issue(plan_validate(c, 2), "parallel.virtual_stages", "needs schedule interleaved"));
    c.parallel.schedule = "interleaved";
    c.train.grad_accum = 3;
    EXPECT_TRUE(has_issue(plan_validate(c, 2), "train.grad_accum", "divisible by pp (2)"));
    c.train.grad_accum = 4;
    c.parallel.virtual_stages = 5;  // 10 chunks do not divide 12 layers
    EXPECT_TRUE(has_issue(plan_validate(c, 2), "parallel.virtual_stages", "do not divide evenly"));
    c.parallel.virtual_stages = 1;
    EXPECT_TRUE(has_issue(plan_validate(c, 2), "parallel.schedule", "virtual_stages >= 2"));

    c = gpt_config("gpt2", {"parallel.pp=2", "parallel.dp=2"});
    c.parallel.zero = 3;
    EXPECT_TRUE(has_issue(plan_validate(c, 4), "parallel.zero", "ZeRO-3 with pipeline stages"));
    c.parallel.zero = 0;
    c.parallel.recompute = {"none", "full", "none"};
    EXPECT_TRUE(has_issue(plan_validate(c, 4), "parallel.recompute", "one value or pp (2) values"));
}

TEST(PlanValidate, IssuesForKeyJoinsMessages) {
    std::vector<PlanIssue> v = {{"parallel.tp", "a"}, {"parallel.pp", "b"}, {"parallel.tp", "c"}};
    EXPECT_EQ(plan_issues_for_key(v, "parallel.tp"), "a\nc");
    EXPECT_EQ(plan_issues_for_key(v, "parallel.zero"), "");
}
