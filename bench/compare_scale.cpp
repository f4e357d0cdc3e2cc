// compare_scale: the Compare page on a 1,000-run runs.db, offscreen at 1600x1000. Prints
//  (a) the time to open the run table: ComparePage::refresh() (every run's summary, the model, the
//      differing-key columns, the default selection's curves) — goal < 200 ms;
//  (b) the time to replot 20 overlaid runs of 100k points each — goal < 16 ms a replot: the chart
//      redraw (pan, zoom, hover) and the full rebuild (curves downsampled per pixel column, graphs
//      refilled, redrawn: a selection, metric or smoothing change), each next to its peer without
//      the page's downsampling (QCustomPlot's adaptive sampling over every point).
// The store comes from make_runs_db's generator (written once into DIR, reused after).
//   usage: compare_scale [DIR=/tmp/tessera_compare_scale]
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/compare/compare_page.h"
#include "ui/compare/run_table_model.h"

using tessera::studio::ComparePage;

namespace {
template <class F>
double median_ms(int reps, F&& f) {
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        QElapsedTimer e;
        e.start();
        f();
        t.push_back(double(e.nsecsElapsed()) / 1e6);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    const QString dir = argc > 1 ? argv[1] : "/tmp/tessera_compare_scale";
    QDir().mkpath(dir);
    const QString db = dir + "/runs.db";
    if (!QFile::exists(db)) {
        const QString gen = QCoreApplication::applicationDirPath() + "/make_runs_db";
        std::printf("compare_scale: generating %s (make_runs_db)...\n", qPrintable(db));
        std::fflush(stdout);
        if (std::system(qPrintable(QString("'%1' '%2'").arg(gen, db))) != 0) return 1;
    }
    QFile yaml(dir + "/project.yaml");
    if (!yaml.exists() && yaml.open(QIODevice::WriteOnly))
        yaml.write("name: scale\nmodel: {preset: gpt-tiny, n_layer: 2, n_head: 2, d_model: 64, seq_len: 32}\n"
                   "data: {dataset: brown}\ntrain: {steps: 500}\n");
    yaml.close();
    tessera::studio::ProjectDocument doc;
    QString err;
    if (!doc.open(dir, &err)) {
        std::fprintf(stderr, "compare_scale: %s\n", qPrintable(err));
        return 1;
    }
    ComparePage page(&doc);
    page.resize(1600, 1000);
    page.show();
    QApplication::processEvents();
    const int runs = page.runModel()->rowCount();

    // (a) open the run table: refresh = summaries + model + columns + default selection's curves
    const double open_ms = median_ms(3, [&] { page.refresh(); });
    // its parts: the summaries of every run (store reads + config parse), and the default
    // selection's curves (the newest 5 runs)
    double summaries_ms = 0;
    {
        auto store = tessera::RunStore::open(doc.dbPath().toStdString(), true);
        QElapsedTimer e;
        e.start();
        for (const auto& r : store.runs_list()) (void)tessera::studio::compare_summarize_run(store, r);
        summaries_ms = double(e.nsecsElapsed()) / 1e6;
    }

    // (b) 20 overlaid runs of 100k points
    QVector<int64_t> longRuns;
    for (const auto& r : page.runModel()->runs())
        if (r.name.startsWith("long-")) longRuns << r.id;
    QElapsedTimer load;
    load.start();
    page.setSelectedRuns(longRuns);  // reads 20 x 100k rows from runs.db, first plot
    const double load_ms = double(load.nsecsElapsed()) / 1e6;
    int points = 0, shown = 0;
    for (int i = 0; i < page.plot()->graphCount(); ++i) shown += page.plot()->graph(i)->data()->size();
    points = int(longRuns.size()) * 100000;
    QCustomPlot* plot = page.plot();
    const double redraw_ms = median_ms(31, [&] { plot->replot(QCustomPlot::rpImmediateRefresh); });
    const double rebuild_ms = median_ms(11, [&] { page.replot(); plot->replot(QCustomPlot::rpImmediateRefresh); });
    page.setDisplayDownsampling(false);
    const double peer_redraw_ms = median_ms(11, [&] { plot->replot(QCustomPlot::rpImmediateRefresh); });
    const double peer_rebuild_ms = median_ms(5, [&] { page.replot(); plot->replot(QCustomPlot::rpImmediateRefresh); });

    std::printf("compare_scale: %d runs in %s, offscreen 1600x1000\n", runs, qPrintable(db));
    std::printf("  (a) open the run table (refresh: summaries, model, default selection) : %8.1f ms  (goal < 200 ms)\n", open_ms);
    std::printf("      of which the %d run summaries (runs.db reads, config parse)          : %8.1f ms\n", runs, summaries_ms);
    std::printf("  (b) %d runs overlaid, %d points, %d drawn after downsampling (%d columns)\n",
                int(longRuns.size()), points, shown, page.displayColumns());
    std::printf("      replot (redraw: pan, zoom, hover)                                 : %8.2f ms  (goal < 16 ms)\n", redraw_ms);
    std::printf("      rebuild + replot (downsample 2M points, refill, redraw)           : %8.2f ms  (goal < 16 ms)\n", rebuild_ms);
    std::printf("      peer, no downsampling (QCustomPlot adaptive sampling): redraw     : %8.2f ms\n", peer_redraw_ms);
    std::printf("      peer, no downsampling: rebuild + replot                           : %8.2f ms\n", peer_rebuild_ms);
    std::printf("      first selection (20 x 100k rows read from runs.db + plot)         : %8.1f ms\n", load_ms);
    return 0;
}
