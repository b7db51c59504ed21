// Replays a halflife op file on RocksDB through its C++ API: the native RocksDB peer of
// `halflife compare` (docs/bench.md, "The peer interface"), with no interpreter in the loop.
//
//   rocksdb-driver --ops FILE --dir DIR --report FILE [--engine-name NAME]
//                  [--memtable-mb N] [--cache-mb N] [--background-jobs N] [--sync]
//                  [--compression none|lz4|zstd] [--ttl]
//                  [--blob --min-blob-size N --blob-file-mb N --age-cutoff F
//                   --force-threshold F]
//
// Built by `halflife compare` with `g++ -O2 -std=c++17 driver.cc -lrocksdb` against
// Debian's librocksdb-dev (RocksDB 7.8.3). It loads key numbers 0..record_count, replays the
// run phase, waits until no flush or compaction is pending or running (blob GC runs inside
// compactions), and writes one JSON report (schema halflife-run/1) with RocksDB's statistics
// tickers and properties.
//
// Keys and values are the workload crate's, byte for byte (crates/workload/src/keys.rs):
// key = "user" + 20-digit FNV-1a-64 of the key number, padded with 'x' (or the reversed
// low digits below 24 bytes); value = (keynum, version) header + a slice of the 1 MiB
// xoshiro256** pool seeded with VALUE_SEED. So this driver writes the same bytes as
// `halflife bench --ops` and the fjall driver, which matters once compression is on.
//
// Expiring updates (op code 6) need --ttl: every value then starts with the tick it
// expires at (8 bytes little endian, 0 for none; time is one tick per op, the load's and
// the run's ops in one count, as `halflife bench` keeps it), reads treat an expired value
// as absent, and a compaction filter removes expired values (RocksDB turns a removal into
// a deletion at the entry's sequence number, so no older version comes back). This is
// RocksDB's way to per-key TTLs (DBWithTTL keeps one TTL per column family, in wall-clock
// seconds, and so cannot replay per-key lifetimes counted in ops). The 8 bytes per value
// are not counted in the user bytes.

#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "rocksdb-driver: %s\n", msg.c_str());
  std::exit(2);
}

void check(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) die(std::string(what) + ": " + s.ToString());
}

// ---- keys and values (crates/workload/src/keys.rs and rng.rs) ----

uint64_t fnv1a64(uint64_t v) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int i = 0; i < 8; i++) {
    h = (h ^ (v & 0xff)) * 0x100000001b3ULL;
    v >>= 8;
  }
  return h;
}

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void format_key(uint64_t keynum, size_t key_size, std::string* out) {
  out->clear();
  if (key_size >= 24) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "user%020" PRIu64, fnv1a64(keynum));
    out->append(buf, 24);
    out->resize(key_size, 'x');
  } else if (key_size > 4) {
    out->append("user");
    uint64_t k = keynum;
    for (size_t i = 0; i < key_size - 4; i++) {
      out->push_back(static_cast<char>('0' + k % 10));
      k /= 10;
    }
  } else {
    out->append(std::string("user").substr(0, key_size));
  }
}

constexpr size_t kPool = 1 << 20;
constexpr uint64_t kValueSeed = 0x68616c666c696665ULL;  // "halflife"

class ValueGen {
 public:
  ValueGen() : pool_(kPool) {
    uint64_t x = kValueSeed, s[4];
    for (auto& w : s) {
      x += 0x9e3779b97f4a7c15ULL;
      w = mix64(x);
    }
    for (size_t i = 0; i < kPool; i += 8) {
      uint64_t r = rotl(s[1] * 5, 7) * 9;
      uint64_t t = s[1] << 17;
      s[2] ^= s[0];
      s[3] ^= s[1];
      s[1] ^= s[2];
      s[0] ^= s[3];
      s[2] ^= t;
      s[3] = rotl(s[3], 45);
      std::memcpy(&pool_[i], &r, 8);  // little endian, as to_le_bytes
    }
  }

  void fill(uint64_t keynum, uint64_t version, size_t size, std::string* out) const {
    out->clear();
    char head[16];
    std::memcpy(head, &keynum, 8);
    std::memcpy(head + 8, &version, 8);
    out->append(head, std::min<size_t>(size, 16));
    size_t off = mix64(mix64(keynum) ^ version) & (kPool - 1);
    while (out->size() < size) {
      size_t take = std::min(size - out->size(), kPool - off);
      out->append(&pool_[off], take);
      off = 0;
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::vector<char> pool_;
};

// ---- the op file (crates/workload/src/opfile.rs) ----

struct Header {
  uint32_t key_size, value_size;
  uint64_t record_count, op_count;
};

class OpReader {
 public:
  explicit OpReader(const std::string& path) : f_(path, std::ios::binary) {
    if (!f_) die(path + ": cannot open op file");
    char h[32];
    if (!f_.read(h, 32)) die(path + ": too short for an op-file header (32 bytes)");
    if (std::memcmp(h, "HLOPS001", 8) != 0) die(path + ": bad magic, expected HLOPS001");
    std::memcpy(&header.key_size, h + 8, 4);
    std::memcpy(&header.value_size, h + 12, 4);
    std::memcpy(&header.record_count, h + 16, 8);
    std::memcpy(&header.op_count, h + 24, 8);
    path_ = path;
  }

  // Reads the next record; false at the end (after checking there is nothing more).
  bool next(uint8_t* code, uint64_t* key, uint32_t* len) {
    if (read_ == header.op_count) {
      if (f_.peek() != EOF) die(path_ + ": trailing data after the declared ops");
      return false;
    }
    char r[9];
    if (!f_.read(r, 9)) die(path_ + ": truncated record " + std::to_string(read_));
    *code = static_cast<uint8_t>(r[0]);
    std::memcpy(key, r + 1, 8);
    *len = 0;  // a scan's length or an expiring update's TTL
    if (*code > 6) die(path_ + ": unknown op code " + std::to_string(*code));
    if ((*code == 3 || *code == 6) && !f_.read(reinterpret_cast<char*>(len), 4))
      die(path_ + ": truncated record " + std::to_string(read_));
    read_++;
    return true;
  }

  Header header{};

 private:
  std::ifstream f_;
  std::string path_;
  uint64_t read_ = 0;
};

// ---- latency (log-linear buckets, 32 per power of two: within about 3%) ----

class Histogram {
 public:
  void record(uint64_t ns) {
    int b = ns == 0 ? 0 : 64 - __builtin_clzll(ns);
    size_t idx = b > 5 ? (static_cast<size_t>(b) << 5) | ((ns >> (b - 6)) & 31) : ns;
    if (idx >= counts_.size()) counts_.resize(idx + 1);
    counts_[idx]++;
    n_++;
    total_ += ns;
    max_ = std::max(max_, ns);
  }

  uint64_t count() const { return n_; }

  std::string summary_us() const {
    if (n_ == 0) return "null";
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "{\"count\": %" PRIu64
                  ", \"mean\": %.3f, \"p50\": %.3f, \"p99\": %.3f, \"p999\": %.3f, "
                  "\"p9999\": %.3f, \"max\": %.3f}",
                  n_, total_ / 1000.0 / n_, quantile(0.5) / 1000, quantile(0.99) / 1000,
                  quantile(0.999) / 1000, quantile(0.9999) / 1000, max_ / 1000.0);
    return buf;
  }

 private:
  double value(size_t idx) const {
    if (idx < 32) return static_cast<double>(idx);
    size_t b = idx >> 5;
    double low = static_cast<double>((1ULL << (b - 1)) | ((idx & 31) << (b - 6)));
    return low + static_cast<double>(1ULL << (b - 6)) / 2;
  }

  double quantile(double q) const {
    uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(q * n_ + 0.999999));
    uint64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); i++) {
      seen += counts_[i];
      if (seen >= rank) return std::min(value(i), static_cast<double>(max_));
    }
    return static_cast<double>(max_);
  }

  std::vector<uint64_t> counts_;
  uint64_t n_ = 0, total_ = 0, max_ = 0;
};

// ---- process figures ----

std::map<std::string, uint64_t> proc_io() {
  std::map<std::string, uint64_t> out;
  std::ifstream f("/proc/self/io");
  std::string line;
  while (std::getline(f, line)) {
    auto colon = line.find(':');
    if (colon != std::string::npos)
      out[line.substr(0, colon)] = std::strtoull(line.c_str() + colon + 1, nullptr, 10);
  }
  return out;
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  return total;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o.push_back('\\');
    o.push_back(c);
  }
  return o + "\"";
}

// ---- expiry (--ttl) ----

// The current tick, read by the compaction filter on RocksDB's background threads.
std::atomic<uint64_t> g_tick{0};

constexpr size_t kExpiryLen = 8;

uint64_t expiry_of(const rocksdb::Slice& v) {
  uint64_t at = 0;
  if (v.size() >= kExpiryLen) std::memcpy(&at, v.data(), kExpiryLen);
  return at;
}

bool expired(const rocksdb::Slice& v) {
  uint64_t at = expiry_of(v);
  return at != 0 && at <= g_tick.load(std::memory_order_relaxed);
}

class ExpiryFilter : public rocksdb::CompactionFilter {
 public:
  bool Filter(int, const rocksdb::Slice&, const rocksdb::Slice& value, std::string*,
              bool*) const override {
    return expired(value);
  }
  const char* Name() const override { return "halflife-expiry"; }
};

struct Args {
  std::string ops, dir, report, name, compression = "none";
  uint64_t memtable_mb = 64, cache_mb = 64, background_jobs = 2;
  bool sync = false, blob = false, ttl = false;
  uint64_t min_blob_size = 512, blob_file_mb = 256;
  double age_cutoff = 0.8, force_threshold = 0.2;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    std::string f = argv[i];
    if (f == "--sync") {
      a.sync = true;
      continue;
    }
    if (f == "--blob") {
      a.blob = true;
      continue;
    }
    if (f == "--ttl") {
      a.ttl = true;
      continue;
    }
    if (i + 1 >= argc) die(f + " needs a value");
    std::string v = argv[++i];
    auto num = [&](const std::string& s) {
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (end == s.c_str() || *end != '\0' || d < 0) die(f + " " + s + ": not a number >= 0");
      return d;
    };
    if (f == "--ops") a.ops = v;
    else if (f == "--dir") a.dir = v;
    else if (f == "--report") a.report = v;
    else if (f == "--engine-name") a.name = v;
    else if (f == "--compression") a.compression = v;
    else if (f == "--memtable-mb") a.memtable_mb = static_cast<uint64_t>(num(v));
    else if (f == "--cache-mb") a.cache_mb = static_cast<uint64_t>(num(v));
    else if (f == "--background-jobs") a.background_jobs = static_cast<uint64_t>(num(v));
    else if (f == "--min-blob-size") a.min_blob_size = static_cast<uint64_t>(num(v));
    else if (f == "--blob-file-mb") a.blob_file_mb = static_cast<uint64_t>(num(v));
    else if (f == "--age-cutoff") a.age_cutoff = num(v);
    else if (f == "--force-threshold") a.force_threshold = num(v);
    else die("unknown flag " + f);
  }
  if (a.ops.empty() || a.dir.empty() || a.report.empty())
    die("--ops, --dir and --report are required");
  if (a.name.empty()) a.name = a.blob ? "rocksdb-native-blob" : "rocksdb-native";
  return a;
}

rocksdb::CompressionType compression(const std::string& name) {
  if (name == "none") return rocksdb::kNoCompression;
  if (name == "lz4") return rocksdb::kLZ4Compression;
  if (name == "zstd") return rocksdb::kZSTD;
  die("--compression " + name + ": use none, lz4 or zstd");
}

// Waits until no flush or compaction is pending or running, seen three times in a row.
void settle(rocksdb::DB* db) {
  const char* props[] = {"rocksdb.num-running-compactions", "rocksdb.num-running-flushes",
                         "rocksdb.compaction-pending", "rocksdb.mem-table-flush-pending"};
  int quiet = 0;
  while (quiet < 3) {
    bool busy = false;
    for (auto p : props) {
      uint64_t v = 0;
      busy |= db->GetIntProperty(p, &v) && v != 0;
    }
    quiet = busy ? 0 : quiet + 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  OpReader ops(a.ops);
  const Header h = ops.header;
  const size_t ks = h.key_size, vs = h.value_size;

  rocksdb::Options o;
  o.create_if_missing = true;
  o.write_buffer_size = a.memtable_mb << 20;
  o.max_background_jobs = static_cast<int>(a.background_jobs);
  o.compression = compression(a.compression);
  o.bottommost_compression = o.compression;
  o.statistics = rocksdb::CreateDBStatistics();
  if (a.blob) {
    o.enable_blob_files = true;
    o.min_blob_size = a.min_blob_size;
    o.blob_file_size = a.blob_file_mb << 20;
    o.blob_compression_type = o.compression;
    o.enable_blob_garbage_collection = true;
    o.blob_garbage_collection_age_cutoff = a.age_cutoff;
    o.blob_garbage_collection_force_threshold = a.force_threshold;
  }
  ExpiryFilter expiry_filter;
  if (a.ttl) o.compaction_filter = &expiry_filter;
  rocksdb::BlockBasedTableOptions t;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10, false));
  t.block_cache = rocksdb::NewLRUCache(a.cache_mb << 20);
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  rocksdb::DB* raw = nullptr;
  check(rocksdb::DB::Open(o, a.dir, &raw), ("opening RocksDB in " + a.dir).c_str());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteOptions wo;
  wo.sync = a.sync;
  rocksdb::ReadOptions ro;

  const auto io0 = proc_io();
  ValueGen values;
  std::string key, value, got;
  std::vector<uint32_t> versions(h.record_count, 0);
  uint64_t user_bytes = 0, not_found = 0, scanned = 0, done = 0;
  const uint64_t total = h.record_count + h.op_count;
  auto clock = [] { return std::chrono::steady_clock::now(); };
  auto ns = [](auto d) {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  };
  auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
  auto last_progress = clock();
  auto progress = [&] {
    if (++done % 1024 == 0 || done == total) {
      auto now = clock();
      if (now - last_progress >= std::chrono::milliseconds(200) || done == total) {
        last_progress = now;
        std::fprintf(stderr, "progress %" PRIu64 " %" PRIu64 "\n", done, total);
      }
    }
  };

  // With --ttl, `value` is the expiry tick and then the value.
  auto fill = [&](uint64_t keynum, uint64_t version, uint64_t expire_at) {
    values.fill(keynum, version, vs, &value);
    if (a.ttl) value.insert(0, reinterpret_cast<const char*>(&expire_at), kExpiryLen);
  };
  // A read's or scan's value, absent if it expired.
  auto live = [&](const rocksdb::Slice& v) { return !a.ttl || !expired(v); };

  Histogram load_lat;
  auto t0 = clock();
  for (uint64_t k = 0; k < h.record_count; k++) {
    format_key(k, ks, &key);
    fill(k, 0, 0);
    g_tick.store(k, std::memory_order_relaxed);
    auto s = clock();
    check(db->Put(wo, key, value), "put");
    load_lat.record(ns(clock() - s));
    user_bytes += ks + vs;
    progress();
  }
  const double load_secs = secs(clock() - t0);

  const char* names[] = {"insert", "update", "read", "scan", "rmw", "delete"};
  Histogram lat[6];
  uint8_t code;
  uint64_t k;
  uint32_t len;
  auto write = [&](uint64_t keynum, uint64_t expire_at) {
    if (keynum >= versions.size()) versions.resize(keynum + 1, 0);
    fill(keynum, ++versions[keynum], expire_at);
    check(db->Put(wo, key, value), "put");
    user_bytes += ks + vs;
  };
  t0 = clock();
  uint64_t tick = h.record_count;
  auto get = [&] {
    auto st = db->Get(ro, key, &got);
    if (st.IsNotFound() || (st.ok() && !live(got))) not_found++;
    else check(st, "get");
  };
  while (ops.next(&code, &k, &len)) {
    g_tick.store(tick, std::memory_order_relaxed);
    format_key(k, ks, &key);
    if (code == 6 && !a.ttl) die("expiring updates (op code 6) need --ttl");
    auto s = clock();
    switch (code) {
      case 0:
      case 1:
        write(k, 0);
        break;
      case 2:
        get();
        break;
      case 3: {
        std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
        uint32_t i = 0;
        for (it->Seek(key); i < len && it->Valid(); it->Next()) {
          if (!live(it->value())) continue;
          got.assign(it->key().data(), it->key().size());
          got.assign(it->value().data(), it->value().size());
          i++;
        }
        check(it->status(), "scan");
        scanned += i;
        break;
      }
      case 4:
        get();
        write(k, 0);
        break;
      case 6:
        write(k, tick + len);
        break;
      case 5:
        // A delete writes a tombstone of the key; the key's version count is kept, so the
        // update that re-creates it writes the next version (crates/workload/src/opfile.rs).
        check(db->Delete(wo, key), "delete");
        user_bytes += ks;
        break;
    }
    lat[code == 6 ? 1 : code].record(ns(clock() - s));  // an expiring update is an update
    tick++;
    progress();
  }
  const double run_secs = secs(clock() - t0);

  t0 = clock();
  settle(db.get());
  const double settle_secs = secs(clock() - t0);

  std::map<std::string, uint64_t> props;
  for (const char* p :
       {"rocksdb.total-sst-files-size", "rocksdb.live-sst-files-size",
        "rocksdb.total-blob-file-size", "rocksdb.live-blob-file-size",
        "rocksdb.live-blob-file-garbage-size", "rocksdb.num-blob-files",
        "rocksdb.estimate-num-keys", "rocksdb.num-live-versions",
        "rocksdb.cur-size-all-mem-tables", "rocksdb.block-cache-usage",
        "rocksdb.estimate-table-readers-mem"}) {
    uint64_t v = 0;
    if (db->GetIntProperty(p, &v)) props[p] = v;
  }
  auto& st = *o.statistics;
  auto ticker = [&](rocksdb::Tickers tk) { return st.getTickerCount(tk); };
  const uint64_t wal = ticker(rocksdb::WAL_FILE_BYTES);
  const uint64_t flush = ticker(rocksdb::FLUSH_WRITE_BYTES);
  const uint64_t compact = ticker(rocksdb::COMPACT_WRITE_BYTES);
  const uint64_t stall = ticker(rocksdb::STALL_MICROS);
  rocksdb::HistogramData stall_hist;
  st.histogramData(rocksdb::WRITE_STALL, &stall_hist);
  std::ostringstream tickers;
  bool first = true;
  for (const auto& [id, name] : rocksdb::TickersNameMap) {
    uint64_t v = st.getTickerCount(id);
    if (v == 0) continue;
    tickers << (first ? "" : ", ") << json_str(name) << ": " << v;
    first = false;
  }
  check(db->Close(), "closing RocksDB");
  db.reset();
  const uint64_t disk = dir_bytes(a.dir);
  const auto io1 = proc_io();

  auto phase = [](uint64_t n, double s) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "{\"ops\": %" PRIu64 ", \"seconds\": %.6f, \"ops_per_sec\": %.3f}", n, s,
                  s > 0 ? n / s : 0.0);
    return std::string(buf);
  };
  auto delta = [&](const char* key) {
    auto a1 = io1.count(key) ? io1.at(key) : 0, a0 = io0.count(key) ? io0.at(key) : 0;
    return a1 > a0 ? a1 - a0 : 0;
  };
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);

  std::ostringstream r;
  r << "{\n \"schema\": \"halflife-run/1\",\n \"engine\": " << json_str(a.name) << ",\n";
  r << " \"settings\": {\"memtable_mb\": " << a.memtable_mb << ", \"cache_mb\": " << a.cache_mb
    << ", \"background_jobs\": " << a.background_jobs
    << ", \"sync\": " << (a.sync ? "true" : "false") << ", \"blob\": " << (a.blob ? "true" : "false")
    << ", \"min_blob_size\": " << a.min_blob_size << ", \"blob_file_mb\": " << a.blob_file_mb
    << ", \"age_cutoff\": " << a.age_cutoff << ", \"force_threshold\": " << a.force_threshold
    << ", \"compression\": " << json_str(a.compression)
    << ", \"ttl\": " << (a.ttl ? "true" : "false") << ", \"rocksdb\": "
    << json_str(std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) + "." +
                std::to_string(ROCKSDB_PATCH))
    << "},\n";
  r << " \"workload\": {\"record_count\": " << h.record_count << ", \"op_count\": " << h.op_count
    << ", \"key_size\": " << h.key_size << ", \"value_size\": " << h.value_size << "},\n";
  r << " \"phases\": {\"load\": " << phase(h.record_count, load_secs)
    << ", \"run\": " << phase(h.op_count, run_secs) << ", \"settle\": " << phase(0, settle_secs)
    << "},\n";
  r << " \"latency_us\": {";
  first = true;
  for (int i = 0; i < 6; i++) {
    if (lat[i].count() == 0) continue;
    r << (first ? "" : ", ") << json_str(names[i]) << ": " << lat[i].summary_us();
    first = false;
  }
  r << "},\n \"load_latency_us\": " << load_lat.summary_us() << ",\n";
  r << " \"not_found\": " << not_found << ",\n \"scanned_entries\": " << scanned << ",\n";
  r << " \"user_bytes_written\": " << user_bytes << ",\n";
  // Flush and compaction bytes include the blob files they write (and blob GC, which runs
  // inside compactions).
  r << " \"engine_bytes_written\": " << wal + flush + compact << ",\n";
  r << " \"engine_bytes_by_cause\": {\"wal\": " << wal << ", \"flush\": " << flush
    << ", \"compaction\": " << compact << "},\n";
  r << " \"disk_bytes\": " << disk << ",\n";
  r << " \"tree_bytes\": " << props["rocksdb.total-sst-files-size"] << ",\n";
  r << " \"value_file_bytes\": " << (a.blob ? props["rocksdb.total-blob-file-size"] : 0) << ",\n";
  r << " \"live_user_bytes\": null,\n \"stall_micros\": " << stall << ",\n";
  r << " \"max_rss_bytes\": " << static_cast<uint64_t>(ru.ru_maxrss) * 1024 << ",\n";
  r << " \"proc_io\": {";
  first = true;
  for (const char* key : {"rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes",
                          "cancelled_write_bytes"}) {
    r << (first ? "" : ", ") << json_str(key) << ": " << delta(key);
    first = false;
  }
  r << "},\n \"engine_stats\": {\"tickers\": {" << tickers.str() << "}, \"properties\": {";
  first = true;
  for (const auto& [name, v] : props) {
    r << (first ? "" : ", ") << json_str(name) << ": " << v;
    first = false;
  }
  r << "}, \"write_stall\": {\"count\": " << stall_hist.count << ", \"p50\": " << stall_hist.median
    << ", \"p99\": " << stall_hist.percentile99 << ", \"max\": " << stall_hist.max << "}}\n}\n";
  std::ofstream out(a.report);
  out << r.str();
  if (!out) die("writing " + a.report);
  return 0;
}
