package ledger

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/nvdp-project/nvdp/ledger/internal/boltcheck"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// populatedLedger writes a closed ledger at dir/ledger.db with one curve and
// accounts a0..a{n-1}, account i charged i%7+1 releases, with charges
// racing so that they are group-committed; it returns its path and its
// accounts' releases by ID.
func populatedLedger(t testing.TB, dir string, n int) (string, map[string]uint64) {
	t.Helper()
	path := filepath.Join(dir, "ledger.db")
	if _, err := CreateFile(path); err != nil {
		t.Fatal(err)
	}
	l, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.RegisterCurve(gaussianGuarantee(1e-4), map[string]string{"model": strings.Repeat("a long model description ", 40)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		id := fmt.Sprintf("a%d", i)
		want[id] = uint64(i%7 + 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Charge(id, c, i%7+1, math.Inf(1)); err != nil {
				mu.Lock()
				t.Error(err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// releasesOf opens the ledger at path (read-only when ro) and returns its
// accounts' releases by ID.
func releasesOf(path string, ro bool) (map[string]uint64, error) {
	open := OpenFile
	if ro {
		open = OpenFileReadOnly
	}
	l, err := open(path)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	accts, err := l.Accounts()
	if err != nil {
		return nil, err
	}
	got := map[string]uint64{}
	for _, a := range accts {
		got[a.ID] = a.Releases
	}
	return got, nil
}

// pageOwners runs the structural check on the file at path and returns
// what holds each page (meta, freelist, a bucket's tree, free).
func pageOwners(t testing.TB, path string) (boltcheck.Info, map[uint64]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, owners, err := boltcheck.Pages(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return info, owners
}

// TestCheckBoltFileAgreesWithBbolt: the structural check passes the files
// bbolt writes (a ledger of many accounts with branch pages and an
// overflowing curve record, a backup of it) where bbolt's own Tx.Check
// finds nothing, and it walks every page bbolt holds.
func TestCheckBoltFileAgreesWithBbolt(t *testing.T) {
	dir := t.TempDir()
	path, want := populatedLedger(t, dir, 800)
	l, err := OpenFileReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	backup, err := l.Backup(dir)
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, backup.Path} {
		info, owners := pageOwners(t, p)
		if info.HWM < 16 {
			t.Fatalf("%s: %d pages: too small to exercise branch pages", p, info.HWM)
		}
		branches := 0
		for id := range info.HWM {
			if _, ok := owners[id]; !ok {
				t.Errorf("%s: page %d not accounted for", p, id)
			}
		}
		db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				t.Errorf("%s: bbolt's check: %v", p, err)
			}
			branches = tx.Bucket(bucketAccounts).Stats().BranchPageN
			return nil
		})
		db.Close()
		if branches == 0 {
			t.Errorf("%s: no branch page in the accounts' tree", p)
		}
		got, err := releasesOf(p, true)
		if err != nil || !mapsEqual(got, want) {
			t.Errorf("%s: accounts %d, err %v", p, len(got), err)
		}
	}
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// corruptCopy copies the file src to a new file in dir with edit applied
// to its bytes and returns its path.
func corruptCopy(t testing.TB, src, dir, name string, edit func([]byte) []byte) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, edit(slices.Clone(b)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantCorrupt checks that opening path (for writing and read-only) is the
// *CorruptError naming it, with no crash.
func wantCorrupt(t *testing.T, path, what string) {
	t.Helper()
	for _, ro := range []bool{false, true} {
		_, err := releasesOf(path, ro)
		var ce *CorruptError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "ledger "+path+" is corrupt: restore it from a backup") {
			t.Errorf("%s (read-only %v): %v, want the corrupt-ledger error", what, ro, err)
		}
	}
}

// TestCorruptLedgerFiles: a ledger truncated to 8-24 KiB, or with random
// bytes written over a page it uses (at 8 KiB, 16 KiB, every page), is the
// corrupt-ledger error at open, for writing and read-only, never a crash;
// random bytes over a free page change nothing.
func TestCorruptLedgerFiles(t *testing.T) {
	dir := t.TempDir()
	path, want := populatedLedger(t, dir, 800)
	info, owners := pageOwners(t, path)
	size := int64(info.HWM) * int64(info.PageSize)
	for _, kib := range []int64{8, 12, 16, 20, 24} {
		p := corruptCopy(t, path, dir, fmt.Sprintf("trunc%d.db", kib), func(b []byte) []byte { return b[:kib<<10] })
		wantCorrupt(t, p, fmt.Sprintf("truncated to %d KiB", kib))
	}
	p := corruptCopy(t, path, dir, "short.db", func(b []byte) []byte { return b[:size-1] })
	wantCorrupt(t, p, "one byte short")
	rng := rand.New(rand.NewPCG(1, 2))
	offsets := []int64{8 << 10, 16 << 10}
	for off := int64(0); off < size; off += int64(info.PageSize) {
		offsets = append(offsets, off)
	}
	var free int
	for i, off := range offsets {
		p := corruptCopy(t, path, dir, fmt.Sprintf("junk%d.db", i), func(b []byte) []byte {
			for j := range 512 {
				b[off+int64(j)] = byte(rng.Uint32())
			}
			return b
		})
		what := fmt.Sprintf("512 random bytes at %d (page %d, %s)", off, off/int64(info.PageSize), owners[uint64(off)/uint64(info.PageSize)])
		if owners[uint64(off)/uint64(info.PageSize)] == "free" {
			free++
			if got, err := releasesOf(p, false); err != nil || !mapsEqual(got, want) {
				t.Errorf("%s: %v (accounts %d), want the ledger unchanged", what, err, len(got))
			}
			continue
		}
		wantCorrupt(t, p, what)
	}
	t.Logf("%d pages of %d bytes, %d free", info.HWM, info.PageSize, free)
}

// TestLedgerBitFlips: a flipped bit anywhere in a ledger is an error at
// open, or leaves every account's count as it was: never a silent change
// of what a key has received (the structural check, the accounts'
// checksums, the curves' IDs), never a crash.
func TestLedgerBitFlips(t *testing.T) {
	dir := t.TempDir()
	path, want := populatedLedger(t, dir, 300)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 600
	if testing.Short() {
		n = 150
	}
	rng := rand.New(rand.NewPCG(3, 4))
	p := filepath.Join(dir, "flip.db")
	var refused int
	for range n {
		pos, bit := rng.IntN(len(orig)), rng.IntN(8)
		b := slices.Clone(orig)
		b[pos] ^= 1 << bit
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := releasesOf(p, true)
		switch {
		case err != nil && !strings.Contains(err.Error(), p):
			t.Errorf("flip at byte %d bit %d: error %v does not name the file", pos, bit, err)
		case err != nil:
			refused++
		case !mapsEqual(got, want):
			t.Fatalf("flip at byte %d bit %d: opened with other counts (%d accounts)", pos, bit, len(got))
		}
	}
	t.Logf("%d flips: %d refused, %d harmless (free pages, slack, descriptions)", n, refused, n-refused)
}

// FuzzLedgerFile: whatever the bytes, checking and opening a ledger file
// returns (an error or the accounts) and never crashes.
func FuzzLedgerFile(f *testing.F) {
	dir := f.TempDir()
	path, _ := populatedLedger(f, dir, 20)
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, uint(0))
	f.Add(b[:8<<10], uint(100))
	f.Fuzz(func(t *testing.T, b []byte, at uint) {
		p := filepath.Join(t.TempDir(), "fuzz.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		boltcheck.Check(bytes.NewReader(b), int64(len(b)))
		if _, err := releasesOf(p, true); err != nil && !strings.Contains(err.Error(), p) {
			t.Errorf("error %v does not name the file", err)
		}
	})
}

// TestMissingAndEmptyLedger: a missing ledger and an emptied one are errors
// at open that say so (never a new ledger); CreateFile makes a ledger
// once, and refuses an existing file, an empty one included, leaving it as
// it was.
func TestMissingAndEmptyLedger(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	for _, ro := range []bool{false, true} {
		_, err := releasesOf(path, ro)
		if !errors.Is(err, ErrNoLedger) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "ledger "+path+" does not exist: a ledger is created explicitly") {
			t.Errorf("missing (read-only %v): %v", ro, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("opening a missing ledger created %s", path)
		}
	}
	info, err := CreateFile(path)
	if err != nil || len(info.LedgerID) != 32 || info.Created == nil || info.Accounts != 0 || info.Format != FileFormat {
		t.Fatalf("CreateLedger: %+v, %v", info, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if _, err := CreateFile(path); !errors.Is(err, ErrExists) {
		t.Errorf("second CreateFile: %v", err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		if _, err := releasesOf(path, ro); !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), "ledger "+path+" is empty (0 bytes)") {
			t.Errorf("emptied (read-only %v): %v", ro, err)
		}
	}
	if _, err := CreateFile(path); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "exists (0 bytes)") {
		t.Errorf("CreateLedger over an emptied ledger: %v", err)
	}
	if st, _ := os.Stat(path); st.Size() != 0 {
		t.Errorf("CreateLedger wrote the emptied file (%d bytes)", st.Size())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// servingLedger opens a populated ledger (populatedLedger, n accounts) for
// charging, with its curve registered again.
func servingLedger(t *testing.T, n int) (*File, *Curve, map[string]uint64) {
	t.Helper()
	path, want := populatedLedger(t, t.TempDir(), n)
	l := openLedger(t, path)
	c, err := l.RegisterCurve(gaussianGuarantee(1e-4), nil)
	if err != nil {
		t.Fatal(err)
	}
	return l, c, want
}

// TestLedgerFileChangedWhileServing: once a serving ledger's file is
// removed, replaced, emptied or truncated, every charge and read fails with
// ErrUnavailable (the first failure stays), never charging a file no
// one reads and never crashing on the truncated map.
func TestLedgerFileChangedWhileServing(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		change       func(t *testing.T, path string)
	}{
		{"removed", "was removed", func(t *testing.T, path string) { os.Remove(path) }},
		{"replaced", "was replaced by another file", func(t *testing.T, path string) {
			other := filepath.Join(t.TempDir(), "other.db")
			if _, err := CreateFile(other); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"emptied", "was truncated to 0 bytes (it needs", func(t *testing.T, path string) { os.Truncate(path, 0) }},
		{"truncated", "was truncated to 8192 bytes (it needs", func(t *testing.T, path string) { os.Truncate(path, 8<<10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, c, _ := servingLedger(t, 400)
			if _, err := l.Charge("a1", c, 1, math.Inf(1)); err != nil {
				t.Fatal(err)
			}
			tc.change(t, l.Path())
			_, err := l.Charge("a1", c, 1, math.Inf(1))
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "ledger "+l.Path()+" "+tc.reason) ||
				!strings.Contains(err.Error(), "no release is charged or served any more") {
				t.Fatalf("charge after the change: %v", err)
			}
			if _, err := l.Balance("a399", c, math.Inf(1)); !errors.Is(err, ErrUnavailable) {
				t.Errorf("balance after the change: %v", err)
			}
			if err := l.Err(); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Err: %v", err)
			}
		})
	}
}

// TestLedgerReadFaultIsAnError: a read of a ledger whose file was truncated
// under bbolt's map (SIGBUS) is an error that makes the ledger unavailable,
// not a crash, even before any check of the path notices.
func TestLedgerReadFaultIsAnError(t *testing.T) {
	l, c, _ := servingLedger(t, 800)
	if err := os.Truncate(l.Path(), 8<<10); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 799; i >= 0 && err == nil; i-- { // Balance does not check the path: it reads the map
		_, err = l.Balance(fmt.Sprintf("a%d", i), c, math.Inf(1))
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "could not be read") {
		t.Fatalf("read of a truncated map: %v", err)
	}
	if _, err := l.Charge("a1", c, 1, math.Inf(1)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("charge after the fault: %v", err)
	}
}

// fileSum is the SHA-256 of the file at path.
func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestBackupAndRestore: a ledger whose file was removed while serving is
// rescued by a backup of the file the ledger holds open; the backup cannot
// be served (a rollback) until it is restored with the rollback
// acknowledged; the restored ledger holds every charge of the backup and
// records the restore; the backup itself is not changed.
func TestBackupAndRestore(t *testing.T) {
	l, c, want := servingLedger(t, 200)
	want["late"] = 3
	if _, err := l.Charge("late", c, 3, math.Inf(1)); err != nil {
		t.Fatal(err)
	}
	path := l.Path()
	os.Remove(path)
	if _, err := l.Charge("late", c, 1, math.Inf(1)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("charge after removal: %v", err)
	}
	bdir := t.TempDir()
	b, err := l.Backup(bdir)
	if err != nil {
		t.Fatal(err)
	}
	if b.Backup == nil || b.Backup.LedgerID != l.id || b.Backup.Source != path || b.Accounts != len(want) ||
		filepath.Dir(b.Path) != bdir || !strings.HasPrefix(filepath.Base(b.Path), "ledger.db.backup-"+l.id[:8]+"-") {
		t.Fatalf("backup %+v", b)
	}
	l.Close()
	sum := fileSum(t, b.Path)
	var bfe *BackupFileError
	if _, err := OpenFile(b.Path); !errors.As(err, &bfe) || bfe.Mark.Txid != b.Backup.Txid ||
		!strings.Contains(err.Error(), "is a backup of ledger "+l.id) || !strings.Contains(err.Error(), "would forget every charge made after it was taken") {
		t.Fatalf("serving the backup: %v", err)
	}
	if got, err := releasesOf(b.Path, true); err != nil || !mapsEqual(got, want) {
		t.Fatalf("backup read-only: %v, %d accounts", err, len(got))
	}
	if _, err := Restore(b.Path, path, false); !errors.Is(err, ErrRollbackNotAccepted) || !strings.Contains(err.Error(), "forgetting every charge made after the backup was taken") {
		t.Fatalf("restore without acknowledging: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a refused restore wrote the ledger")
	}
	rec, err := Restore(b.Path, path, true)
	if err != nil || rec.Backup == nil || rec.Backup.Txid != b.Backup.Txid || rec.Replaced != "" {
		t.Fatalf("restore: %+v, %v", rec, err)
	}
	got, err := releasesOf(path, false)
	if err != nil || !mapsEqual(got, want) {
		t.Fatalf("restored: %v, %d accounts", err, len(got))
	}
	r, err := OpenFileReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Info()
	r.Close()
	if err != nil || info.Backup != nil || len(info.Restores) != 1 || info.Restores[0].From != b.Path || info.LedgerID != l.id {
		t.Fatalf("restored ledger's info %+v, %v", info, err)
	}
	if fileSum(t, b.Path) != sum {
		t.Error("the restore changed the backup")
	}

	// Restoring again moves the ledger aside (never deleting it; its history
	// stays there) and records the restore; a held ledger is not moved.
	held := openLedger(t, path)
	if _, err := Restore(b.Path, path, true); err == nil || !strings.Contains(err.Error(), "open in another process") {
		t.Fatalf("restore over a held ledger: %v", err)
	}
	held.Close()
	rec, err = Restore(b.Path, path, true)
	if err != nil || !strings.HasPrefix(rec.Replaced, path+".replaced-") {
		t.Fatalf("second restore: %+v, %v", rec, err)
	}
	if _, err := releasesOf(rec.Replaced, true); err != nil {
		t.Errorf("the ledger moved aside: %v", err)
	}
	if info, _ = describe(path); len(info.Restores) != 1 || info.Restores[0].Replaced != rec.Replaced {
		t.Errorf("restores %+v", info.Restores)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// A corrupt backup is refused, the ledger untouched.
	bad := corruptCopy(t, b.Path, bdir, "bad.db", func(b []byte) []byte { return b[:8<<10] })
	before := fileSum(t, path)
	if _, err := Restore(bad, path, true); !errors.Is(err, ErrCorrupt) {
		t.Errorf("restore of a corrupt backup: %v", err)
	}
	if fileSum(t, path) != before {
		t.Error("a refused restore changed the ledger")
	}
	// A live ledger (no backup mark) is refused as a backup: restored, it
	// would be a second ledger with the same ID.
	fresh := filepath.Join(t.TempDir(), "new.db")
	if _, err := Restore(path, fresh, true); !errors.Is(err, ErrNotBackup) || !strings.Contains(err.Error(), "has no backup mark") {
		t.Errorf("restore of a live ledger: %v", err)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a refused restore wrote the ledger")
	}
}

// TestBackupUnderCharges: backups taken while charges commit are each a
// consistent state: each passes the check when opened, holds every
// account's count of before the charges (none lost) and at most its count
// after them, with a total that only grows; the ledger after the charges
// holds exactly the counts of before plus every charge, and so does the
// last backup; PruneBackups keeps the newest.
func TestBackupUnderCharges(t *testing.T) {
	l, c, before := servingLedger(t, 50)
	const workers, charges = 4, 100
	after := maps.Clone(before)
	for w := range workers {
		for i := range charges {
			after[fmt.Sprintf("w%d-%d", w, i%10)]++
		}
	}
	dir := t.TempDir()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range charges {
				if _, err := l.Charge(fmt.Sprintf("w%d-%d", w, i%10), c, 1, math.Inf(1)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	var totals []uint64
	var paths []string
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		b, err := l.Backup(dir)
		if err != nil {
			t.Fatal(err)
		}
		totals = append(totals, b.Releases)
		paths = append(paths, b.Path)
	}
	if got, err := l.Accounts(); err != nil || len(got) != len(after) {
		t.Fatalf("ledger after the charges: %d accounts, %v; want %d", len(got), err, len(after))
	} else {
		for _, a := range got {
			if a.Releases != after[a.ID] {
				t.Errorf("ledger: account %s has %d releases, want %d", a.ID, a.Releases, after[a.ID])
			}
		}
	}
	for i, p := range paths {
		got, err := releasesOf(p, true)
		if err != nil {
			t.Fatalf("backup %d: %v", i, err)
		}
		var total uint64
		for id, n := range got {
			total += n
			if n < before[id] || n > after[id] {
				t.Errorf("backup %d: account %s has %d releases, want %d..%d", i, id, n, before[id], after[id])
			}
		}
		for id, n := range before {
			if got[id] < n {
				t.Errorf("backup %d: account %s lost releases (%d, had %d)", i, id, got[id], n)
			}
		}
		if total != totals[i] {
			t.Errorf("backup %d: %d releases, its description says %d", i, total, totals[i])
		}
	}
	if last, _ := releasesOf(paths[len(paths)-1], true); !mapsEqual(last, after) {
		t.Errorf("the last backup differs from the ledger after the charges")
	}
	if !slices.IsSorted(totals) || totals[len(totals)-1] != sumOf(after) {
		t.Fatalf("backup totals %v, want rising to %d", totals, sumOf(after))
	}
	removed, err := l.PruneBackups(dir, 2)
	if err != nil || len(removed) != len(paths)-2 || !slices.Equal(removed, paths[:len(paths)-2]) {
		t.Fatalf("prune: %v %v (backups %d)", removed, err, len(paths))
	}
	t.Logf("%d backups during %d charges", len(paths), workers*charges)
}

// sumOf is the sum of m's values.
func sumOf(m map[string]uint64) uint64 {
	var s uint64
	for _, n := range m {
		s += n
	}
	return s
}

// TestLedgerReadOnly: the read-only open never writes the file (its bytes
// stay the same through Accounts, Info and Backup), reads a read-only file
// in a read-only directory, refuses charges, and cannot read a ledger a
// server holds.
func TestLedgerReadOnly(t *testing.T) {
	dir := t.TempDir()
	path, want := populatedLedger(t, dir, 50)
	sum := fileSum(t, path)
	st, _ := os.Stat(path)
	l, err := OpenFileReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := l.Accounts(); err != nil || len(got) != len(want) {
		t.Fatalf("accounts %d, %v", len(got), err)
	}
	if _, err := l.Backup(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge("a1", &Curve{ID: "x"}, 1, 1); !errors.Is(err, ErrReadOnly) {
		t.Errorf("charge: %v", err)
	}
	if _, err := l.RegisterCurve(gaussianGuarantee(0.1), nil); !errors.Is(err, ErrReadOnly) {
		t.Errorf("register: %v", err)
	}
	l.Close()
	if fileSum(t, path) != sum {
		t.Fatal("the read-only open changed the file")
	}
	if st2, _ := os.Stat(path); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("the read-only open touched the file")
	}
	os.Chmod(path, 0o444)
	os.Chmod(dir, 0o555)
	defer os.Chmod(dir, 0o755)
	if got, err := releasesOf(path, true); err != nil || !mapsEqual(got, want) {
		t.Errorf("read-only file in a read-only directory: %v", err)
	}
	os.Chmod(dir, 0o755)
	os.Chmod(path, 0o600)
	held := openLedger(t, path)
	if _, err := OpenFileReadOnly(path); err == nil || !strings.Contains(err.Error(), "open in another process") {
		t.Errorf("read-only open of a held ledger: %v", err)
	}
	held.Close()
}

// TestLedgerOfBeforeIDs: a ledger written before ledger IDs reads
// read-only as it is, and gets an ID when opened for charging.
func TestLedgerOfBeforeIDs(t *testing.T) {
	path, want := populatedLedger(t, t.TempDir(), 10)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		return errors.Join(m.Delete(metaLedgerID), m.Delete(metaCreated))
	})
	db.Close()
	if info, err := describe(path); err != nil || info.LedgerID != "" || info.Created != nil {
		t.Fatalf("old ledger read-only: %+v %v", info, err)
	}
	if got, err := releasesOf(path, false); err != nil || !mapsEqual(got, want) {
		t.Fatal(err)
	}
	if info, err := describe(path); err != nil || len(info.LedgerID) != 32 {
		t.Fatalf("old ledger after a charging open: %+v %v", info, err)
	}
}
