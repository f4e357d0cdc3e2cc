// compare_scale: the Compare page on a 1,000-run runs.db, offscreen at 1600x1000. Prints
//  (a) the time to open the run table: ComparePage::refresh() (every run's summary, the model, the
//      differing-key columns, the selection) and the table's paint — goal < 200 ms; then, beside
//      it, until the selection's curves are drawn too (refresh leaves them to the next turn of the
//      event loop, so the table shows first);
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
#include <ctime>
#include <vector>

#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/compare/compare_page.h"
#include "ui/compare/run_table_model.h"

using tessera::studio::ComparePage;

namespace {
// The process's CPU time (every thread), ms: beside wall time, it shows what a busy machine added.
double cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

struct Timing {
    double wall_ms, cpu_ms;  // medians
};

template <class F>
Timing median_ms(int reps, F&& f) {
    std::vector<double> t, c;
    for (int i = 0; i < reps; ++i) {
        QElapsedTimer e;
        const double c0 = cpu_ms();
        e.start();
        f();
        t.push_back(double(e.nsecsElapsed()) / 1e6);
        c.push_back(cpu_ms() - c0);
    }
    std::sort(t.begin(), t.end());
    std::sort(c.begin(), c.end());
    return {t[t.size() / 2], c[c.size() / 2]};
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
        yaml.write(
            "name: scale\nmodel: {preset: gpt-tiny, n_layer: 2, n_head: 2, d_model: 64, seq_len: "
            "32}\n"
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

    // (a) open the run table: refresh = summaries + model + columns + selection, and the table's
    // paint; then the same until the selection's curves are read and drawn (the event loop's next
    // turn)
    const Timing open = median_ms(5, [&] {
        page.refresh();
        page.runView()->viewport()->repaint();
    });
    const Timing open_curves = median_ms(5, [&] {
        page.refresh();
        page.runView()->viewport()->repaint();
        QApplication::processEvents();
        page.plot()->replot(QCustomPlot::rpImmediateRefresh);
    });
    // its part: the summaries of every run (store reads + config parse, on the machine's cores);
    // the rest is mostly the default selection's curves (the newest 5 runs)
    const Timing summaries = median_ms(3, [&] {
        auto store = tessera::RunStore::open(doc.dbPath().toStdString(), true);
        (void)tessera::studio::compare_summarize_runs(store, store.runs_list());
    });

    // (b) 20 overlaid runs of 100k points
    QVector<int64_t> longRuns;
    for (const auto& r : page.runModel()->runs())
        if (r.name.startsWith("long-")) longRuns << r.id;
    QElapsedTimer load;
    load.start();
    page.setSelectedRuns(longRuns);  // reads 20 x 100k rows from runs.db, first plot
    const double load_ms = double(load.nsecsElapsed()) / 1e6;
    int points = 0, shown = 0;
    for (int i = 0; i < page.plot()->graphCount(); ++i)
        shown += page.plot()->graph(i)->data()->size();
    points = int(longRuns.size()) * 100000;
    QCustomPlot* plot = page.plot();
    const Timing redraw = median_ms(31, [&] { plot->replot(QCustomPlot::rpImmediateRefresh); });
    // page.replot() renders the plot's layers itself; repaint() then puts them on the widget
    // (a blit: before 2026-12-02 this row drew every layer twice, with a second full replot)
    const Timing rebuild = median_ms(11, [&] {
        page.replot();
        plot->repaint();
    });
    // a zoom: the view's part of the 20 curves downsampled again, then drawn (two ranges in turn)
    int zooms = 0;
    const QCPRange whole = plot->xAxis->range();
    const Timing zoom = median_ms(11, [&] {
        const double w = whole.size() / 10, at = whole.lower + w * (4 + (zooms++ % 2));
        plot->xAxis->setRange(at, at + w);
        page.redownsampleView();
        plot->replot(QCustomPlot::rpImmediateRefresh);
    });
    plot->xAxis->setRange(whole);
    page.redownsampleView();
    const QString shot = dir + "/compare_scale_20_runs.png";  // what the 20 overlaid runs look like
    page.grab().save(shot);
    page.setDisplayDownsampling(false);
    const Timing peer_redraw =
        median_ms(11, [&] { plot->replot(QCustomPlot::rpImmediateRefresh); });
    const Timing peer_rebuild = median_ms(5, [&] {
        page.replot();
        plot->repaint();
    });

    auto row = [](const char* what, Timing t, const char* goal) {
        std::printf("  %-66s %9.2f ms wall %9.2f ms CPU  %s\n", what, t.wall_ms, t.cpu_ms, goal);
    };
    std::printf("compare_scale: %d runs in %s, offscreen 1600x1000\n", runs, qPrintable(db));
    row("(a) open the run table: refresh (summaries, model, default sel.)", open,
        "(goal < 200 ms)");
    row("    of which the run summaries (runs.db reads, config parse)", summaries, "");
    row("    and then the selection's curves drawn (5 newest runs: 500k rows)", open_curves, "");
    std::printf("  (b) %d runs overlaid, %d points, %d drawn after downsampling (%d columns)\n",
                int(longRuns.size()), points, shown, page.displayColumns());
    row("    replot (redraw: pan, zoom, hover)", redraw, "(goal < 16 ms)");
    row("    rebuild + replot (downsample, refill graphs, redraw)", rebuild, "(goal < 16 ms)");
    row("    zoom to a tenth: the view's points downsampled again + redraw", zoom,
        "(goal < 16 ms)");
    row("    peer without the page's downsampling: redraw", peer_redraw, "");
    row("    peer without the page's downsampling: rebuild + replot", peer_rebuild, "");
    std::printf(
        "      first selection (20 x 100k rows read from runs.db + plot)        : %9.1f ms wall\n",
        load_ms);
    std::printf("  screenshot: %s\n", qPrintable(shot));
    return 0;
}
