// RunStore: records written through append/store_sink read back unchanged; schema versioning and
// migrations; refusal of files that are not Tessera run databases; `tessera runs` output.
#include "engine/store/run_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "engine/cli/cli.h"
#include "engine/core/error.h"
#include "engine/store/run_report.h"
#include "engine/telemetry/metric_names.h"
#include "store_test_util.h"

using namespace tessera;

namespace {

std::string open_error(const std::string& path, bool read_only) {
    try {
        RunStore::open(path, read_only);
    } catch (const InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "opened " << path;
    return "";
}

void raw_exec(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
}

// A finished run with two steps of metrics, spans, a checkpoint and an error.
int64_t write_sample_run(RunStore& store, const std::string& name, double loss_at_end) {
    int64_t id = store.run_begin(
        RunStartRecord{name, "model:\n  preset: gpt-tiny\n", "host-a", 2, "{\"pp\":2}", 1000.0});
    auto sink = store_sink(store, id, 3);
    for (int64_t step = 1; step <= 2; ++step) {
        sink->write(MetricRecord{step, 0, "train/loss", step == 2 ? loss_at_end : 4.0,
                                 1000.0 + double(step)});
        sink->write(MetricRecord{step, 0, "train/lr", 1e-3 * double(step), 1000.0 + double(step)});
        sink->write(SpanRecord{step, 1, 1, 0, "forward", 0.5, 0.75});
    }
    sink->write(CheckpointRecord{2, "ckpt/step_2", 1003});
    sink->write(ErrorRecord{1, 2, "rank 1: slow", 1003.5});
    sink->write(DeviceRecord{1, "host-b", "NVIDIA H200", int64_t(150754820096), 1000.5});
    sink->write(DeviceRecord{0, "host-a", "NVIDIA H200", int64_t(150754820096), 1000.5});
    sink->write(RunEndRecord{"completed", "done", 2, 1010.0});
    return id;
}

}  // namespace

TEST(RunStore, RoundTrip) {
    TempDir tmp;
    RunStore store = RunStore::open(tmp.file("runs.db"));
    int64_t id = write_sample_run(store, "first", 2.5);
    EXPECT_EQ(store.integrity_check(), "ok");

    auto runs = store.runs_list();
    ASSERT_EQ(runs.size(), 1u);
    const RunRow& r = runs[0];
    EXPECT_EQ(r.id, id);
    EXPECT_EQ(r.name, "first");
    EXPECT_EQ(r.config_text, "model:\n  preset: gpt-tiny\n");
    EXPECT_EQ(r.status, "completed");
    EXPECT_EQ(r.message, "done");
    EXPECT_EQ(r.start_time, 1000.0);
    EXPECT_EQ(r.end_time, 1010.0);
    EXPECT_EQ(r.host, "host-a");
    EXPECT_EQ(r.world_size, 2);
    EXPECT_EQ(r.plan_json, "{\"pp\":2}");
    EXPECT_EQ(r.last_step, 2);

    auto all = store.metrics(id);
    ASSERT_EQ(all.size(), 4u);
    EXPECT_EQ(all[0].name, "train/loss");
    EXPECT_EQ(all[0].value, 4.0);
    EXPECT_EQ(all[0].wall_time, 1001.0);
    auto loss = store.metrics(id, "train/loss");
    ASSERT_EQ(loss.size(), 2u);
    EXPECT_EQ(loss[1].step, 2);
    EXPECT_EQ(loss[1].value, 2.5);
    // incremental: only rows after the last seen rowid
    auto newer = store.metrics(id, "", all[1].rowid);
    ASSERT_EQ(newer.size(), 2u);
    EXPECT_EQ(newer[0].rowid, all[2].rowid);
    EXPECT_TRUE(store.metrics(id, "", all[3].rowid).empty());

    EXPECT_EQ(store.metric_names(id), (std::vector<std::string>{"train/loss", "train/lr"}));
    EXPECT_EQ(store.metric_last(id, "train/lr")->value, 2e-3);
    EXPECT_FALSE(store.metric_last(id, "val/loss"));
    EXPECT_EQ(store.metrics_latest(id).size(), 2u);

    auto spans = store.spans(id);
    ASSERT_EQ(spans.size(), 2u);
    EXPECT_EQ(spans[0].kind, "forward");
    EXPECT_EQ(spans[0].rank, 1);
    EXPECT_EQ(spans[0].stage, 1);
    EXPECT_EQ(spans[0].micro_batch, 0);
    EXPECT_EQ(spans[0].end_s, 0.75);
    EXPECT_EQ(store.spans(id, 2).size(), 1u);
    EXPECT_TRUE(store.spans(id, 3).empty());

    ASSERT_EQ(store.checkpoints(id).size(), 1u);
    EXPECT_EQ(store.checkpoints(id)[0].path, "ckpt/step_2");
    ASSERT_EQ(store.errors(id).size(), 1u);
    EXPECT_EQ(store.errors(id)[0].message, "rank 1: slow");
    EXPECT_FALSE(store.run_get(id + 1));
}

TEST(RunStore, DevicesRoundTripByRank) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    int64_t id = 0, other = 0;
    {
        RunStore store = RunStore::open(path);
        id = write_sample_run(store, "gpu", 2.5);
        other = store.run_begin(RunStartRecord{"cpu run"});
        store.append(other, {DeviceRecord{0, "vm", "cpu", int64_t(24) << 30, 2000}});
        // a restarted attempt's rank records its device again: its row is replaced
        store.append(id, {DeviceRecord{1, "host-c", "NVIDIA H200", int64_t(150754820096), 1001}});
    }
    RunStore ro = RunStore::open(path, true);
    auto d = ro.devices(id);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].rank, 0);
    EXPECT_EQ(d[0].host, "host-a");
    EXPECT_EQ(d[0].name, "NVIDIA H200");
    EXPECT_EQ(d[0].memory_bytes, int64_t(150754820096));
    EXPECT_EQ(d[0].wall_time, 1000.5);
    EXPECT_EQ(d[1].rank, 1);
    EXPECT_EQ(d[1].host, "host-c");
    EXPECT_EQ(d[1].wall_time, 1001);
    auto c = ro.devices(other);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].name, kDeviceCpu);
    EXPECT_EQ(c[0].memory_bytes, int64_t(24) << 30);
    EXPECT_TRUE(ro.devices(other + 1).empty());
}

TEST(RunStore, EveryRunStatusIsAccepted) {
    TempDir tmp;
    RunStore store = RunStore::open(tmp.file("runs.db"));
    for (std::string_view st :
         {run_status::completed, run_status::failed, run_status::stopped, run_status::running}) {
        int64_t id = store.run_begin(RunStartRecord{"r"});
        EXPECT_EQ(store.run_get(id)->status, run_status::running);
        store.run_finish(id, st, "", 0);
        EXPECT_EQ(store.run_get(id)->status, st);
    }
    EXPECT_THROW(store.run_finish(1, "finished", "", 0), InputError);
}

TEST(RunStore, ReopenReadOnlySeesDataAndRefusesWrites) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    {
        RunStore store = RunStore::open(path);
        write_sample_run(store, "a", 1.0);
    }
    RunStore ro = RunStore::open(path, true);
    EXPECT_EQ(ro.runs_list().size(), 1u);
    EXPECT_THROW(ro.run_begin(RunStartRecord{"b"}), Error);
}

TEST(RunStore, NanValuesAndRunningRun) {
    TempDir tmp;
    RunStore store = RunStore::open(tmp.file("runs.db"));
    int64_t id = store.run_begin(RunStartRecord{"diverged"});
    store.append(id, {MetricRecord{5, 0, "train/loss", std::nan(""), 1.0}});
    auto rows = store.metrics(id);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_TRUE(std::isnan(rows[0].value));
    auto run = store.run_get(id);
    EXPECT_EQ(run->status, "running");
    EXPECT_EQ(run->end_time, 0);
    EXPECT_EQ(run->last_step, 5);
    EXPECT_GT(run->start_time, 1.6e9);  // wall_time 0 -> now
    store.run_finish(id, "failed", "loss is NaN", 5);
    EXPECT_EQ(store.run_get(id)->status, "failed");
    EXPECT_GT(store.run_get(id)->end_time, 1.6e9);
    EXPECT_THROW(store.run_finish(id, "exploded", "", 5), InputError);
    EXPECT_THROW(store.append(id, {RunStartRecord{"x"}}), Error);
}

TEST(RunStore, FailedAppendLeavesNothing) {
    TempDir tmp;
    RunStore store = RunStore::open(tmp.file("runs.db"));
    int64_t id = store.run_begin(RunStartRecord{"r"});
    EXPECT_THROW(store.append(id, {MetricRecord{1, 0, "a", 1, 1}, RunEndRecord{"bogus", "", 1, 1}}),
                 InputError);
    EXPECT_TRUE(store.metrics(id).empty());  // rolled back as one transaction
    store.append(id, {MetricRecord{1, 0, "a", 1, 1}});
    EXPECT_EQ(store.metrics(id).size(), 1u);
}

// metric_series: one metric as columns, in step order whatever the insertion order, every rank,
// NaN kept; an unknown name gives nothing.
TEST(RunStore, MetricSeriesInStepOrder) {
    TempDir tmp;
    RunStore store = RunStore::open(tmp.file("runs.db"));
    int64_t id = store.run_begin(RunStartRecord{"s"});
    store.append(
        id, {MetricRecord{3, 0, "train/loss", 1.5, 13}, MetricRecord{1, 0, "train/loss", 2.5, 11},
             MetricRecord{2, 1, "train/loss", std::nan(""), 12},
             MetricRecord{2, 0, "train/lr", 0.1, 12}, MetricRecord{2, 0, "train/loss", 2.0, 12.5}});
    MetricSeries s = store.metric_series(id, "train/loss");
    EXPECT_EQ(s.step, (std::vector<int64_t>{1, 2, 2, 3}));
    EXPECT_EQ(s.rank, (std::vector<int>{0, 1, 0, 0}));  // a step's rows in insertion order
    EXPECT_EQ(s.value[0], 2.5);
    EXPECT_TRUE(std::isnan(s.value[1]));
    EXPECT_EQ(s.value[3], 1.5);
    EXPECT_EQ(s.wall_time[2], 12.5);
    EXPECT_EQ(store.metric_series(id, "nope").size(), 0u);
}

TEST(RunStore, ExportCsv) {
    TempDir tmp;
    RunStore store = RunStore::open(tmp.file("runs.db"));
    int64_t a = write_sample_run(store, "a", 2.5);
    int64_t b = store.run_begin(RunStartRecord{"b"});
    store.append(b, {MetricRecord{1, 3, "odd,\"name\"", 0.1, 2.0}});
    std::ostringstream one, both;
    store.export_csv(one, {b});
    EXPECT_EQ(one.str(), "run,step,rank,name,value,wall_time\n2,1,3,\"odd,\"\"name\"\"\",0.1,2\n");
    store.export_csv(both, {});
    std::string s = both.str();
    EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 1 + 4 + 1);
    EXPECT_NE(s.find(str_cat(a, ",2,0,train/loss,2.5,1002\n")), std::string::npos) << s;
}

TEST(RunStoreSchema, NewFileHasCurrentVersionAndApplicationId) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    {
        RunStore s = RunStore::open(path);
        EXPECT_EQ(s.schema_version(), kStoreSchemaVersion);
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, nullptr);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(st, 0), kStoreApplicationId);
    sqlite3_finalize(st);
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

// A reader polling for runs.db while a run starts (the studio's pages do) opened it between
// its creation and its schema: "empty file, not a Tessera run database". A new database now
// appears complete, and the temporary it was built under is gone.
TEST(RunStoreSchema, ANewFileIsCompleteWhenItAppears) {
    TempDir tmp;
    constexpr int kFiles = 40;
    std::atomic<int> created{0};
    std::thread writer([&] {
        for (int i = 0; i < kFiles; ++i) {
            RunStore s = RunStore::open(tmp.file("runs" + std::to_string(i) + ".db"));
            created = i + 1;
        }
    });
    int opened = 0;
    std::vector<std::string> errors;
    for (int i = 0; i < kFiles; ++i) {
        const std::string path = tmp.file("runs" + std::to_string(i) + ".db");
        struct stat st;
        while (::stat(path.c_str(), &st) != 0 && created.load() <= i) std::this_thread::yield();
        try {
            RunStore r = RunStore::open(path, true);
            EXPECT_TRUE(r.runs_list().empty());
            ++opened;
        } catch (const Error& e) {
            errors.push_back(e.what());
        }
    }
    writer.join();
    EXPECT_EQ(opened, kFiles) << (errors.empty() ? "" : errors.front());
    for (const auto& entry : std::filesystem::directory_iterator(tmp.path()))
        EXPECT_EQ(entry.path().filename().string().find(".new-"), std::string::npos)
            << entry.path();
}

TEST(RunStoreSchema, MigratesTaggedVersionZeroFile) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    raw_exec(path, str_cat("PRAGMA application_id = ", kStoreApplicationId));
    RunStore s = RunStore::open(path);
    EXPECT_EQ(s.schema_version(), kStoreSchemaVersion);
    int64_t id = s.run_begin(RunStartRecord{"after-migration"});
    EXPECT_EQ(s.run_get(id)->name, "after-migration");
    // Reopening an up-to-date file is a no-op, data kept.
    RunStore again = RunStore::open(path);
    EXPECT_EQ(again.runs_list().size(), 1u);
}

// A runs.db written before the devices table (schema 1): the current build makes one and takes it
// back to version 1 exactly as it shipped (step 1->2 only adds the devices table).
// One sample run in a file taken back to an older schema by `downgrade_sql`; returns the run id.
static int64_t write_old_file(const std::string& path, const std::string& downgrade_sql) {
    int64_t id = 0;
    {
        RunStore s = RunStore::open(path);
        id = write_sample_run(s, "old", 2.5);
    }
    raw_exec(path, downgrade_sql);
    return id;
}

TEST(RunStoreSchema, VersionOneFileStaysReadableAndMigrates) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    const int64_t id =
        write_old_file(path,
                       "DROP TABLE devices; DROP TABLE annotations; DROP TABLE run_results; "
                       "DROP TABLE layer_times; "
                       "PRAGMA user_version = 1;");
    {
        // readers (the studio, `tessera runs`) never migrate: they read a version-1 file as is
        RunStore ro = RunStore::open(path, true);
        EXPECT_EQ(ro.schema_version(), 1);
        ASSERT_EQ(ro.runs_list().size(), 1u);
        EXPECT_EQ(ro.run_get(id)->status, run_status::completed);
        EXPECT_EQ(ro.metrics(id, metric::train_loss).size(), 2u);
        EXPECT_EQ(ro.checkpoints(id).size(), 1u);
        EXPECT_TRUE(ro.devices(id).empty());
        std::ostringstream show;
        store_write_run_detail(show, ro, id);
        EXPECT_NE(show.str().find("devices:\n  (none recorded)"), std::string::npos) << show.str();
    }
    // the writer migrates it: old rows kept, devices recorded from then on
    RunStore rw = RunStore::open(path);
    EXPECT_EQ(rw.schema_version(), kStoreSchemaVersion);
    EXPECT_EQ(rw.metrics(id, metric::train_loss).size(), 2u);
    EXPECT_TRUE(rw.devices(id).empty());
    int64_t next = rw.run_begin(RunStartRecord{"new"});
    rw.append(next, {DeviceRecord{0, "vm", "cpu", 1 << 30, 1}});
    ASSERT_EQ(rw.devices(next).size(), 1u);
    EXPECT_EQ(RunStore::open(path, true).devices(next)[0].memory_bytes, 1 << 30);
}

// Annotations (schema 3): the studio's one write. Replaced whole, tags unique, read back by every
// reader; an unknown run or a bad tag refused; a read-only store refuses to write.
TEST(RunStore, AnnotationsRoundTrip) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    RunStore store = RunStore::open(path);
    int64_t a = write_sample_run(store, "a", 2.5);
    int64_t b = write_sample_run(store, "b", 2.4);
    EXPECT_TRUE(store.annotations().empty());
    store.run_annotate(
        RunAnnotation{a, {"baseline", "seed-sweep", "baseline"}, "first try", false});
    store.run_annotate(RunAnnotation{b, {}, "", true});
    auto got = RunStore::open(path, true).annotations();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].run_id, a);
    EXPECT_EQ(got[0].tags, (std::vector<std::string>{"baseline", "seed-sweep"}));
    EXPECT_EQ(got[0].note, "first try");
    EXPECT_FALSE(got[0].archived);
    EXPECT_TRUE(got[1].archived);
    EXPECT_TRUE(got[1].tags.empty());
    store.run_annotate(RunAnnotation{a, {"lr"}, "second", true});  // replaces
    got = store.annotations();
    EXPECT_EQ(got[0].tags, std::vector<std::string>{"lr"});
    EXPECT_EQ(got[0].note, "second");
    EXPECT_TRUE(got[0].archived);
    EXPECT_THROW(store.run_annotate(RunAnnotation{999, {}, "", false}), InputError);
    EXPECT_THROW(store.run_annotate(RunAnnotation{a, {"a,b"}, "", false}), InputError);
    EXPECT_THROW(store.run_annotate(RunAnnotation{a, {""}, "", false}), InputError);
    EXPECT_EQ(store.annotations()[0].note, "second");  // a refused write leaves it as it was
    RunStore ro = RunStore::open(path, true);
    EXPECT_THROW(ro.run_annotate(RunAnnotation{a, {}, "", false}), Error);
}

// A schema-2 file (before annotations): readers read it with no annotations; a read-write open
// adds the table and keeps every run.
TEST(RunStoreSchema, VersionTwoFileReadsWithoutAnnotationsAndMigrates) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    const int64_t id =
        write_old_file(path,
                       "DROP TABLE annotations; DROP TABLE run_results; DROP TABLE layer_times; "
                       "PRAGMA user_version = 2;");
    {
        RunStore ro = RunStore::open(path, true);
        EXPECT_EQ(ro.schema_version(), 2);
        EXPECT_EQ(ro.runs_list().size(), 1u);
        EXPECT_TRUE(ro.annotations().empty());
    }
    RunStore rw = RunStore::open(path);
    EXPECT_EQ(rw.schema_version(), kStoreSchemaVersion);
    rw.run_annotate(RunAnnotation{id, {"kept"}, "", false});
    EXPECT_EQ(RunStore::open(path, true).annotations().at(0).tags,
              std::vector<std::string>{"kept"});
    EXPECT_EQ(rw.metrics(id, metric::train_loss).size(), 2u);
}

TEST(RunStoreSchema, RefusesNewerSchema) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    { RunStore s = RunStore::open(path); }
    raw_exec(path, str_cat("PRAGMA user_version = ", kStoreSchemaVersion + 1));
    std::string e = open_error(path, false);
    EXPECT_NE(e.find("newer than this build"), std::string::npos) << e;
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(open_error(path, true).find("newer"), std::string::npos);
}

TEST(RunStoreSchema, RefusesForeignFiles) {
    TempDir tmp;
    std::string other = tmp.file("other.db");
    raw_exec(other, "CREATE TABLE t(x)");
    std::string e = open_error(other, false);
    EXPECT_NE(e.find("not a Tessera run database"), std::string::npos) << e;
    EXPECT_NE(e.find(other), std::string::npos) << e;

    std::string text = tmp.file("notes.txt");
    std::ofstream(text) << "this is not a database, just some text that is long enough to matter "
                           "for the sqlite header check...................................\n";
    std::string t = open_error(text, true);
    EXPECT_NE(t.find(text), std::string::npos) << t;
    EXPECT_NE(t.find("not a Tessera run database"), std::string::npos) << t;
    EXPECT_NE(open_error(text, false).find(text), std::string::npos);

    std::string missing = tmp.file("missing.db");
    std::string m = open_error(missing, true);
    EXPECT_NE(m.find(missing), std::string::npos) << m;
    EXPECT_NE(m.find("not found"), std::string::npos) << m;
    EXPECT_FALSE(std::filesystem::exists(missing));  // reading never creates a database
}

// ---- `tessera runs` ---------------------------------------------------------------------------

namespace {
std::string run_cli(const CliArgs& args, int expect_rc = 0) {
    testing::internal::CaptureStdout();
    int rc = cli_runs(args);
    std::string out = testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, expect_rc);
    return out;
}
std::string cli_error(const CliArgs& args) {
    try {
        cli_runs(args);
    } catch (const InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "accepted";
    return "";
}
}  // namespace

TEST(RunsCli, ListShowExport) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    {
        RunStore store = RunStore::open(path);
        write_sample_run(store, "tiny-shakespeare", 2.5);
        store.run_begin(RunStartRecord{"second", "", "h", 1, "", telemetry_now()});
    }
    std::string list = run_cli({"list", "--db", path});
    std::istringstream lines(list);
    std::string header, row1, row2;
    std::getline(lines, header);
    std::getline(lines, row1);
    std::getline(lines, row2);
    EXPECT_EQ(header.rfind("id  name", 0), 0u) << list;
    EXPECT_NE(header.find("train/loss"), std::string::npos) << list;
    EXPECT_NE(row1.find("tiny-shakespeare"), std::string::npos) << list;
    EXPECT_NE(row1.find("completed"), std::string::npos) << list;
    EXPECT_NE(row1.find("10.0s"), std::string::npos) << list;  // 1000 -> 1010
    EXPECT_EQ(row1.substr(row1.size() - 3), "2.5") << list;
    EXPECT_NE(row2.find("running"), std::string::npos) << list;

    std::string show = run_cli({"show", "--db", path, "--run", "1"});
    EXPECT_NE(show.find("run 1: tiny-shakespeare"), std::string::npos) << show;
    EXPECT_NE(show.find("completed — done"), std::string::npos) << show;
    EXPECT_NE(show.find("train/loss  step 2  2.5"), std::string::npos) << show;
    EXPECT_NE(show.find("step 2  ckpt/step_2"), std::string::npos) << show;
    EXPECT_NE(show.find("devices:\n  rank 0  host-a  NVIDIA H200  140.4 GiB\n  rank 1  host-b"),
              std::string::npos)
        << show;
    EXPECT_NE(show.find("  preset: gpt-tiny"), std::string::npos) << show;

    std::string csv = run_cli({"export", "--db", path, "--run", "1", "--csv"});
    EXPECT_EQ(csv.rfind("run,step,rank,name,value,wall_time\n1,1,0,train/loss,4,1001\n", 0), 0u)
        << csv;
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
}

TEST(RunsCli, BadInput) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    { RunStore s = RunStore::open(path); }
    std::string missing = tmp.file("nope.db");
    EXPECT_NE(cli_error({"list", "--db", missing}).find(missing), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(missing));
    EXPECT_NE(cli_error({"list"}).find("--db FILE is required"), std::string::npos);
    EXPECT_NE(cli_error({"frobnicate", "--db", path}).find("found 'frobnicate'"),
              std::string::npos);
    EXPECT_NE(cli_error({"show", "--db", path, "--run", "x1"}).find("found 'x1'"),
              std::string::npos);
    EXPECT_NE(cli_error({"show", "--db", path, "--run", "7"}).find("run 7 not found"),
              std::string::npos);
    EXPECT_NE(cli_error({"show", "--db", path}).find("--run ID is required"), std::string::npos);
    EXPECT_NE(cli_error({"list", "--db"}).find("--db expects a value"), std::string::npos);
    EXPECT_NE(cli_error({"list", "--db", path, "--bogus"}).find("unknown option '--bogus'"),
              std::string::npos);
    EXPECT_EQ(run_cli({"list", "--db", path}), str_cat("no runs in ", path, "\n"));
}

// Run results (schema 4): what a finished run achieved, stored by its writer as it ends, equal to
// what its metrics give; a running run has none stored; records after the end refresh them; a
// schema-3 file reads without them and gains the table when the writer opens it.
TEST(RunStore, ResultsStoredAtTheEndEqualTheMetrics) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    RunStore store = RunStore::open(path);
    const int64_t id = store.run_begin(RunStartRecord{"r"});
    const double nan = std::numeric_limits<double>::quiet_NaN();
    store.append(id, {MetricRecord{1, 0, std::string(metric::val_loss), 3.0, 1},
                      MetricRecord{2, 0, std::string(metric::val_loss), 2.0, 2},
                      MetricRecord{3, 0, std::string(metric::val_loss), 2.5, 3},
                      MetricRecord{4, 0, std::string(metric::val_loss), nan, 4},
                      MetricRecord{1, 0, std::string(metric::perf_tok_per_s), 100, 1},
                      MetricRecord{2, 0, std::string(metric::perf_tok_per_s), 300, 2},
                      MetricRecord{3, 0, std::string(metric::perf_tok_per_s), 200, 3},
                      MetricRecord{1, 1, std::string(metric::mem_total_bytes), 7e9, 1},
                      MetricRecord{1, 0, std::string(metric::mem_total_bytes), 5e9, 1}});
    EXPECT_TRUE(store.stored_results().empty()) << "a running run has no stored results";
    const RunResults live = store.run_results(id);
    EXPECT_EQ(live.final_val_loss, 2.5);  // the last finite value
    EXPECT_EQ(live.best_val_loss, 2.0);
    EXPECT_EQ(live.median_tok_per_s, 200);
    EXPECT_EQ(live.peak_total_bytes, 7e9);
    EXPECT_EQ(live.metric_names, (std::vector<std::string>{std::string(metric::mem_total_bytes),
                                                           std::string(metric::perf_tok_per_s),
                                                           std::string(metric::val_loss)}));
    store.run_finish(id, run_status::completed, "", 4);
    auto stored = RunStore::open(path, true).stored_results();
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_EQ(stored[0], live);
    // a late record (another rank's last metrics) refreshes them
    store.append(id, {MetricRecord{4, 1, std::string(metric::train_loss), 1.5, 5}});
    stored = store.stored_results();
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_EQ(stored[0], store.run_results(id));
    EXPECT_EQ(stored[0].metric_names.size(), 4u);
    // a run without any of the summarised metrics stores -1s
    const int64_t bare = store.run_begin(RunStartRecord{"bare"});
    store.run_finish(bare, run_status::failed, "no metrics", 0);
    stored = store.stored_results();
    ASSERT_EQ(stored.size(), 2u);
    EXPECT_EQ(stored[1], (RunResults{bare, -1, -1, -1, -1, {}}));
}

TEST(RunStoreSchema, VersionThreeFileReadsWithoutResultsAndMigrates) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    const int64_t id = write_old_file(
        path, "DROP TABLE run_results; DROP TABLE layer_times; PRAGMA user_version = 3;");
    {
        RunStore ro = RunStore::open(path, true);
        EXPECT_EQ(ro.schema_version(), 3);
        EXPECT_TRUE(ro.stored_results().empty());
        EXPECT_EQ(ro.run_results(id).metric_names.size(), 2u);  // from the metrics: loss and lr
    }
    RunStore rw = RunStore::open(path);
    EXPECT_EQ(rw.schema_version(), kStoreSchemaVersion);
    EXPECT_TRUE(rw.stored_results().empty()) << "runs that ended before the migration have none";
    const int64_t next = rw.run_begin(RunStartRecord{"new"});
    rw.run_finish(next, run_status::completed, "", 0);
    ASSERT_EQ(rw.stored_results().size(), 1u);
    EXPECT_EQ(rw.stored_results()[0].run_id, next);
}

// Schema 5 renames the per-rank "pipeline/bubble" metric "pipeline/rank_idle": a version-4 file
// reads as written, and its writer's migration renames the rows and the stored results' names.
TEST(RunStoreSchema, VersionFourFileRenamesThePerRankIdleMetric) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    int64_t id = 0;
    {
        RunStore s = RunStore::open(path);
        id = s.run_begin(RunStartRecord{"pp2"});
        s.append(id, {MetricRecord{1, 0, "pipeline/bubble", 0.25, 1},
                      MetricRecord{1, 1, "pipeline/bubble", 0.5, 1},
                      MetricRecord{1, 0, std::string(metric::train_loss), 3.0, 1}});
        s.run_finish(id, run_status::completed, "", 1);
    }
    raw_exec(path, "DROP TABLE layer_times; PRAGMA user_version = 4;");
    {
        RunStore ro = RunStore::open(path, true);
        EXPECT_EQ(ro.schema_version(), 4);
        EXPECT_EQ(ro.metrics(id, "pipeline/bubble").size(), 2u);
        EXPECT_TRUE(ro.metrics(id, metric::pipeline_rank_idle).empty());
    }
    RunStore rw = RunStore::open(path);
    EXPECT_EQ(rw.schema_version(), kStoreSchemaVersion);
    EXPECT_TRUE(rw.metrics(id, "pipeline/bubble").empty());
    const std::vector<MetricRow> idle = rw.metrics(id, metric::pipeline_rank_idle);
    ASSERT_EQ(idle.size(), 2u);
    EXPECT_EQ(idle[0].value + idle[1].value, 0.75);
    EXPECT_EQ(rw.metrics(id, metric::train_loss).size(), 1u);
    const std::vector<RunResults> stored = rw.stored_results();
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_EQ(stored[0].metric_names,
              (std::vector<std::string>{"pipeline/rank_idle", std::string(metric::train_loss)}));
}

// Schema 6 adds each layer's measured times (LayerTimeRecord): written and read back by step, the
// step nearest a given one found; a version-5 file reads without them and migrates.
TEST(RunStoreSchema, LayerTimesRoundTripAndAVersionFiveFileMigrates) {
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    int64_t id = 0;
    {
        RunStore s = RunStore::open(path);
        id = s.run_begin(RunStartRecord{"pp2"});
        s.append(id, {LayerTimeRecord{9, 0, 0, 0, 0.001, 0.002},
                      LayerTimeRecord{9, 1, 1, 2, 0.004, 0.008},
                      LayerTimeRecord{9, 0, 0, 1, 0.003, 0.006},
                      LayerTimeRecord{19, 0, 0, 0, 0.0011, 0.0021}});
        const std::vector<LayerTimeRecord> at9 = s.layer_times(id, 9);
        ASSERT_EQ(at9.size(), 3u);
        EXPECT_EQ(at9[0].layer, 0);  // by layer
        EXPECT_EQ(at9[1].layer, 1);
        EXPECT_EQ(at9[1].forward_s, 0.003);
        EXPECT_EQ(at9[2].rank, 1);
        EXPECT_EQ(at9[2].stage, 1);
        EXPECT_EQ(at9[2].backward_s, 0.008);
        EXPECT_TRUE(s.layer_times(id, 10).empty());
        EXPECT_EQ(s.layer_time_step(id, 15), 9);  // the latest at or before
        EXPECT_EQ(s.layer_time_step(id, 19), 19);
        EXPECT_EQ(s.layer_time_step(id, 3), 9);  // none before: the first after
        EXPECT_EQ(s.layer_time_step(id, 400), 19);
        EXPECT_FALSE(s.layer_time_step(id + 1, 5).has_value());
        s.run_finish(id, run_status::completed, "", 20);
    }
    raw_exec(path, "DROP TABLE layer_times; PRAGMA user_version = 5;");
    {
        RunStore ro = RunStore::open(path, true);
        EXPECT_EQ(ro.schema_version(), 5);
        EXPECT_TRUE(ro.layer_times(id, 9).empty());
        EXPECT_FALSE(ro.layer_time_step(id, 9).has_value());
    }
    RunStore rw = RunStore::open(path);
    EXPECT_EQ(rw.schema_version(), kStoreSchemaVersion);
    rw.append(id, {LayerTimeRecord{29, 0, 0, 0, 0.5, 1.0}});
    EXPECT_EQ(rw.layer_times(id, 29).size(), 1u);
}
