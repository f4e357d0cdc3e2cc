// Run store: runs.db, the SQLite file that holds every run's config, metrics, spans, checkpoints
// and errors. Qt-free; the CLI (`tessera runs`) and the studio both read it.
//
// Design (docs/telemetry.md): WAL journal, one writer process per run (the launcher, or the rank
// that began the run where there is no launcher of ours) appending batches in
// `BEGIN IMMEDIATE` transactions, any number of reader connections polling concurrently (readers
// never block the writer and never see half a batch). The one exception to the single writer:
// run annotations (tags, note, archived), which the studio writes through run_annotate() into
// their own table, never touching a row the launcher writes. busy_timeout is 5000 ms. The schema
// version lives in `PRAGMA user_version`, the file is tagged with `PRAGMA application_id`, and
// opening runs the migration steps from the file's version up to kStoreSchemaVersion.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/telemetry/telemetry.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tessera {

inline constexpr int kStoreSchemaVersion = 6;
// The oldest schema a read-only RunStore reads (a reader never migrates): what a later step added
// is simply absent from an older file (devices() is empty before version 2, annotations() before
// version 3, stored_results() before version 4), and a file before version 5 holds the per-rank
// pipeline idle figure under its old name, "pipeline/bubble", until a writer opens it.
inline constexpr int kStoreOldestReadable = 1;
inline constexpr int kStoreApplicationId = 0x54535352;  // "TSSR"

// One row of `runs`. end_time is 0 while the run is still running.
struct RunRow {
    int64_t id = 0;
    std::string name;
    std::string config_text;
    std::string status;  // run_status:: running|completed|failed|stopped
    std::string message;
    double start_time = 0;  // seconds since epoch
    double end_time = 0;
    std::string host;
    int world_size = 1;
    std::string plan_json;
    int64_t last_step = 0;
};

// One row of `metrics`. rowid grows with insertion order: pass the last one seen as after_rowid
// to read only what arrived since (live charts).
struct MetricRow {
    int64_t rowid = 0;
    int64_t run_id = 0;
    int64_t step = 0;
    int rank = 0;
    std::string name;
    double value = 0;  // NaN if the stored value was NaN
    double wall_time = 0;
};

// What a person wrote about a run (schema 3): tags (each non-empty, without commas or newlines;
// kept unique, in the order given), a free-text note, and archived (hidden from the run table).
struct RunAnnotation {
    int64_t run_id = 0;
    std::vector<std::string> tags;
    std::string note;
    bool archived = false;
};

// One metric of one run as columns, in step order (rows of a step in insertion order): what charts
// and summaries read, without a string per row.
struct MetricSeries {
    std::vector<int64_t> step;
    std::vector<int> rank;
    std::vector<double> value;  // NaN where the stored value was NaN
    std::vector<double> wall_time;
    size_t size() const { return step.size(); }
};

// What a run achieved, for tables of many runs (the studio's Compare page): computed from its
// metrics by run_results(), and stored by the writer as the run ends (schema 4: run_results), so
// a reader of 1,000 finished runs reads one table rather than their metrics. -1: no finite value
// of that metric was logged.
struct RunResults {
    int64_t run_id = 0;
    double final_val_loss = -1, best_val_loss = -1;  // the last and the lowest finite val/loss
    double median_tok_per_s = -1;                    // the median of the finite perf/tok_per_s
    double peak_total_bytes = -1;           // the largest mem/total_bytes, any rank or step
    std::vector<std::string> metric_names;  // every name the run logged, sorted
    bool operator==(const RunResults&) const = default;
};

struct CheckpointRow {
    int64_t step = 0;
    std::string path;
    double wall_time = 0;
};

struct ErrorRow {
    int rank = 0;
    int64_t step = 0;
    std::string message;
    double wall_time = 0;
};

namespace detail {
struct SqliteCloser {
    void operator()(sqlite3* db) const;
};
struct StmtFinalizer {
    void operator()(sqlite3_stmt* st) const;
};
using SqlitePtr = std::unique_ptr<sqlite3, SqliteCloser>;
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;
}  // namespace detail

class RunStore {
  public:
    // Opens (read-write: creating and migrating if needed) the database at `path`. Throws
    // InputError naming the file if it is missing (read-only), not a SQLite file, not a Tessera
    // run database, or has a newer schema than this build. A new database appears complete (its
    // schema written under a temporary name, then linked into place): a reader polling for the
    // file while a run starts never opens it empty.
    static RunStore open(const std::string& path, bool read_only = false);

    RunStore(RunStore&&) noexcept = default;
    RunStore& operator=(RunStore&&) noexcept = default;
    ~RunStore();

    const std::string& path() const { return path_; }
    bool read_only() const { return read_only_; }
    int schema_version() const;  // PRAGMA user_version

    // ---- writing (one writer process) ----
    int64_t run_begin(const RunStartRecord& r);  // status = running; returns the run id
    // All records in one transaction. RunEndRecord finishes the run; RunStartRecord is refused
    // (use run_begin). runs.last_step follows the highest step appended.
    void append(int64_t run_id, const std::vector<Record>& records);
    void run_finish(int64_t run_id, std::string_view status, const std::string& message,
                    int64_t last_step);
    // Replaces run a.run_id's annotation (one short transaction; the studio's only write). Throws
    // InputError for an unknown run or a bad tag.
    void run_annotate(const RunAnnotation& a);

    // ---- reading ----
    std::vector<RunRow> runs_list() const;  // by id
    std::optional<RunRow> run_get(int64_t id) const;
    // Metric rows with rowid > after_rowid (all names if name is empty), in insertion order.
    // Names: engine/telemetry/metric_names.h.
    std::vector<MetricRow> metrics(int64_t run_id, std::string_view name = {},
                                   int64_t after_rowid = 0) const;
    std::vector<std::string> metric_names(int64_t run_id) const;  // sorted
    MetricSeries metric_series(int64_t run_id, std::string_view name) const;
    std::optional<MetricRow> metric_last(int64_t run_id, std::string_view name) const;
    std::vector<MetricRow> metrics_latest(int64_t run_id) const;  // last row of each name
    std::vector<SpanRecord> spans(int64_t run_id, std::optional<int64_t> step = {}) const;
    // Each layer's measured times on one step (LayerTimeRecord), by layer then rank: empty for a
    // step without them (they are written on logged steps) and for a file older than version 6.
    std::vector<LayerTimeRecord> layer_times(int64_t run_id, int64_t step) const;
    // The step with layer times nearest `step`: the latest at or before it, else the first after.
    std::optional<int64_t> layer_time_step(int64_t run_id, int64_t step) const;
    std::vector<CheckpointRow> checkpoints(int64_t run_id) const;
    std::vector<ErrorRow> errors(int64_t run_id) const;
    // The device each rank recorded as it started (DeviceRecord), by rank: empty for a run none
    // recorded yet, and for every run of a file older than schema version 2.
    std::vector<DeviceRecord> devices(int64_t run_id) const;
    // Every annotated run's annotation, by run id: empty for a file older than schema version 3.
    std::vector<RunAnnotation> annotations() const;
    // A run's results from its metrics as they are now (a running run's too).
    RunResults run_results(int64_t run_id) const;
    // The results the writer stored for finished runs, by run id: empty for a file older than
    // schema version 4 (and without the runs that finished before it was migrated).
    std::vector<RunResults> stored_results() const;
    // CSV with header run,step,rank,name,value,wall_time; every run if run_ids is empty.
    void export_csv(std::ostream& out, const std::vector<int64_t>& run_ids) const;
    std::string integrity_check() const;  // "ok" when fine

  private:
    RunStore() = default;
    static RunStore open_file(const std::string& path, bool read_only);  // open, without the above
    sqlite3_stmt* cached(int slot, const char* sql);  // prepared writer statements

    std::string path_;
    bool read_only_ = false;
    detail::SqlitePtr db_;                // declared first: destroyed after the statements
    std::vector<detail::StmtPtr> stmts_;  // writer statements, indexed by slot
};

// A sink that buffers records and appends them to `store` in one transaction per `batch_rows`
// records, on flush(), on a RunEndRecord, and on destruction. `store` must outlive the sink
// (and must not be moved while it exists).
std::unique_ptr<TelemetrySink> store_sink(RunStore& store, int64_t run_id, int batch_rows = 512);

}  // namespace tessera
