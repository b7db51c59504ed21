// Command badger-driver replays a halflife op file on Badger v4, one of the peer drivers
// run by `halflife compare` (docs/bench.md, "The peer interface"):
//
//	badger-driver --ops FILE --dir DIR [--report FILE] [settings]
//
// It loads key numbers 0..record_count-1, replays the op file's run phase, runs value-log
// GC until it finds nothing to rewrite, and writes one JSON report (schema halflife-run/1)
// with its own /proc/self/io read last. Value-log GC runs all along in a goroutine:
// RunValueLogGC(discard ratio) in a loop until it reports nothing to collect, then a pause,
// as Badger's documentation recommends (nothing in Badger runs it by itself). Its memtable
// is sized to flush after as many writes as the other engines' (see memtableBytes), without
// which no compaction runs and GC reclaims nothing.
//
// Keys follow the workload crate's rule (crates/workload/src/keys.rs). Values are slices of
// one random 1 MiB pool at varying offsets: compression is off, so content does not
// change the bytes written.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"expvar"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

var opNames = []string{"insert", "update", "read", "scan", "rmw", "delete"}

type header struct {
	KeySize, ValueSize   uint32
	RecordCount, OpCount uint64
}

type op struct {
	code byte
	key  uint64
	n    uint32
}

func readHeader(r io.Reader) (header, error) {
	var b [32]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return header{}, fmt.Errorf("op-file header: %w", err)
	}
	if string(b[:8]) != "HLOPS001" {
		return header{}, fmt.Errorf("bad magic %q", b[:8])
	}
	return header{
		KeySize:     binary.LittleEndian.Uint32(b[8:]),
		ValueSize:   binary.LittleEndian.Uint32(b[12:]),
		RecordCount: binary.LittleEndian.Uint64(b[16:]),
		OpCount:     binary.LittleEndian.Uint64(b[24:]),
	}, nil
}

func readOp(r *bufio.Reader) (op, error) {
	var b [13]byte
	if _, err := io.ReadFull(r, b[:9]); err != nil {
		return op{}, err
	}
	o := op{code: b[0], key: binary.LittleEndian.Uint64(b[1:9])}
	if o.code > 5 {
		return op{}, fmt.Errorf("unknown op code %d", o.code)
	}
	if o.code == 3 {
		if _, err := io.ReadFull(r, b[9:13]); err != nil {
			return op{}, err
		}
		o.n = binary.LittleEndian.Uint32(b[9:13])
	}
	return o, nil
}

// formatKey writes the workload crate's key for keynum into out.
func formatKey(keynum uint64, keySize int, out []byte) []byte {
	out = out[:0]
	out = append(out, "user"...)
	if keySize >= 24 {
		h := uint64(0xcbf29ce484222325)
		k := keynum
		for i := 0; i < 8; i++ {
			h ^= k & 0xff
			h *= 0x100000001b3
			k >>= 8
		}
		s := strconv.FormatUint(h, 10)
		for i := len(s); i < 20; i++ {
			out = append(out, '0')
		}
		out = append(out, s...)
		for len(out) < keySize {
			out = append(out, 'x')
		}
		return out
	}
	if keySize <= 4 {
		return out[:keySize]
	}
	k := keynum
	for i := 0; i < keySize-4; i++ {
		out = append(out, byte('0'+k%10))
		k /= 10
	}
	return out
}

// histogram is log-linear in nanoseconds, 32 sub-buckets per power of two (about 3%).
type histogram struct {
	counts   map[uint32]uint64
	n, total uint64
	max      uint64
}

func newHistogram() *histogram { return &histogram{counts: map[uint32]uint64{}} }

func (h *histogram) record(ns uint64) {
	b := uint32(bits.Len64(ns))
	var idx uint32
	if b > 5 {
		idx = b<<5 | uint32((ns>>(b-6))&31)
	} else {
		idx = uint32(ns)
	}
	h.counts[idx]++
	h.n++
	h.total += ns
	if ns > h.max {
		h.max = ns
	}
}

func (h *histogram) value(idx uint32) float64 {
	if idx < 32 {
		return float64(idx)
	}
	b := idx >> 5
	low := uint64(1)<<(b-1) | uint64(idx&31)<<(b-6)
	width := uint64(1) << (b - 6)
	return float64(low) + float64(width)/2
}

func (h *histogram) quantile(q float64) float64 {
	keys := make([]uint32, 0, len(h.counts))
	for k := range h.counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	rank := uint64(q*float64(h.n) + 0.999999)
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for _, k := range keys {
		seen += h.counts[k]
		if seen >= rank {
			v := h.value(k)
			if v > float64(h.max) {
				v = float64(h.max)
			}
			return v
		}
	}
	return float64(h.max)
}

func (h *histogram) summary() map[string]any {
	if h.n == 0 {
		return nil
	}
	return map[string]any{
		"count": h.n,
		"mean":  float64(h.total) / float64(h.n) / 1000,
		"p50":   h.quantile(0.50) / 1000,
		"p99":   h.quantile(0.99) / 1000,
		"p999":  h.quantile(0.999) / 1000,
		"p9999": h.quantile(0.9999) / 1000,
		"max":   float64(h.max) / 1000,
	}
}

type progress struct {
	done, total uint64
	last        time.Time
}

func (p *progress) advance() {
	p.done++
	if p.done%256 == 0 || p.done == p.total {
		if now := time.Now(); now.Sub(p.last) > 200*time.Millisecond || p.done == p.total {
			p.last = now
			fmt.Fprintf(os.Stderr, "progress %d %d\n", p.done, p.total)
		}
	}
}

func procSelfIO() map[string]uint64 {
	out := map[string]uint64{}
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[strings.TrimSpace(k)] = n
		}
	}
	return out
}

// dirBytes sums the apparent sizes of the files under dir: all of them, the SSTs (.sst)
// and the value log (.vlog).
func dirBytes(dir string) (total, sst, vlog uint64) {
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n := uint64(info.Size())
				total += n
				switch filepath.Ext(path) {
				case ".sst":
					sst += n
				case ".vlog":
					vlog += n
				}
			}
		}
		return nil
	})
	return
}

// badgerCounters collects Badger's expvar counters (ints, and maps summed over their keys).
func badgerCounters() map[string]int64 {
	out := map[string]int64{}
	expvar.Do(func(kv expvar.KeyValue) {
		if !strings.HasPrefix(kv.Key, "badger_") {
			return
		}
		switch v := kv.Value.(type) {
		case *expvar.Int:
			out[kv.Key] = v.Value()
		case *expvar.Map:
			var sum int64
			v.Do(func(e expvar.KeyValue) {
				if i, ok := e.Value.(*expvar.Int); ok {
					sum += i.Value()
				}
			})
			out[kv.Key] = sum
		}
	})
	return out
}

// pointerEntryBytes is about what one write of a separated value takes in Badger's
// memtable (the skiplist arena, and likewise its .mem write-ahead file) besides the key:
// the 8-byte version, the 12-byte value pointer with its meta bytes, and the skiplist node.
const pointerEntryBytes = 64

// memtableBytes sizes Badger's memtable so that it flushes after as many writes as a
// memtable of `budget` bytes that holds the values, as every other engine's does.
//
// A value at or above the threshold goes straight to the value log and the memtable keeps
// only the key and a pointer, so a Badger memtable of the same byte size holds about
// (key + value) / (key + 64) times as many writes: 15x with 256-byte keys and 4 KiB values.
// It then flushes twice in a run that flushes the others' 30 times, no L0 compaction ever
// runs, and compactions are what record which value-log bytes are garbage (the discard
// statistics RunValueLogGC picks files by): value-log GC would find nothing to rewrite.
// Flushing at the same write count, Badger compacts as the others do and its GC reclaims.
func memtableBytes(budget int64, keySize, valueSize int, valueThreshold int64) int64 {
	if int64(valueSize) < valueThreshold {
		return budget
	}
	size := budget * int64(keySize+pointerEntryBytes) / int64(keySize+valueSize)
	const minSize = 1 << 20
	if size < minSize {
		return minSize
	}
	return size
}

func main() {
	opsPath := flag.String("ops", "", "op file written by `halflife compare`")
	dir := flag.String("dir", "", "database directory")
	reportPath := flag.String("report", "", "JSON report path (default: stdout)")
	name := flag.String("engine-name", "badger", "name in the report")
	memtableMB := flag.Int64("memtable-mb", 64, "memtable size in MiB")
	cacheMB := flag.Int64("cache-mb", 64, "block cache size in MiB")
	valueThreshold := flag.Int64("value-threshold", 512, "values at least this large go to the value log")
	vlogMB := flag.Int64("vlog-file-mb", 64, "value log file size in MiB")
	discard := flag.Float64("discard-ratio", 0.2, "RunValueLogGC discard ratio")
	syncWrites := flag.Bool("sync", false, "sync every write")
	flag.Parse()
	if *opsPath == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "--ops and --dir are required")
		os.Exit(2)
	}
	if err := run(*opsPath, *dir, *reportPath, *name, *memtableMB, *cacheMB, *valueThreshold, *vlogMB, *discard, *syncWrites); err != nil {
		fmt.Fprintln(os.Stderr, "badger-driver:", err)
		os.Exit(1)
	}
}

func run(opsPath, dir, reportPath, name string, memtableMB, cacheMB, valueThreshold, vlogMB int64, discard float64, syncWrites bool) error {
	f, err := os.Open(opsPath)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	h, err := readHeader(r)
	if err != nil {
		return err
	}
	keySize, valueSize := int(h.KeySize), int(h.ValueSize)
	memTableSize := memtableBytes(memtableMB<<20, keySize, valueSize, valueThreshold)

	opts := badger.DefaultOptions(dir).
		WithSyncWrites(syncWrites).
		WithMemTableSize(memTableSize).
		WithValueThreshold(valueThreshold).
		WithValueLogFileSize(vlogMB << 20).
		WithBlockCacheSize(cacheMB << 20).
		WithCompression(options.None).
		WithNumCompactors(2).
		WithMetricsEnabled(true).
		WithLogger(nil)
	db, err := badger.Open(opts)
	if err != nil {
		return err
	}

	// Value-log GC, all along.
	stop := make(chan struct{})
	var gcWG sync.WaitGroup
	var gcRewrites, gcRuns uint64
	gcMu := sync.Mutex{}
	gcWG.Add(1)
	go func() {
		defer gcWG.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			for {
				err := db.RunValueLogGC(discard)
				gcMu.Lock()
				gcRuns++
				if err == nil {
					gcRewrites++
				}
				gcMu.Unlock()
				if err != nil {
					break
				}
			}
		}
	}()

	rng := rand.New(rand.NewSource(42))
	const span = 1 << 20
	pool := make([]byte, span+valueSize)
	rng.Read(pool)
	offset := 0
	nextValue := func() []byte {
		v := pool[offset : offset+valueSize]
		offset = (offset + 4093) & (span - 1)
		return v
	}
	key := make([]byte, 0, keySize)
	prog := &progress{total: h.RecordCount + h.OpCount}
	var userBytes uint64
	put := func(k, v []byte) error {
		return db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) })
	}

	loadHist := newHistogram()
	t0 := time.Now()
	for k := uint64(0); k < h.RecordCount; k++ {
		key = formatKey(k, keySize, key)
		v := nextValue()
		s := time.Now()
		if err := put(key, v); err != nil {
			return err
		}
		loadHist.record(uint64(time.Since(s)))
		userBytes += uint64(keySize + valueSize)
		prog.advance()
	}
	loadSecs := time.Since(t0).Seconds()

	hists := make([]*histogram, len(opNames))
	for i := range hists {
		hists[i] = newHistogram()
	}
	var notFound uint64
	get := func(txn *badger.Txn, k []byte) error {
		item, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			notFound++
			return nil
		}
		if err != nil {
			return err
		}
		_, err = item.ValueCopy(nil)
		return err
	}
	t0 = time.Now()
	for i := uint64(0); i < h.OpCount; i++ {
		o, err := readOp(r)
		if err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
		key = formatKey(o.key, keySize, key)
		var s time.Time
		switch o.code {
		case 0, 1:
			v := nextValue()
			s = time.Now()
			err = put(key, v)
			userBytes += uint64(keySize + valueSize)
		case 2:
			s = time.Now()
			err = db.View(func(txn *badger.Txn) error { return get(txn, key) })
		case 3:
			s = time.Now()
			err = db.View(func(txn *badger.Txn) error {
				iopt := badger.DefaultIteratorOptions
				iopt.PrefetchSize = int(o.n)
				if iopt.PrefetchSize > 100 {
					iopt.PrefetchSize = 100
				}
				it := txn.NewIterator(iopt)
				defer it.Close()
				n := uint32(0)
				for it.Seek(key); it.Valid() && n < o.n; it.Next() {
					if _, err := it.Item().ValueCopy(nil); err != nil {
						return err
					}
					n++
				}
				return nil
			})
		case 4:
			v := nextValue()
			s = time.Now()
			err = db.Update(func(txn *badger.Txn) error {
				if err := get(txn, key); err != nil {
					return err
				}
				return txn.Set(key, v)
			})
			userBytes += uint64(keySize + valueSize)
		case 5:
			// A tombstone of the key; the next update re-creates it.
			s = time.Now()
			err = db.Update(func(txn *badger.Txn) error { return txn.Delete(key) })
			userBytes += uint64(keySize)
		}
		if err != nil {
			return fmt.Errorf("op %d (%s): %w", i, opNames[o.code], err)
		}
		hists[o.code].record(uint64(time.Since(s)))
		prog.advance()
	}
	runSecs := time.Since(t0).Seconds()

	// Settle: stop the background loop, then collect until GC finds nothing to rewrite.
	t0 = time.Now()
	close(stop)
	gcWG.Wait()
	for db.RunValueLogGC(discard) == nil {
		gcRewrites++
	}
	settleSecs := time.Since(t0).Seconds()

	counters := badgerCounters()
	levels := []map[string]any{}
	for _, l := range db.Levels() {
		levels = append(levels, map[string]any{"level": l.Level, "tables": l.NumTables, "bytes": l.Size})
	}
	if err := db.Close(); err != nil {
		return err
	}
	disk, lsm, vlog := dirBytes(dir)

	vlogW := counters["badger_write_bytes_vlog"]
	l0 := counters["badger_write_bytes_l0"]
	compaction := counters["badger_write_bytes_compaction"]
	latency := map[string]any{}
	for i, hh := range hists {
		if hh.n > 0 {
			latency[opNames[i]] = hh.summary()
		}
	}
	phase := func(ops uint64, secs float64) map[string]any {
		rate := 0.0
		if secs > 0 {
			rate = float64(ops) / secs
		}
		return map[string]any{"ops": ops, "seconds": secs, "ops_per_sec": rate}
	}
	report := map[string]any{
		"schema": "halflife-run/1",
		"engine": name,
		"settings": map[string]any{
			"memtable_mb": memtableMB, "memtable_bytes": memTableSize, "cache_mb": cacheMB,
			"value_threshold": valueThreshold,
			"vlog_file_mb":    vlogMB, "discard_ratio": discard, "sync": syncWrites,
			"compression": "none", "num_compactors": 2,
		},
		"workload": map[string]any{
			"record_count": h.RecordCount, "op_count": h.OpCount,
			"key_size": h.KeySize, "value_size": h.ValueSize,
		},
		"phases": map[string]any{
			"load":   phase(h.RecordCount, loadSecs),
			"run":    phase(h.OpCount, runSecs),
			"settle": phase(0, settleSecs),
		},
		"latency_us":         latency,
		"load_latency_us":    loadHist.summary(),
		"not_found":          notFound,
		"user_bytes_written": userBytes,
		// Badger's counters: value log (including GC rewrites), L0 flushes and compactions.
		// Writes to the memtables' own write-ahead files (.mem, memory-mapped) are not counted.
		"engine_bytes_written":  vlogW + l0 + compaction,
		"engine_bytes_by_cause": map[string]int64{"vlog": vlogW, "flush": l0, "compaction": compaction},
		"disk_bytes":            disk,
		"tree_bytes":            lsm,
		"value_file_bytes":      vlog,
		"live_user_bytes":       nil,
		"stall_micros":          0,
		"engine_stats": map[string]any{
			"expvar": counters, "levels": levels,
			"value_log_gc_rewrites": gcRewrites, "value_log_gc_calls": gcRuns,
		},
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		report["max_rss_bytes"] = ru.Maxrss * 1024
	}
	report["proc_io"] = procSelfIO()
	text, err := json.MarshalIndent(report, "", " ")
	if err != nil {
		return err
	}
	if reportPath == "" {
		_, err = os.Stdout.Write(append(text, '\n'))
		return err
	}
	return os.WriteFile(reportPath, text, 0o644)
}
