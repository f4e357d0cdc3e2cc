// The single-rank REFERENCE trainer the equivalence matrix (tests/equivalence) compares every
// parallel plan against: the labelled reference models (engine/model: GptModel, MlpModel, each
// one flat parameter buffer with its own forward and backward, as llm.c keeps its CPU file) and
// the flat AdamW (engine/optim), on the config's data read as the runtime reads it. It shares
// none of the parallel runtime's layers, parameter store or step loop, so a plan that drifts
// from it is caught. Not a product path: `tessera train` runs every plan, one rank included,
// through the runtime (engine/train/parallel_trainer.cpp). Header-only, for tests.
#pragma once
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/data/epoch_order.h"
#include "engine/kernels/cpu/threads.h"
#include "engine/model/model.h"
#include "engine/optim/optimizer.h"
#include "engine/train/data_source.h"

namespace tessera::test_support {

struct ReferenceRun {
    std::vector<double> losses;                  // train loss of steps 1..steps
    std::vector<double> epochs;                  // epochs read after each step
    std::vector<double> val_loss, val_accuracy;  // evaluations (before step 1 and every eval_every)
    std::map<std::string, std::vector<float>> params;  // final parameters by name
};

// cfg.train.steps steps of the global batch micro_batch x grad_accum, evaluated as the runtime
// evaluates (a GPT: eval_steps global batches; a finite test set: all of it in micro-batches).
inline ReferenceRun reference_train(const RunConfig& cfg) {
    threads_configure(cfg.train.threads);
    auto data = data_source_open(cfg);
    auto model = model_create(cfg.model, data->vocab_size());
    model->init_params(cfg.train.seed);
    AdamW opt(model->param_table(), optimizer_config(cfg.train));
    const int mb = cfg.train.micro_batch, accum = cfg.train.grad_accum;
    const int64_t global_samples = (int64_t)mb * accum;
    const int64_t targets = global_samples * model->targets_per_sample();
    const bool classifier = data->eval_set_size() > 0;
    ReferenceRun run;
    auto evaluate = [&] {
        double loss = 0;
        int64_t count = 0, correct = 0;
        const int64_t n = classifier ? (data->eval_set_size() + mb - 1) / mb : cfg.train.eval_steps;
        for (int64_t i = 0; i < n; ++i)
            for (int part = 0; part < (classifier ? 1 : accum); ++part) {
                Batch b = data->eval_batch(i, (int64_t)part * mb, mb);
                if (b.batch_size == 0) break;
                StepResult r = model->evaluate(b);
                loss += r.loss_sum;
                count += r.count;
                correct += r.correct;
            }
        run.val_loss.push_back(loss / (double)std::max<int64_t>(1, count));
        if (classifier)
            run.val_accuracy.push_back((double)correct / (double)std::max<int64_t>(1, count));
    };
    if (cfg.train.eval_every > 0) evaluate();
    for (int64_t step = 0; step < cfg.train.steps; ++step) {
        model->zero_grads();
        double loss = 0;
        for (int m = 0; m < accum; ++m)
            loss += model
                        ->forward_backward(data->train_batch(step, (int64_t)m * mb, mb),
                                           1.0f / (float)targets)
                        .loss_sum;
        const double norm =
            grad_global_norm(model->grads().f32(), model->param_table().total_numel());
        opt.step(model->params().f32(), model->grads().f32(), step, norm);
        const int64_t s1 = step + 1;
        run.losses.push_back(loss / (double)targets);
        run.epochs.push_back(epoch_order_epochs(s1, global_samples, data->train_set_size()));
        if (cfg.train.eval_every > 0 && (s1 % cfg.train.eval_every == 0 || s1 == cfg.train.steps))
            evaluate();
    }
    for (const auto& p : model->param_table().entries()) {
        const float* v = model->params().f32() + p.offset;
        run.params[p.name].assign(v, v + p.numel);
    }
    return run;
}

}  // namespace tessera::test_support
