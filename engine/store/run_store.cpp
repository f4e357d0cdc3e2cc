// RunStore: runs.db on SQLite. Sections: sqlite helpers, schema + migrations, open, writing,
// reading, CSV export, the batching sink. See run_store.h and docs/telemetry.md for the design.
#include "engine/store/run_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>

#include "engine/core/error.h"
#include "engine/core/str_join.h"
#include "engine/telemetry/metric_names.h"

namespace tessera {

// ------------------------------------------------------------------------------------------------
// sqlite helpers

void detail::SqliteCloser::operator()(sqlite3* db) const {
    sqlite3_close_v2(db);
}
void detail::StmtFinalizer::operator()(sqlite3_stmt* st) const {
    sqlite3_finalize(st);
}

namespace {

[[noreturn]] void sql_fail(sqlite3* db, const std::string& path, const char* what) {
    int code = db ? sqlite3_extended_errcode(db) : SQLITE_ERROR;
    std::string msg = str_cat(path, ": ", what, ": ", db ? sqlite3_errmsg(db) : "out of memory",
                              " (sqlite code ", code, ")");
    if ((code & 0xff) == SQLITE_NOTADB || (code & 0xff) == SQLITE_CORRUPT) throw InputError(msg);
    throw Error(msg);
}

#define SQL_CHECK(expr, db, path, what)                                  \
    do {                                                                 \
        int rc_ = (expr);                                                \
        if (rc_ != SQLITE_OK && rc_ != SQLITE_DONE && rc_ != SQLITE_ROW) \
            sql_fail((db), (path), (what));                              \
    } while (0)

void sql_exec(sqlite3* db, const std::string& path, const char* sql) {
    SQL_CHECK(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), db, path, sql);
}

// A statement prepared for one read call; step() returns true while rows come.
struct Query {
    sqlite3* db;
    const std::string& path;
    detail::StmtPtr st;

    Query(sqlite3* db_, const std::string& path_, const char* sql) : db(db_), path(path_) {
        sqlite3_stmt* raw = nullptr;
        SQL_CHECK(sqlite3_prepare_v2(db, sql, -1, &raw, nullptr), db, path, sql);
        st.reset(raw);
    }
    Query& bind(int i, int64_t v) {
        sqlite3_bind_int64(st.get(), i, v);
        return *this;
    }
    Query& bind(int i, std::string_view v) {
        sqlite3_bind_text(st.get(), i, v.data(), int(v.size()), SQLITE_TRANSIENT);
        return *this;
    }
    bool step() {
        int rc = sqlite3_step(st.get());
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        sql_fail(db, path, sqlite3_sql(st.get()));
    }
    int64_t i64(int c) const { return sqlite3_column_int64(st.get(), c); }
    double f64(int c) const {
        // SQLite stores NaN as NULL; give it back as NaN.
        if (sqlite3_column_type(st.get(), c) == SQLITE_NULL)
            return std::numeric_limits<double>::quiet_NaN();
        return sqlite3_column_double(st.get(), c);
    }
    std::string str(int c) const {
        auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st.get(), c));
        return p ? std::string(p, size_t(sqlite3_column_bytes(st.get(), c))) : std::string();
    }
};

int pragma_int(sqlite3* db, const std::string& path, const char* sql) {
    Query q(db, path, sql);
    return q.step() ? int(q.i64(0)) : 0;
}

// BEGIN IMMEDIATE ... COMMIT; rolls back if destroyed before commit().
class Transaction {
  public:
    Transaction(sqlite3* db, const std::string& path) : db_(db), path_(path) {
        sql_exec(db_, path_, "BEGIN IMMEDIATE");
    }
    void commit() {
        sql_exec(db_, path_, "COMMIT");
        done_ = true;
    }
    ~Transaction() {
        if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }

  private:
    sqlite3* db_;
    const std::string& path_;
    bool done_ = false;
};

// ------------------------------------------------------------------------------------------------
// schema + migrations: kMigrations[i] takes user_version i to i+1. Never edit a shipped step;
// append a new one and bump kStoreSchemaVersion.

const char* kMigrations[] = {
    // 0 -> 1: the initial schema. The status CHECK spells out run_status's values
    // (engine/telemetry/metric_names.h), which therefore never change.
    R"sql(
CREATE TABLE runs (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL,
  config_text TEXT NOT NULL DEFAULT '',
  status      TEXT NOT NULL DEFAULT 'running'
              CHECK (status IN ('running','completed','failed','stopped')),
  message     TEXT NOT NULL DEFAULT '',
  start_time  REAL NOT NULL,            -- seconds since epoch
  end_time    REAL,                     -- NULL while running
  host        TEXT NOT NULL DEFAULT '',
  world_size  INTEGER NOT NULL DEFAULT 1,
  plan_json   TEXT NOT NULL DEFAULT '',
  last_step   INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE metrics (
  run_id    INTEGER NOT NULL REFERENCES runs(id),
  step      INTEGER NOT NULL,
  rank      INTEGER NOT NULL,
  name      TEXT NOT NULL,
  value     REAL,                       -- NULL = NaN
  wall_time REAL NOT NULL
);
CREATE INDEX metrics_run_name_step ON metrics(run_id, name, step);
CREATE TABLE spans (
  run_id      INTEGER NOT NULL REFERENCES runs(id),
  step        INTEGER NOT NULL,
  rank        INTEGER NOT NULL,
  stage       INTEGER NOT NULL,
  micro_batch INTEGER NOT NULL,         -- -1 = none
  kind        TEXT NOT NULL,
  start_s     REAL NOT NULL,            -- seconds since run start
  end_s       REAL NOT NULL
);
CREATE INDEX spans_run_step ON spans(run_id, step);
CREATE TABLE checkpoints (
  run_id    INTEGER NOT NULL REFERENCES runs(id),
  step      INTEGER NOT NULL,
  path      TEXT NOT NULL,
  wall_time REAL NOT NULL
);
CREATE TABLE errors (
  run_id    INTEGER NOT NULL REFERENCES runs(id),
  rank      INTEGER NOT NULL,
  step      INTEGER NOT NULL,
  message   TEXT NOT NULL,
  wall_time REAL NOT NULL
);
)sql",
    // 1 -> 2: the device each rank trained on (DeviceRecord); a restarted attempt's rank replaces
    // its row.
    R"sql(
CREATE TABLE devices (
  run_id       INTEGER NOT NULL REFERENCES runs(id),
  rank         INTEGER NOT NULL,
  host         TEXT NOT NULL,
  name         TEXT NOT NULL,           -- 'cpu' or the driver's name ('NVIDIA H200')
  memory_bytes INTEGER NOT NULL,        -- total device memory (cpu: the host's RAM)
  wall_time    REAL NOT NULL,
  PRIMARY KEY (run_id, rank)
);
)sql",
    // 2 -> 3: annotations, the one table the studio writes (run_annotate); tags joined by ','.
    R"sql(
CREATE TABLE annotations (
  run_id   INTEGER PRIMARY KEY REFERENCES runs(id),
  tags     TEXT NOT NULL DEFAULT '',
  note     TEXT NOT NULL DEFAULT '',
  archived INTEGER NOT NULL DEFAULT 0
);
)sql",
    // 3 -> 4: a finished run's results (RunResults), written by the run's writer as it ends (and
    // again if records arrive after the end); NULL = no finite value; names joined by '\n'.
    R"sql(
CREATE TABLE run_results (
  run_id           INTEGER PRIMARY KEY REFERENCES runs(id),
  final_val_loss   REAL,
  best_val_loss    REAL,
  median_tok_per_s REAL,
  peak_total_bytes REAL,
  metric_names     TEXT NOT NULL DEFAULT ''
);
)sql",
    // 4 -> 5: the per-rank pipeline idle figure is renamed "pipeline/rank_idle"; "pipeline/bubble"
    // named it too, and that name belongs to the pipeline's bubble measured from every rank's
    // spans (engine/telemetry/pipeline_spans.h). Rows and results keep their values.
    R"sql(
UPDATE metrics SET name = 'pipeline/rank_idle' WHERE name = 'pipeline/bubble';
UPDATE run_results SET metric_names = replace(metric_names, 'pipeline/bubble', 'pipeline/rank_idle')
  WHERE instr(metric_names, 'pipeline/bubble') > 0;
)sql",
    // 5 -> 6: each layer's measured forward and backward time on logged steps (LayerTimeRecord).
    R"sql(
CREATE TABLE layer_times (
  run_id     INTEGER NOT NULL REFERENCES runs(id),
  step       INTEGER NOT NULL,          -- 0-based, as spans
  rank       INTEGER NOT NULL,
  stage      INTEGER NOT NULL,
  layer      INTEGER NOT NULL,          -- forward order: 0 embedding, 1..L blocks, L + 1 head
  forward_s  REAL NOT NULL,             -- mean over the step's micro-batches
  backward_s REAL NOT NULL
);
CREATE INDEX layer_times_run_step ON layer_times(run_id, step);
)sql",
};
static_assert(std::size(kMigrations) == kStoreSchemaVersion);

void store_migrate(sqlite3* db, const std::string& path, int from) {
    for (int v = from; v < kStoreSchemaVersion; ++v) {
        Transaction tx(db, path);
        sql_exec(db, path, kMigrations[v]);
        sql_exec(db, path, str_cat("PRAGMA user_version = ", v + 1).c_str());
        tx.commit();
    }
}

bool file_exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// open

RunStore RunStore::open(const std::string& path, bool read_only) {
    if (!read_only && !file_exists(path)) {
        // Built under a temporary name (closing it folds the WAL into the file), then linked
        // into place: a link fails where another writer created the file meanwhile, whose
        // database then stands. A filesystem without hard links gets a rename.
        static std::atomic<int> serial{0};  // two threads of a process: two names
        const std::string tmp = str_cat(path, ".new-", ::getpid(), "-", serial++);
        ::unlink(tmp.c_str());
        try {
            RunStore fresh = open_file(tmp, false);
        } catch (const Error& e) {
            ::unlink(tmp.c_str());
            throw InputError(str_cat(path, ": cannot create the run database: ", e.what()));
        }
        if (::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST &&
            ::rename(tmp.c_str(), path.c_str()) != 0) {
            const int err = errno;
            ::unlink(tmp.c_str());
            throw InputError(
                str_cat(path, ": cannot create the run database: ", std::strerror(err)));
        }
        ::unlink(tmp.c_str());  // after a link (or nothing left after a rename)
    }
    return open_file(path, read_only);
}

RunStore RunStore::open_file(const std::string& path, bool read_only) {
    if (read_only && !file_exists(path))
        throw InputError(str_cat(path,
                                 ": run database not found (expected a runs.db written by "
                                 "`tessera train`)"));
    RunStore s;
    s.path_ = path;
    s.read_only_ = read_only;
    sqlite3* raw = nullptr;
    int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
    s.db_.reset(raw);
    if (rc != SQLITE_OK) {
        std::string msg = str_cat(
            path, ": cannot open run database: ", raw ? sqlite3_errmsg(raw) : "out of memory");
        throw InputError(msg);
    }
    sqlite3* db = s.db_.get();
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, 5000);

    // The first real read fails with SQLITE_NOTADB for a non-SQLite file.
    int app_id = 0, version = 0, n_objects = 0;
    try {
        app_id = pragma_int(db, path, "PRAGMA application_id");
        version = pragma_int(db, path, "PRAGMA user_version");
        n_objects = pragma_int(db, path, "SELECT count(*) FROM sqlite_master");
    } catch (const Error& e) {
        throw InputError(
            str_cat(path, ": not a Tessera run database (expected a SQLite file): ", e.what()));
    }
    bool fresh = n_objects == 0 && version == 0;
    if (!fresh && app_id != kStoreApplicationId)
        throw InputError(str_cat(path, ": not a Tessera run database (application_id ", app_id,
                                 ", expected ", kStoreApplicationId, ")"));
    if (version > kStoreSchemaVersion)
        throw InputError(str_cat(path, ": run database schema version ", version,
                                 " is newer than this build supports (", kStoreSchemaVersion,
                                 "); upgrade tessera"));
    if (read_only) {
        if (fresh) throw InputError(str_cat(path, ": empty file, not a Tessera run database"));
        if (version < kStoreOldestReadable)
            throw InputError(
                str_cat(path, ": run database schema version ", version, " is older than ",
                        kStoreOldestReadable,
                        "; open it once read-write (e.g. `tessera train`) to migrate"));
        return s;
    }

    // WAL: readers and the single writer do not block each other. NORMAL sync is durable
    // across process crashes; on power loss the last commits may be lost but the file stays
    // consistent.
    {
        Query q(db, path, "PRAGMA journal_mode = WAL");
        if (!q.step() || q.str(0) != "wal")
            throw Error(str_cat(path, ": cannot switch the run database to WAL mode"));
    }
    sql_exec(db, path, "PRAGMA synchronous = NORMAL");
    sql_exec(db, path, "PRAGMA cache_size = -32768");  // 32 MiB: keeps the metrics index hot
    if (fresh) sql_exec(db, path, str_cat("PRAGMA application_id = ", kStoreApplicationId).c_str());
    store_migrate(db, path, version);
    return s;
}

RunStore::~RunStore() = default;

int RunStore::schema_version() const {
    return pragma_int(db_.get(), path_, "PRAGMA user_version");
}

std::string RunStore::integrity_check() const {
    Query q(db_.get(), path_, "PRAGMA integrity_check");
    std::string out;
    while (q.step()) {
        if (!out.empty()) out += '\n';
        out += q.str(0);
    }
    return out;
}

// ------------------------------------------------------------------------------------------------
// writing

namespace {
enum Slot {
    kInsMetric,
    kInsSpan,
    kInsError,
    kInsCheckpoint,
    kFinish,
    kLastStep,
    kInsDevice,
    kEnded,
    kInsResults,
    kInsLayerTime,
    kNumSlots
};

// A real stored as NULL where it is absent: NaN (a metric's value; SQLite would store NULL
// anyway) or negative (a result the run did not measure).
struct RealOrNull {
    double v;
    bool null;
};
RealOrNull nan_as_null(double x) {
    return {x, std::isnan(x)};
}
RealOrNull negative_as_null(double x) {
    return {x, x < 0};
}

void bind_one(sqlite3_stmt* st, int i, int64_t v) {
    sqlite3_bind_int64(st, i, v);
}
void bind_one(sqlite3_stmt* st, int i, int v) {
    sqlite3_bind_int(st, i, v);
}
void bind_one(sqlite3_stmt* st, int i, double v) {
    sqlite3_bind_double(st, i, v);
}
void bind_one(sqlite3_stmt* st, int i, RealOrNull v) {
    if (v.null)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v.v);
}
// The text must outlive the statement's step (SQLITE_STATIC): every caller steps before the
// strings it bound go out of scope.
void bind_one(sqlite3_stmt* st, int i, const std::string& s) {
    sqlite3_bind_text(st, i, s.data(), int(s.size()), SQLITE_STATIC);
}
// Binds `values` to the statement's parameters 1, 2, ... in order.
template <typename... V>
void bind_row(sqlite3_stmt* st, const V&... values) {
    int i = 0;
    (bind_one(st, ++i, values), ...);
}
void check_status(const std::string& status) {
    if (!run_status::valid(status))
        throw InputError(str_cat("run status: expected ", run_status::completed, "|",
                                 run_status::failed, "|", run_status::stopped, ", found '", status,
                                 "'"));
}
}  // namespace

sqlite3_stmt* RunStore::cached(int slot, const char* sql) {
    if (read_only_) throw Error(str_cat(path_, ": run database opened read-only"));
    if (stmts_.size() < size_t(kNumSlots)) stmts_.resize(kNumSlots);
    if (!stmts_[slot]) {
        sqlite3_stmt* raw = nullptr;
        SQL_CHECK(sqlite3_prepare_v3(db_.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr),
                  db_.get(), path_, sql);
        stmts_[slot].reset(raw);
    }
    sqlite3_stmt* st = stmts_[slot].get();
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

int64_t RunStore::run_begin(const RunStartRecord& r) {
    if (read_only_) throw Error(str_cat(path_, ": run database opened read-only"));
    sqlite3* db = db_.get();
    Query q(db, path_,
            "INSERT INTO runs (name, config_text, status, start_time, host, world_size, plan_json) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)");
    q.bind(1, r.name).bind(2, r.config_text).bind(3, run_status::running);
    sqlite3_bind_double(q.st.get(), 4, r.wall_time > 0 ? r.wall_time : telemetry_now());
    q.bind(5, r.host).bind(6, int64_t(r.world_size)).bind(7, r.plan_json);
    q.step();
    return sqlite3_last_insert_rowid(db);
}

void RunStore::append(int64_t run_id, const std::vector<Record>& records) {
    if (records.empty()) return;
    sqlite3* db = db_.get();
    auto run_step = [&](sqlite3_stmt* st, const char* what) {
        int rc = sqlite3_step(st);
        if (rc != SQLITE_DONE) sql_fail(db, path_, what);
    };
    int64_t max_step = std::numeric_limits<int64_t>::min();
    bool ended = false, metrics = false;  // the batch ends the run; it holds metrics
    Transaction tx(db, path_);
    for (const Record& rec : records) {
        if (auto* m = std::get_if<MetricRecord>(&rec)) {
            sqlite3_stmt* st = cached(kInsMetric,
                                      "INSERT INTO metrics (run_id, step, rank, name, value, "
                                      "wall_time) VALUES (?, ?, ?, ?, ?, ?)");
            bind_row(st, run_id, m->step, m->rank, m->name, nan_as_null(m->value), m->wall_time);
            run_step(st, "insert metric");
            max_step = std::max(max_step, m->step);
            metrics = true;
        } else if (auto* s = std::get_if<SpanRecord>(&rec)) {
            sqlite3_stmt* st = cached(kInsSpan,
                                      "INSERT INTO spans (run_id, step, rank, stage, micro_batch, "
                                      "kind, start_s, end_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
            bind_row(st, run_id, s->step, s->rank, s->stage, s->micro_batch, s->kind, s->start_s,
                     s->end_s);
            run_step(st, "insert span");
        } else if (auto* e = std::get_if<ErrorRecord>(&rec)) {
            sqlite3_stmt* st = cached(kInsError,
                                      "INSERT INTO errors (run_id, rank, step, message, wall_time) "
                                      "VALUES (?, ?, ?, ?, ?)");
            bind_row(st, run_id, e->rank, e->step, e->message, e->wall_time);
            run_step(st, "insert error");
        } else if (auto* c = std::get_if<CheckpointRecord>(&rec)) {
            sqlite3_stmt* st = cached(kInsCheckpoint,
                                      "INSERT INTO checkpoints (run_id, step, path, wall_time) "
                                      "VALUES (?, ?, ?, ?)");
            bind_row(st, run_id, c->step, c->path, c->wall_time);
            run_step(st, "insert checkpoint");
            max_step = std::max(max_step, c->step);
        } else if (auto* end = std::get_if<RunEndRecord>(&rec)) {
            check_status(end->status);
            sqlite3_stmt* st = cached(kFinish,
                                      "UPDATE runs SET status = ?, message = ?, last_step = ?, "
                                      "end_time = ? WHERE id = ?");
            bind_row(st, end->status, end->message, end->last_step,
                     end->wall_time > 0 ? end->wall_time : telemetry_now(), run_id);
            run_step(st, "finish run");
            ended = true;
        } else if (auto* d = std::get_if<DeviceRecord>(&rec)) {
            sqlite3_stmt* st = cached(kInsDevice,
                                      "INSERT OR REPLACE INTO devices (run_id, rank, host, name, "
                                      "memory_bytes, wall_time) VALUES (?, ?, ?, ?, ?, ?)");
            bind_row(st, run_id, d->rank, d->host, d->name, d->memory_bytes, d->wall_time);
            run_step(st, "insert device");
        } else if (auto* l = std::get_if<LayerTimeRecord>(&rec)) {
            sqlite3_stmt* st = cached(kInsLayerTime,
                                      "INSERT INTO layer_times (run_id, step, rank, stage, layer, "
                                      "forward_s, backward_s) VALUES (?, ?, ?, ?, ?, ?, ?)");
            bind_row(st, run_id, l->step, l->rank, l->stage, l->layer, l->forward_s, l->backward_s);
            run_step(st, "insert layer time");
        } else {
            throw Error(str_cat(path_, ": append: a run_start record cannot be appended to run ",
                                run_id, " (use run_begin)"));
        }
    }
    if (max_step != std::numeric_limits<int64_t>::min()) {
        sqlite3_stmt* st =
            cached(kLastStep, "UPDATE runs SET last_step = max(last_step, ?) WHERE id = ?");
        bind_row(st, max_step, run_id);
        run_step(st, "update last_step");
    }
    // a finished run's results, as readers of many runs take them (metrics after the end too)
    if (!ended && metrics) {
        sqlite3_stmt* st = cached(kEnded, "SELECT end_time IS NOT NULL FROM runs WHERE id = ?");
        sqlite3_bind_int64(st, 1, run_id);
        ended = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) != 0;
        sqlite3_reset(st);
    }
    if (ended) {
        const RunResults r = run_results(run_id);
        sqlite3_stmt* st =
            cached(kInsResults,
                   "INSERT OR REPLACE INTO run_results (run_id, final_val_loss, best_val_loss, "
                   "median_tok_per_s, peak_total_bytes, metric_names) VALUES (?, ?, ?, ?, ?, ?)");
        const std::string names = str_join(r.metric_names, "\n");
        bind_row(st, run_id, negative_as_null(r.final_val_loss), negative_as_null(r.best_val_loss),
                 negative_as_null(r.median_tok_per_s), negative_as_null(r.peak_total_bytes), names);
        run_step(st, "store run results");
    }
    tx.commit();
}

void RunStore::run_finish(int64_t run_id, std::string_view status, const std::string& message,
                          int64_t last_step) {
    append(run_id, {RunEndRecord{std::string(status), message, last_step, telemetry_now()}});
}

// ------------------------------------------------------------------------------------------------
// reading

namespace {
// A list stored joined by `sep` (annotations' tags, run_results' metric names), empty items
// dropped.
std::vector<std::string> split_stored(const std::string& joined, char sep) {
    std::vector<std::string> out;
    for (size_t at = 0; at < joined.size();) {
        size_t end = joined.find(sep, at);
        if (end == std::string::npos) end = joined.size();
        if (end > at) out.push_back(joined.substr(at, end - at));
        at = end + 1;
    }
    return out;
}

const char* kRunCols =
    "SELECT id, name, config_text, status, message, start_time, coalesce(end_time, 0), host, "
    "world_size, plan_json, last_step FROM runs";

RunRow read_run(const Query& q) {
    RunRow r;
    r.id = q.i64(0);
    r.name = q.str(1);
    r.config_text = q.str(2);
    r.status = q.str(3);
    r.message = q.str(4);
    r.start_time = q.f64(5);
    r.end_time = q.f64(6);
    r.host = q.str(7);
    r.world_size = int(q.i64(8));
    r.plan_json = q.str(9);
    r.last_step = q.i64(10);
    return r;
}

const char* kMetricCols = "SELECT rowid, run_id, step, rank, name, value, wall_time FROM metrics";

MetricRow read_metric(const Query& q) {
    return MetricRow{q.i64(0), q.i64(1), q.i64(2), int(q.i64(3)), q.str(4), q.f64(5), q.f64(6)};
}
}  // namespace

std::vector<RunRow> RunStore::runs_list() const {
    Query q(db_.get(), path_, str_cat(kRunCols, " ORDER BY id").c_str());
    std::vector<RunRow> out;
    while (q.step()) out.push_back(read_run(q));
    return out;
}

std::optional<RunRow> RunStore::run_get(int64_t id) const {
    Query q(db_.get(), path_, str_cat(kRunCols, " WHERE id = ?").c_str());
    q.bind(1, id);
    if (!q.step()) return std::nullopt;
    return read_run(q);
}

std::vector<MetricRow> RunStore::metrics(int64_t run_id, std::string_view name,
                                         int64_t after_rowid) const {
    std::string sql = str_cat(kMetricCols, " WHERE run_id = ?1 AND rowid > ?2",
                              name.empty() ? "" : " AND name = ?3", " ORDER BY rowid");
    Query q(db_.get(), path_, sql.c_str());
    q.bind(1, run_id).bind(2, after_rowid);
    if (!name.empty()) q.bind(3, name);
    std::vector<MetricRow> out;
    while (q.step()) out.push_back(read_metric(q));
    return out;
}

std::vector<std::string> RunStore::metric_names(int64_t run_id) const {
    // A skip-scan of the (run_id, name, step) index: one seek per distinct name rather than a read
    // of every row (a 100k-step run has 100k rows per name; the Compare page asks for 1,000 runs).
    std::vector<std::string> out;
    for (;;) {
        Query q(db_.get(), path_,
                out.empty() ? "SELECT min(name) FROM metrics WHERE run_id = ?1"
                            : "SELECT min(name) FROM metrics WHERE run_id = ?1 AND name > ?2");
        q.bind(1, run_id);
        if (!out.empty()) q.bind(2, out.back());
        if (!q.step() || sqlite3_column_type(q.st.get(), 0) == SQLITE_NULL) break;
        out.push_back(q.str(0));
    }
    return out;
}

MetricSeries RunStore::metric_series(int64_t run_id, std::string_view name) const {
    // the (run_id, name, step) index gives step order; rowid breaks ties in insertion order
    Query q(db_.get(), path_,
            "SELECT step, rank, value, wall_time FROM metrics INDEXED BY metrics_run_name_step "
            "WHERE run_id = ? AND name = ? ORDER BY step, rowid");
    q.bind(1, run_id).bind(2, name);
    MetricSeries s;
    while (q.step()) {
        s.step.push_back(q.i64(0));
        s.rank.push_back(int(q.i64(1)));
        s.value.push_back(q.f64(2));
        s.wall_time.push_back(q.f64(3));
    }
    return s;
}

std::optional<MetricRow> RunStore::metric_last(int64_t run_id, std::string_view name) const {
    Query q(db_.get(), path_,
            str_cat(kMetricCols,
                    " WHERE run_id = ? AND name = ? ORDER BY step DESC, rowid DESC "
                    "LIMIT 1")
                .c_str());
    q.bind(1, run_id).bind(2, name);
    if (!q.step()) return std::nullopt;
    return read_metric(q);
}

std::vector<MetricRow> RunStore::metrics_latest(int64_t run_id) const {
    std::vector<MetricRow> out;
    for (const std::string& name : metric_names(run_id))
        if (auto m = metric_last(run_id, name)) out.push_back(*m);
    return out;
}

std::vector<SpanRecord> RunStore::spans(int64_t run_id, std::optional<int64_t> step) const {
    std::string sql = str_cat(
        "SELECT step, rank, stage, micro_batch, kind, start_s, end_s FROM spans WHERE run_id = ?1",
        step ? " AND step = ?2" : "", " ORDER BY step, rank, start_s, rowid");
    Query q(db_.get(), path_, sql.c_str());
    q.bind(1, run_id);
    if (step) q.bind(2, *step);
    std::vector<SpanRecord> out;
    while (q.step())
        out.push_back(SpanRecord{q.i64(0), int(q.i64(1)), int(q.i64(2)), int(q.i64(3)), q.str(4),
                                 q.f64(5), q.f64(6)});
    return out;
}

std::vector<LayerTimeRecord> RunStore::layer_times(int64_t run_id, int64_t step) const {
    if (schema_version() < 6) return {};  // a reader of an older file: no layer_times table
    Query q(db_.get(), path_,
            "SELECT step, rank, stage, layer, forward_s, backward_s FROM layer_times "
            "WHERE run_id = ? AND step = ? ORDER BY layer, rank");
    q.bind(1, run_id).bind(2, step);
    std::vector<LayerTimeRecord> out;
    while (q.step())
        out.push_back(LayerTimeRecord{q.i64(0), int(q.i64(1)), int(q.i64(2)), int(q.i64(3)),
                                      q.f64(4), q.f64(5)});
    return out;
}

std::optional<int64_t> RunStore::layer_time_step(int64_t run_id, int64_t step) const {
    if (schema_version() < 6) return std::nullopt;
    // the latest at or before `step`, else the first after it
    Query q(db_.get(), path_,
            "SELECT step FROM layer_times WHERE run_id = ?1 "
            "ORDER BY (step > ?2), abs(step - ?2) LIMIT 1");
    q.bind(1, run_id).bind(2, step);
    if (!q.step()) return std::nullopt;
    return q.i64(0);
}

std::vector<CheckpointRow> RunStore::checkpoints(int64_t run_id) const {
    Query q(db_.get(), path_,
            "SELECT step, path, wall_time FROM checkpoints WHERE run_id = ? ORDER BY step, rowid");
    q.bind(1, run_id);
    std::vector<CheckpointRow> out;
    while (q.step()) out.push_back(CheckpointRow{q.i64(0), q.str(1), q.f64(2)});
    return out;
}

std::vector<ErrorRow> RunStore::errors(int64_t run_id) const {
    Query q(db_.get(), path_,
            "SELECT rank, step, message, wall_time FROM errors WHERE run_id = ? ORDER BY rowid");
    q.bind(1, run_id);
    std::vector<ErrorRow> out;
    while (q.step()) out.push_back(ErrorRow{int(q.i64(0)), q.i64(1), q.str(2), q.f64(3)});
    return out;
}

std::vector<RunAnnotation> RunStore::annotations() const {
    if (schema_version() < 3) return {};  // a reader of an older file: no annotations table
    Query q(db_.get(), path_,
            "SELECT run_id, tags, note, archived FROM annotations ORDER BY run_id");
    std::vector<RunAnnotation> out;
    while (q.step()) {
        out.push_back(
            RunAnnotation{q.i64(0), split_stored(q.str(1), ','), q.str(2), q.i64(3) != 0});
    }
    return out;
}

RunResults RunStore::run_results(int64_t run_id) const {
    RunResults r;
    r.run_id = run_id;
    double best = std::numeric_limits<double>::infinity();
    for (double v : metric_series(run_id, metric::val_loss).value) {
        if (!std::isfinite(v)) continue;
        best = std::min(best, v);
        r.final_val_loss = v;
    }
    if (std::isfinite(best)) r.best_val_loss = best;
    std::vector<double> tok;
    for (double v : metric_series(run_id, metric::perf_tok_per_s).value)
        if (std::isfinite(v)) tok.push_back(v);
    if (!tok.empty()) {
        std::nth_element(tok.begin(), tok.begin() + std::ptrdiff_t(tok.size() / 2), tok.end());
        r.median_tok_per_s = tok[tok.size() / 2];
    }
    for (double v : metric_series(run_id, metric::mem_total_bytes).value)
        if (std::isfinite(v)) r.peak_total_bytes = std::max(r.peak_total_bytes, v);
    r.metric_names = metric_names(run_id);
    return r;
}

std::vector<RunResults> RunStore::stored_results() const {
    if (schema_version() < 4) return {};  // a reader of an older file: no run_results table
    Query q(db_.get(), path_,
            "SELECT run_id, final_val_loss, best_val_loss, median_tok_per_s, peak_total_bytes, "
            "metric_names "
            "FROM run_results ORDER BY run_id");
    auto opt = [&](int c) {
        return sqlite3_column_type(q.st.get(), c) == SQLITE_NULL ? -1.0 : q.f64(c);
    };
    std::vector<RunResults> out;
    while (q.step()) {
        out.push_back(
            RunResults{q.i64(0), opt(1), opt(2), opt(3), opt(4), split_stored(q.str(5), '\n')});
    }
    return out;
}

std::vector<DeviceRecord> RunStore::devices(int64_t run_id) const {
    if (schema_version() < 2) return {};  // a reader of an older file: no devices table
    Query q(db_.get(), path_,
            "SELECT rank, host, name, memory_bytes, wall_time FROM devices WHERE run_id = ? "
            "ORDER BY rank");
    q.bind(1, run_id);
    std::vector<DeviceRecord> out;
    while (q.step())
        out.push_back(DeviceRecord{int(q.i64(0)), q.str(1), q.str(2), q.i64(3), q.f64(4)});
    return out;
}

// ------------------------------------------------------------------------------------------------
// annotations

void RunStore::run_annotate(const RunAnnotation& a) {
    if (read_only_) throw Error(str_cat(path_, ": run database opened read-only"));
    std::string tags;
    std::vector<std::string_view> seen;
    for (const std::string& t : a.tags) {
        if (t.empty() || t.find_first_of(",\r\n") != std::string::npos)
            throw InputError(str_cat("run ", a.run_id, " tag '", t,
                                     "': expected a non-empty tag without commas or newlines"));
        if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
        seen.push_back(t);
        if (!tags.empty()) tags += ',';
        tags += t;
    }
    Transaction tx(db_.get(), path_);
    if (!run_get(a.run_id)) throw InputError(str_cat(path_, ": no run ", a.run_id, " to annotate"));
    Query q(
        db_.get(), path_,
        "INSERT OR REPLACE INTO annotations (run_id, tags, note, archived) VALUES (?, ?, ?, ?)");
    q.bind(1, a.run_id).bind(2, tags).bind(3, a.note).bind(4, int64_t(a.archived));
    q.step();
    tx.commit();
}

// ------------------------------------------------------------------------------------------------
// CSV export

namespace {
void csv_double(std::ostream& out, double x) {
    if (std::isnan(x)) {
        out << "nan";
        return;
    }
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, x);  // shortest round-trip form
    out.write(buf, res.ptr - buf);
}
void csv_text(std::ostream& out, const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) {
        out << s;
        return;
    }
    out << '"';
    for (char c : s) out << (c == '"' ? "\"\"" : std::string(1, c));
    out << '"';
}
}  // namespace

void RunStore::export_csv(std::ostream& out, const std::vector<int64_t>& run_ids) const {
    std::vector<int64_t> ids = run_ids;
    if (ids.empty())
        for (const RunRow& r : runs_list()) ids.push_back(r.id);
    out << "run,step,rank,name,value,wall_time\n";
    for (int64_t id : ids) {
        Query q(db_.get(), path_,
                "SELECT step, rank, name, value, wall_time FROM metrics WHERE run_id = ? "
                "ORDER BY rowid");
        q.bind(1, id);
        while (q.step()) {
            out << id << ',' << q.i64(0) << ',' << q.i64(1) << ',';
            csv_text(out, q.str(2));
            out << ',';
            csv_double(out, q.f64(3));
            out << ',';
            csv_double(out, q.f64(4));
            out << '\n';
        }
    }
}

// ------------------------------------------------------------------------------------------------
// batching sink

namespace {
class StoreSink final : public TelemetrySink {
  public:
    StoreSink(RunStore& store, int64_t run_id, int batch_rows)
        : store_(store), run_id_(run_id), batch_rows_(std::max(1, batch_rows)) {
        buf_.reserve(size_t(batch_rows_));
    }
    ~StoreSink() override {
        try {
            flush();
        } catch (...) {
            // A destructor cannot report; callers who care call flush() themselves.
        }
    }
    void write(const Record& r) override {
        buf_.push_back(r);
        if (int(buf_.size()) >= batch_rows_ || std::holds_alternative<RunEndRecord>(r)) flush();
    }
    void flush() override {
        if (buf_.empty()) return;
        store_.append(run_id_, buf_);
        buf_.clear();
    }

  private:
    RunStore& store_;
    int64_t run_id_;
    int batch_rows_;
    std::vector<Record> buf_;
};
}  // namespace

std::unique_ptr<TelemetrySink> store_sink(RunStore& store, int64_t run_id, int batch_rows) {
    return std::make_unique<StoreSink>(store, run_id, batch_rows);
}

}  // namespace tessera
